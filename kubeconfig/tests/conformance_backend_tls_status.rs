//! The status expectations of the BackendTLSPolicy conformance files
//! (`tests/data/gateway-api/BackendTLSPolicy*.yaml`, a
//! `backend_tls_policies` key; see the README), computed by the product:
//!
//! - each file's world as the other status runners build it
//!   (`conformance_status::documents`: our class, its Gateways, routes,
//!   Services, listener Secrets, namespaces), plus its policies, its
//!   manifest ConfigMaps and its `ca_config_maps` (a test CA's PEM in
//!   `ca.crt` for content `ca`, nothing for `missing`), all read by
//!   `parse_object`;
//! - for an expectation with `after_step: n`, the file's `status_steps`
//!   1..n applied first (JSON merge patches and creations, with
//!   `{CA_CERTIFICATE:<ns>/<name>}` replaced by that CA's PEM);
//! - a policy entry compared with the policy's `status.ancestors` as the
//!   live status writer computes them (`backend_tls_ancestors`, whose
//!   conditions are `Topology::backend_tls_policy_conditions`, the one
//!   rule the proxy follows too), as the suite's
//!   `BackendTLSPolicyMustHaveCondition` compares them: the entry naming
//!   the expected Gateway must hold each condition (`findConditionInList`:
//!   type, status and, unless null, reason), and every entry's conditions
//!   the policy's `metadata.generation` as `observedGeneration` (1 as
//!   applied, one more per patch step of the policy, as the API server
//!   counts); route entries with the shared route comparison.
//!
//! The differences the README records as known must persist word for
//! word; any other difference fails the test.

mod conformance_status;

use anyhow::{Context, Result, bail, ensure};
use conformance_status::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use switchyard_kubeconfig::live::{World, backend_tls_ancestors, route_parent_statuses};
use switchyard_kubeconfig::parse_object;
use switchyard_proto::model::{CONTROLLER_NAME, Resource};
use switchyard_test_support::listener_tls::TestCa;

/// Upstream expectations switchyard does not meet, each also in the
/// README's "Known differences" with the reason: `(file, the mismatch as
/// this checker words it)`.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

/// The BackendTLSPolicy files, as `(name, data)`.
fn backend_tls_files() -> Result<Vec<(String, Value)>> {
    case_files(|data| data["backend_tls_policies"].is_array())
}

/// The CAs of the file's `ca_config_maps` entries of content `ca`, by
/// `namespace/name`.
fn certificate_authorities(data: &Value) -> Result<BTreeMap<String, TestCa>> {
    let mut out = BTreeMap::new();
    for entry in data["ca_config_maps"].as_array().into_iter().flatten() {
        let ns = entry["namespace"]
            .as_str()
            .context("ca_config_maps[].namespace")?;
        let name = entry["name"].as_str().context("ca_config_maps[].name")?;
        match entry["content"].as_str() {
            Some("ca") => {
                out.insert(format!("{ns}/{name}"), TestCa::new(&format!("{ns}/{name}")));
            }
            Some("missing" | "manifest") => {}
            other => bail!("ca_config_maps {ns}/{name}: unknown content {other:?}"),
        }
    }
    Ok(out)
}

/// `text` with every `{CA_CERTIFICATE:<ns>/<name>}` replaced by that CA's
/// PEM.
fn with_ca_pems(value: &Value, cas: &BTreeMap<String, TestCa>) -> Result<Value> {
    Ok(match value {
        Value::String(s) => match s
            .strip_prefix("{CA_CERTIFICATE:")
            .and_then(|r| r.strip_suffix('}'))
        {
            Some(key) => json!(
                cas.get(key)
                    .with_context(|| format!("{s}: no such ca_config_maps entry"))?
                    .cert_pem
            ),
            None => value.clone(),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| with_ca_pems(v, cas))
                .collect::<Result<_>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), with_ca_pems(v, cas)?)))
                .collect::<Result<_>>()?,
        ),
        other => other.clone(),
    })
}

