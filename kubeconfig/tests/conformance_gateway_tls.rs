//! The status expectations of the Gateway API conformance files that
//! declare their Secrets (`secrets`; the Gateway listener TLS tests of
//! `tests/data/gateway-api/`, see its README), computed by the product:
//! each file's objects, its Secrets as the file describes them (`valid`:
//! a test-CA certificate for the hosts; `malformed`: the suite's bytes;
//! `missing`: none), the namespaces and Services the suite's base
//! provides, all read by `parse_object`; then [`gateway_status`] with one
//! live proxy that bound every listener port, and
//! [`route_parent_statuses`]. Each Gateway is looked at alone (the file's
//! other Gateways left out), as the suite gives every Gateway an address
//! of its own: switchyard serves all its Gateways from one fleet, where
//! listeners of different Gateways on one port conflict
//! (GatewayInvalidTLSConfiguration's four all take 443 without a hostname).
//!
//! Expectations are compared the way the suite compares them
//! (`conformance/utils/kubernetes/helpers.go`): a listener condition
//! matches on type, status and reason (no reason: any);
//! `supportedKinds` must contain the expected kinds; `attachedRoutes` is
//! equal; with `exact_listeners` the Gateway lists exactly as many
//! listeners. The differences the README records as known are expected
//! to persist, word for word: a fix makes this test fail until the entry
//! is removed from both places; any other difference fails it too. So
//! are the README's differences from the spec that no upstream case
//! exercises, each checked on a variant of an upstream file
//! ([`SPEC_DIFFERENCES`]).

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use switchyard_kubeconfig::live::{
    Condition, GatewayStatus, ListenerStatus, RouteParentStatus, World, gateway_status,
    route_parent_statuses,
};
use switchyard_kubeconfig::parse_object;
use switchyard_proto::model::{
    CONTROLLER_NAME, Gateway, HttpRoute, ListenerBinding, ProxyStatus, Resource,
};
use switchyard_test_support::conformance_secrets::{declares_secrets, secret_documents};
use switchyard_test_support::fixtures;
use switchyard_test_support::listener_tls::TestCa;

const CLASS: &str = "switchyard";

/// Differences between switchyard and an upstream expectation, each also
/// in the README's "Known differences" with the reason: `(file, the
/// mismatch as this checker words it)`.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[(
    "GatewayWithAttachedRoutes",
    "Gateway gateway-conformance-infra/unresolved-gateway-with-one-attached-unresolved-route listener tls: attachedRoutes is 0, expected 1",
)];

/// Differences between switchyard and the spec that no upstream case in
/// these files exercises, each also in the README's "Known differences":
/// `(name, the mismatch as this checker words it, the condition computed
/// instead)`. Checked by [`spec_differences_persist`] on a variant of an
/// upstream file, labelled as derived from the spec, not as a case of the
/// suite.
const SPEC_DIFFERENCES: &[(&str, &str, &str)] = &[(
    "CrossNamespaceUnsupportedKindWithoutGrant",
    "Gateway gateway-conformance-infra/gateway-secret-missing-reference-grant listener https: no condition ResolvedRefs False RefNotPermitted",
    "ResolvedRefs False InvalidCertificateRef",
)];

/// The files with a `secrets` key, as `(name, data)`.
fn tls_files() -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for path in switchyard_test_support::gateway_api_case_files() {
        let text = std::fs::read_to_string(&path)?.replace("{GATEWAY_CLASS_NAME}", CLASS);
        let data: Value =
            yaml_serde::from_str(&text).with_context(|| path.display().to_string())?;
        if declares_secrets(&data) {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .context("file name")?;
            out.push((name.to_string(), data));
        }
    }
    Ok(out)
}