/// RFC 7386 JSON merge patch, as `client.MergeFrom` sends it.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(map) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            map.remove(key);
        } else {
            merge_patch(map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Applies `status_steps` 1..=`after` to the documents.
fn apply_steps(
    docs: &mut Vec<Value>,
    data: &Value,
    after: u64,
    cas: &BTreeMap<String, TestCa>,
) -> Result<()> {
    for step in data["status_steps"].as_array().into_iter().flatten() {
        let n = step["step"].as_u64().context("status_steps[].step")?;
        if n > after {
            break;
        }
        let kind = step["kind"].as_str().context("step kind")?;
        let object = step["object"].as_str().context("step object")?;
        let (ns, name) = object.split_once('/').context("step object ns/name")?;
        let find = |d: &Value| {
            d["kind"] == kind && d["metadata"]["namespace"] == ns && d["metadata"]["name"] == name
        };
        match step["action"].as_str() {
            Some("create") => {
                ensure!(!docs.iter().any(find), "step {n}: {kind} {object} exists");
                docs.push(with_ca_pems(&step["manifest"], cas)?);
            }
            Some("patch") => {
                let doc = docs
                    .iter_mut()
                    .find(|d| find(d))
                    .with_context(|| format!("step {n}: no {kind} {object}"))?;
                merge_patch(doc, &with_ca_pems(&step["merge_patch"], cas)?);
                if kind == "BackendTLSPolicy" {
                    let generation = doc["metadata"]["generation"].as_i64().unwrap_or(0);
                    doc["metadata"]["generation"] = json!(generation + 1);
                }
            }
            other => bail!("step {n}: unknown action {other:?}"),
        }
    }
    Ok(())
}

/// Every object of the file's world once steps 1..=`after` are applied.
fn world(
    name: &str,
    data: &Value,
    after: u64,
    cas: &BTreeMap<String, TestCa>,
    listener_ca: &TestCa,
) -> Result<Vec<Resource>> {
    let mut docs = documents(data, listener_ca)?;
    for list in ["backend_tls_policies", "config_maps"] {
        docs.extend(data[list].as_array().into_iter().flatten().cloned());
    }
    for (key, ca) in cas {
        let (ns, cm) = key.split_once('/').context("ns/name")?;
        docs.push(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"namespace": ns, "name": cm},
            "data": {"ca.crt": ca.cert_pem},
        }));
    }
    // The API server's metadata.generation: 1 when created, one more per
    // change of the spec (each patch step here changes it).
    for doc in docs.iter_mut().filter(|d| d["kind"] == "BackendTLSPolicy") {
        doc["metadata"]["generation"] = json!(1);
    }
    apply_steps(&mut docs, data, after, cas)?;
    docs.into_iter()
        .enumerate()
        .map(|(i, doc)| Ok(parse_object(name, i, doc)?))
        .collect()
}

/// What differs between a policy entry and the policy's status as the
/// live status writer computes it (`backend_tls_ancestors`): the entry of
/// the expected ancestor must hold the conditions, and every entry's
/// conditions the policy's generation (the suite's
/// `BackendTLSPolicyMustHaveCondition`).
fn policy_mismatches(expectation: &Value, resources: &[Resource]) -> Result<Vec<String>> {
    let name = expectation["policy"].as_str().context("policy")?;
    let ancestor = expectation["ancestor"].as_str().context("ancestor")?;
    let at = match expectation["after_step"].as_u64() {
        Some(n) => format!("policy {name} after step {n}"),
        None => format!("policy {name}"),
    };
    let Some(policy) = resources.iter().find_map(|r| match r {
        Resource::BackendTlsPolicy(p) if p.meta.object_name().to_string() == name => Some(p),
        _ => None,
    }) else {
        return Ok(vec![format!("{at}: not in the file")]);
    };
    let world = World::new(resources, CONTROLLER_NAME);
    let ancestors = backend_tls_ancestors(policy, &world, CONTROLLER_NAME);
    let mut out = Vec::new();
    for a in &ancestors {
        for c in &a.conditions {
            if c.observed_generation != policy.meta.k8s_generation {
                out.push(format!(
                    "{at} ancestor {}: {} has observedGeneration {:?}, the policy's generation is {:?}",
                    a.gateway, c.type_, c.observed_generation, policy.meta.k8s_generation
                ));
            }
        }
    }
    let Some(entry) = ancestors.iter().find(|a| a.gateway.to_string() == ancestor) else {
        let names: Vec<String> = ancestors.iter().map(|a| a.gateway.to_string()).collect();
        out.push(format!(
            "{at}: no ancestor {ancestor} among [{}]",
            names.join(", ")
        ));
        return Ok(out);
    };
    let actual = &entry.conditions;
    for c in expectation["conditions"]
        .as_array()
        .context("policy entry conditions")?
    {
        let type_ = c["type"].as_str().context("condition type")?;
        let status = c["status"].as_str().context("condition status")?;
        let reason = c["reason"].as_str();
        if !has_condition(actual, type_, status, reason) {
            out.push(format!(
                "{at}: no condition {type_} {status} {} among [{}]",
                reason.unwrap_or("(any reason)"),
                shown(actual)
            ));
        }
    }
    Ok(out)
}

/// Every mismatch of one file, each as `file: what`.
fn file_mismatches(name: &str, data: &Value) -> Result<Vec<String>> {
    let cas = certificate_authorities(data)?;
    let listener_ca = TestCa::new("conformance listener CA");
    let mut worlds: BTreeMap<u64, Vec<Resource>> = BTreeMap::new();
    let mut out = Vec::new();
    for e in data["status_expectations"]
        .as_array()
        .context("status_expectations")?
    {
        let after = e["after_step"].as_u64().unwrap_or(0);
        let resources = match worlds.entry(after) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(world(name, data, after, &cas, &listener_ca)?)
            }
        };
        let found = if e["policy"].is_string() {
            policy_mismatches(e, resources)?
        } else if let Some(nn) = e["route"].as_str() {
            let resources = alone(resources, e["parent"].as_str());
            let world = World::new(&resources, CONTROLLER_NAME);
            let route = resources
                .iter()
                .find_map(|r| match r {
                    Resource::HttpRoute(h) if h.meta.object_name().to_string() == nn => Some(h),
                    _ => None,
                })
                .with_context(|| format!("{name}: no route {nn}"))?;
            let statuses = route_parent_statuses(route, &world, None, None, CONTROLLER_NAME);
            route_mismatches(e, route, &statuses)?
        } else {
            bail!("{name}: status expectation of no known form: {e}");
        };
        out.extend(found.into_iter().map(|m| format!("{name}: {m}")));
    }
    Ok(out)
}