/// Labels of the suite's base namespaces (the README's table), plus the
/// one Kubernetes puts on every namespace.
fn namespace_document(name: &str) -> Value {
    let mut labels = json!({"kubernetes.io/metadata.name": name});
    let role = match name {
        "gateway-conformance-infra" => Some("infra"),
        "gateway-conformance-app-backend" | "gateway-conformance-web-backend" => Some("backend"),
        _ => None,
    };
    if let Some(role) = role {
        labels["gateway-conformance"] = json!(role);
    }
    fixtures::with_labels(fixtures::namespace(name), labels)
}

/// Every object the file's world holds, as documents: our class, the
/// file's Gateways, routes and grants, its Secrets, the base Services it
/// uses and the namespaces of all of them.
fn documents(data: &Value, ca: &TestCa) -> Result<Vec<Value>> {
    let mut docs = vec![fixtures::gateway_class(CLASS, CONTROLLER_NAME)];
    for list in ["gateways", "routes", "reference_grants"] {
        docs.extend(data[list].as_array().into_iter().flatten().cloned());
    }
    // Status reads no name off the certificate: the file's hosts alone.
    docs.extend(secret_documents(data, ca, &[]).map_err(anyhow::Error::msg)?);
    let mut namespaces: BTreeSet<String> = docs
        .iter()
        .filter_map(|d| d["metadata"]["namespace"].as_str())
        .map(str::to_string)
        .collect();
    for backend in data["backends"].as_array().into_iter().flatten() {
        if !backend["exists_in_base"].as_bool().unwrap_or(false) {
            continue;
        }
        let service = backend["service"].as_str().context("backends[].service")?;
        let (ns, rest) = service.split_once('/').context("ns/name:port")?;
        let (name, port) = rest.split_once(':').context("ns/name:port")?;
        let port: u16 = port.parse()?;
        namespaces.insert(ns.to_string());
        docs.push(fixtures::service(ns, name, json!([{"port": port}])));
    }
    docs.extend(namespaces.iter().map(|ns| namespace_document(ns)));
    Ok(docs)
}

/// One live proxy that bound every port a listener of the file names.
fn proxy_with_every_port(resources: &[Resource]) -> Vec<ProxyStatus> {
    let ports: BTreeSet<u16> = resources
        .iter()
        .filter_map(|r| match r {
            Resource::Gateway(g) => Some(g),
            _ => None,
        })
        .flat_map(|g| g.listeners.iter().map(|l| l.port))
        .collect();
    let sockets = ports
        .into_iter()
        .map(|port| ListenerBinding {
            gateway: None,
            port,
            address: format!("127.0.0.1:{port}"),
            bound: true,
            error: None,
        })
        .collect();
    vec![ProxyStatus {
        id: "conformance".into(),
        live: true,
        listeners: Some(sockets),
        ..ProxyStatus::default()
    }]
}

/// The suite's `findConditionInList`: a condition of the type with the
/// status and, unless the expectation has none, the reason.
fn has_condition(actual: &[Condition], type_: &str, status: &str, reason: Option<&str>) -> bool {
    actual.iter().any(|c| {
        c.type_ == type_ && c.status.as_str() == status && reason.is_none_or(|r| c.reason == r)
    })
}

fn shown(conditions: &[Condition]) -> String {
    let all: Vec<String> = conditions
        .iter()
        .map(|c| format!("{} {} {}", c.type_, c.status.as_str(), c.reason))
        .collect();
    all.join(", ")
}

/// What differs between one listener's expected and computed status (the
/// suite's `gatewayListenersMatch` for one listener); empty when it
/// matches. `gateway` names the Gateway in the messages.
fn listener_mismatches(gateway: &str, expected: &Value, actual: &ListenerStatus) -> Vec<String> {
    let at = format!("Gateway {gateway} listener {}", actual.name);
    let mut out = Vec::new();
    for kind in expected["supported_kinds"].as_array().into_iter().flatten() {
        let kind = kind.as_str().unwrap_or_default();
        let (group, kind) = kind.split_once('/').unwrap_or(("", kind));
        if !actual
            .supported_kinds
            .iter()
            .any(|(g, k)| g == group && k == kind)
        {
            out.push(format!(
                "{at}: supportedKinds {:?} lack {group}/{kind}",
                actual.supported_kinds
            ));
        }
    }
    if let Some(n) = expected["attached_routes"].as_i64()
        && i64::from(actual.attached_routes) != n
    {
        out.push(format!(
            "{at}: attachedRoutes is {}, expected {n}",
            actual.attached_routes
        ));
    }
    for c in expected["conditions"].as_array().into_iter().flatten() {
        let type_ = c["type"].as_str().unwrap_or_default();
        let status = c["status"].as_str().unwrap_or_default();
        let reason = c["reason"].as_str();
        if !has_condition(&actual.conditions, type_, status, reason) {
            out.push(format!(
                "{at}: no condition {type_} {status} {} among [{}]",
                reason.unwrap_or("(any reason)"),
                shown(&actual.conditions)
            ));
        }
    }
    out
}

/// What differs between a Gateway entry of `status_expectations` and the
/// Gateway's computed status.
fn gateway_mismatches(expectation: &Value, status: &GatewayStatus) -> Vec<String> {
    let gateway = expectation["gateway"].as_str().unwrap_or_default();
    let mut out = Vec::new();
    let expected = expectation["listeners"].as_array();
    if let Some(expected) = expected {
        if expectation["exact_listeners"].as_bool().unwrap_or(false)
            && expected.len() != status.listeners.len()
        {
            out.push(format!(
                "Gateway {gateway}: {} listeners in status, expected {}",
                status.listeners.len(),
                expected.len()
            ));
        }
        for e in expected {
            let name = e["name"].as_str().unwrap_or_default();
            match status.listeners.iter().find(|l| l.name == name) {
                Some(actual) => out.extend(listener_mismatches(gateway, e, actual)),
                None => out.push(format!("Gateway {gateway}: no status for listener {name}")),
            }
        }
    } else if let Some(n) = expectation["attached_routes"].as_i64() {
        // The older form: no listener has a route attached beyond `n`.
        for l in &status.listeners {
            if i64::from(l.attached_routes) != n {
                out.push(format!(
                    "Gateway {gateway} listener {}: attachedRoutes is {}, expected {n}",
                    l.name, l.attached_routes
                ));
            }
        }
    }
    out
}

/// What differs between a route entry of `status_expectations` and the
/// route's computed parent statuses.
fn route_mismatches(
    expectation: &Value,
    route: &HttpRoute,
    statuses: &[RouteParentStatus],
) -> Result<Vec<String>> {
    let name = expectation["route"].as_str().unwrap_or_default();
    if expectation["no_accepted_parents"].as_bool() == Some(true) {
        let accepted = statuses
            .iter()
            .any(|s| has_condition(&s.conditions, "Accepted", "True", None));
        return Ok(if accepted {
            vec![format!("route {name}: accepted by a parent, expected none")]
        } else {
            Vec::new()
        });
    }
    let parent = expectation["parent"]
        .as_str()
        .context("route entry parent")?;
    let conditions = expectation["conditions"]
        .as_object()
        .context("route entry conditions")?;
    let reason = expectation["reason"].as_str();
    ensure!(
        reason.is_none() || conditions.len() == 1,
        "route {name}: a reason goes with one condition"
    );
    let of_parent: Vec<&RouteParentStatus> = statuses
        .iter()
        .filter(|s| {
            let ns = s
                .parent_ref
                .namespace
                .as_deref()
                .unwrap_or(&route.meta.namespace);
            format!("{ns}/{}", s.parent_ref.name) == parent
        })
        .collect();
    let mut out = Vec::new();
    for (type_, status) in conditions {
        let status = status.as_str().unwrap_or_default();
        if !of_parent
            .iter()
            .any(|s| has_condition(&s.conditions, type_, status, reason))
        {
            let seen: Vec<String> = of_parent.iter().map(|s| shown(&s.conditions)).collect();
            out.push(format!(
                "route {name} parent {parent}: no condition {type_} {status} {} among [{}]",
                reason.unwrap_or("(any reason)"),
                seen.join("; ")
            ));
        }
    }
    Ok(out)
}