#[test]
fn backend_tls_status_expectations_hold_but_the_known_differences() -> Result<()> {
    let files = backend_tls_files()?;
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    ensure!(
        files.len() >= 6,
        "only {} BackendTLSPolicy files: {names:?}",
        files.len()
    );
    let mut policies = 0;
    let mut mismatches = Vec::new();
    for (name, data) in &files {
        policies += data["status_expectations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["policy"].is_string())
            .count();
        mismatches.extend(file_mismatches(name, data)?);
    }
    ensure!(
        policies >= 27,
        "only {policies} policy expectations checked"
    );
    let known: Vec<String> = KNOWN_DIFFERENCES
        .iter()
        .map(|(file, what)| format!("{file}: {what}"))
        .collect();
    let unexpected: Vec<&String> = mismatches.iter().filter(|m| !known.contains(m)).collect();
    let gone: Vec<&String> = known.iter().filter(|k| !mismatches.contains(k)).collect();
    assert!(
        unexpected.is_empty(),
        "status differs from the conformance expectations:\n{}",
        unexpected
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        gone.is_empty(),
        "known differences no longer seen (fixed? remove them here and from the README):\n{}",
        gone.iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    Ok(())
}

/// The comparison fails on a wrong status, reason or step: a passing file
/// is not a comparison that looks at nothing.
#[test]
fn the_comparison_catches_wrong_expectations() -> Result<()> {
    let files = backend_tls_files()?;
    let (name, data) = files
        .iter()
        .find(|(n, _)| n == "BackendTLSPolicy")
        .context("BackendTLSPolicy.yaml")?;
    assert_eq!(file_mismatches(name, data)?, Vec::<String>::new());
    // The entries of reconcile-test, as applied and after steps 1..4.
    let reconcile: Vec<usize> = data["status_expectations"]
        .as_array()
        .context("status_expectations")?
        .iter()
        .enumerate()
        .filter(|(_, e)| e["policy"] == "gateway-conformance-infra/reconcile-test")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(reconcile.len(), 5);
    let wrong = |i: usize, edit: &dyn Fn(&mut Value)| -> Result<Vec<String>> {
        let mut data = data.clone();
        edit(&mut data["status_expectations"][i]);
        file_mismatches(name, &data)
    };
    let one = |v: Vec<String>, needle: &str| {
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains(needle), "{v:?} lacks {needle}");
    };
    // After step 1 the policy names a ConfigMap that does not exist yet;
    // step 2 creates it: both False conditions are then wrong.
    let moved = wrong(reconcile[1], &|e| e["after_step"] = json!(2))?;
    assert_eq!(moved.len(), 2, "{moved:?}");
    assert!(
        moved[0].contains("reconcile-test after step 2: no condition Accepted False NoValidCACertificate among [Accepted True Accepted, ResolvedRefs True ResolvedRefs]")
            && moved[1].contains("no condition ResolvedRefs False InvalidCACertificateRef"),
        "{moved:?}"
    );
    one(
        wrong(reconcile[3], &|e| {
            e["conditions"][1]["reason"] = json!("InvalidKind");
        })?,
        "after step 3: no condition ResolvedRefs False InvalidKind among [Accepted False NoValidCACertificate, ResolvedRefs False InvalidCACertificateRef]",
    );
    // reconcile-test's Service is routed from same-namespace only.
    one(
        wrong(reconcile[0], &|e| {
            e["ancestor"] = json!("gateway-conformance-infra/same-namespace-with-https-listener");
        })?,
        "policy gateway-conformance-infra/reconcile-test: no ancestor gateway-conformance-infra/same-namespace-with-https-listener among [gateway-conformance-infra/same-namespace]",
    );
    one(
        wrong(reconcile[0], &|e| {
            e["conditions"][0]["status"] = json!("False")
        })?,
        "policy gateway-conformance-infra/reconcile-test: no condition Accepted False Accepted",
    );
    Ok(())
}

#[test]
fn a_merge_patch_replaces_lists_and_removes_nulls() {
    let mut doc = json!({"spec": {"a": [1, 2], "b": 1, "c": {"d": 1}}});
    merge_patch(
        &mut doc,
        &json!({"spec": {"a": [3], "b": null, "c": {"e": 2}}}),
    );
    assert_eq!(doc, json!({"spec": {"a": [3], "c": {"d": 1, "e": 2}}}));
}