/// The file's world with `gateway` its only Gateway (`None`: all of them).
fn alone(resources: &[Resource], gateway: Option<&str>) -> Vec<Resource> {
    resources
        .iter()
        .filter(|r| match (r, gateway) {
            (Resource::Gateway(g), Some(nn)) => g.meta.object_name().to_string() == nn,
            _ => true,
        })
        .cloned()
        .collect()
}

/// Every mismatch of one file, each as `file: what`.
fn file_mismatches(name: &str, data: &Value) -> Result<Vec<String>> {
    let ca = TestCa::new("conformance CA");
    let mut resources = Vec::new();
    for (i, doc) in documents(data, &ca)?.into_iter().enumerate() {
        resources.push(parse_object(name, i, doc)?);
    }
    let proxies = proxy_with_every_port(&resources);
    let mut out = Vec::new();
    let expectations = data["status_expectations"]
        .as_array()
        .context("status_expectations")?;
    for e in expectations {
        // The Gateway the expectation is about (a route's: its parent).
        let focus = e["gateway"].as_str().or(e["parent"].as_str());
        let resources = alone(&resources, focus);
        let world = World::new(&resources, CONTROLLER_NAME);
        let found = if let Some(nn) = e["gateway"].as_str() {
            let g: &Gateway = resources
                .iter()
                .find_map(|r| match r {
                    Resource::Gateway(g) => Some(g),
                    _ => None,
                })
                .with_context(|| format!("{name}: no Gateway {nn}"))?;
            gateway_mismatches(e, &gateway_status(g, &world, &proxies))
        } else if let Some(nn) = e["route"].as_str() {
            let r = resources
                .iter()
                .find_map(|r| match r {
                    Resource::HttpRoute(h) if h.meta.object_name().to_string() == nn => Some(h),
                    _ => None,
                })
                .with_context(|| format!("{name}: no route {nn}"))?;
            let statuses = route_parent_statuses(r, &world, None, None, CONTROLLER_NAME);
            route_mismatches(e, r, &statuses)?
        } else {
            bail!("{name}: status expectation of no known form: {e}");
        };
        out.extend(found.into_iter().map(|m| format!("{name}: {m}")));
    }
    Ok(out)
}

#[test]
fn listener_tls_status_expectations_hold_but_the_known_differences() -> Result<()> {
    let files = tls_files()?;
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    ensure!(
        files.len() >= 8,
        "only {} files declare their Secrets: {names:?}",
        files.len()
    );
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for (name, data) in &files {
        checked += data["status_expectations"].as_array().map_or(0, Vec::len);
        mismatches.extend(file_mismatches(name, data)?);
    }
    ensure!(checked >= 21, "only {checked} expectations checked");
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

#[test]
fn the_comparison_catches_wrong_expectations() -> Result<()> {
    // The status of GatewaySecretMissingReferenceGrant's listener, computed.
    let files = tls_files()?;
    let (_, data) = files
        .iter()
        .find(|(n, _)| n == "GatewaySecretMissingReferenceGrant")
        .context("GatewaySecretMissingReferenceGrant.yaml")?;
    let ca = TestCa::new("t");
    let resources: Vec<Resource> = documents(data, &ca)?
        .into_iter()
        .enumerate()
        .map(|(i, d)| parse_object("t", i, d))
        .collect::<Result<_, _>>()?;
    let world = World::new(&resources, CONTROLLER_NAME);
    let Some(Resource::Gateway(g)) = resources.iter().find(|r| matches!(r, Resource::Gateway(_)))
    else {
        bail!("no Gateway")
    };
    let status = gateway_status(g, &world, &proxy_with_every_port(&resources));
    let right = &data["status_expectations"][0];
    assert_eq!(gateway_mismatches(right, &status), Vec::<String>::new());

    let wrong = |edit: &dyn Fn(&mut Value)| {
        let mut e = right.clone();
        edit(&mut e);
        gateway_mismatches(&e, &status)
    };
    let condition = "/listeners/0/conditions/0";
    let one = |v: Vec<String>, needle: &str| {
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains(needle), "{v:?} lacks {needle}");
    };
    one(
        wrong(&|e| e.pointer_mut(condition).unwrap()["reason"] = json!("InvalidCertificateRef")),
        "no condition ResolvedRefs False InvalidCertificateRef",
    );
    one(
        wrong(&|e| e.pointer_mut(condition).unwrap()["status"] = json!("True")),
        "no condition ResolvedRefs True",
    );
    one(
        wrong(&|e| e.pointer_mut(condition).unwrap()["type"] = json!("Resolved")),
        "no condition Resolved",
    );
    one(
        wrong(&|e| e["listeners"][0]["attached_routes"] = json!(1)),
        "attachedRoutes is 0, expected 1",
    );
    one(
        wrong(&|e| {
            e["listeners"][0]["supported_kinds"] = json!(["gateway.networking.k8s.io/TLSRoute"])
        }),
        "lack gateway.networking.k8s.io/TLSRoute",
    );
    one(
        wrong(&|e| e["listeners"][0]["name"] = json!("http")),
        "no status for listener http",
    );
    one(
        wrong(&|e| {
            let extra = e["listeners"][0].clone();
            e["listeners"].as_array_mut().unwrap().push(extra);
        }),
        "1 listeners in status, expected 2",
    );
    // A condition with no reason matches any reason, as in the suite.
    assert!(wrong(&|e| e.pointer_mut(condition).unwrap()["reason"] = Value::Null).is_empty());
    Ok(())
}

/// `GatewaySecretMissingReferenceGrant` with its listener's certificateRef
/// of kind `WrongKind` instead of `Secret`: still in another namespace,
/// still no ReferenceGrant. The spec (`apis/v1/gateway_types.go`,
/// `GatewayTLSConfig.CertificateRefs`) says a cross-namespace reference no
/// grant allows MUST give `RefNotPermitted`; switchyard checks the kind
/// first and says `InvalidCertificateRef`. No upstream test sends this
/// (GatewayInvalidTLSConfiguration's unsupported kind is same-namespace),
/// so the expectation is the spec's, and the recorded difference must
/// persist word for word until the rule changes.
#[test]
fn spec_differences_persist() -> Result<()> {
    let files = tls_files()?;
    let (_, data) = files
        .iter()
        .find(|(n, _)| n == "GatewaySecretMissingReferenceGrant")
        .context("GatewaySecretMissingReferenceGrant.yaml")?;
    let mut data = data.clone();
    let reference = data
        .pointer_mut("/gateways/0/spec/listeners/0/tls/certificateRefs/0")
        .context("the listener's certificateRef")?;
    ensure!(
        reference["namespace"] == "gateway-conformance-web-backend"
            && reference["kind"] == "Secret",
        "the file's reference changed: {reference}"
    );
    reference["kind"] = json!("WrongKind");
    ensure!(
        data["reference_grants"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "the file has a ReferenceGrant now"
    );
    let expectation = &data["status_expectations"][0];
    ensure!(
        expectation["listeners"][0]["conditions"][0]["reason"] == "RefNotPermitted",
        "the file's expectation changed: {expectation}"
    );
    let [(name, mismatch, instead)] = SPEC_DIFFERENCES else {
        bail!("one spec difference is checked here");
    };
    let mismatches = file_mismatches(name, &data)?;
    // Exactly this one: everything else the file expects still holds.
    let want = format!("{name}: {mismatch} among [");
    assert!(
        mismatches.len() == 1
            && mismatches[0].starts_with(&want)
            && mismatches[0].contains(instead),
        "the spec difference changed (fixed? remove it here and from the README):\n\
         want one mismatch starting {want:?} and listing {instead:?}\n\
         got {mismatches:#?}"
    );
    Ok(())
}
