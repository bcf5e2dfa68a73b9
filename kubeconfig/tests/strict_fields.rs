//! What strict field validation still accepts: every fixture the project
//! ships and tests with (the embedded default, the `deploy/` manifests of
//! the kinds switchyard reads, the Gateway API conformance objects),
//! objects as `kubectl get -o yaml` prints them (status, the metadata
//! Kubernetes adds, arbitrary label and annotation keys), keys with empty
//! values; and what `delete -f` checks. The refusals themselves are in
//! `errors.rs`.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use switchyard_kubeconfig::{
    DEFAULT_CONFIG, Problem, parse_documents, parse_file, parse_keys, parse_object,
};
use switchyard_proto::model::Resource;

#[test]
fn the_embedded_default_parses() -> Result<()> {
    let resources = parse_documents("default.yaml", DEFAULT_CONFIG)?;
    assert_eq!(resources.len(), 8, "{resources:?}");
    assert_eq!(parse_keys("default.yaml", DEFAULT_CONFIG)?.len(), 8);
    Ok(())
}

/// Documents of `deploy/*.yaml` whose kind switchyard reads (the rest are
/// Deployments, RBAC and such, checked by `deploy_manifests.rs`).
#[test]
fn the_deploy_manifests_of_kinds_switchyard_reads_parse() -> Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut parsed = 0;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.sort();
    for path in files {
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        for (index, doc) in yaml_serde::Deserializer::from_str(&text).enumerate() {
            let value = Value::deserialize(doc).with_context(|| path.display().to_string())?;
            let kind = value["kind"].as_str().unwrap_or_default();
            if [
                "GatewayClass",
                "Gateway",
                "HTTPRoute",
                "Namespace",
                "Service",
            ]
            .contains(&kind)
            {
                parse_object(&path.display().to_string(), index, value)?;
                parsed += 1;
            }
        }
    }
    assert!(
        parsed >= 6,
        "deploy/ has fewer objects than expected: {parsed}"
    );
    Ok(())
}

/// Every object of every list in the conformance data, one at a time (the
/// conformance tests parse the same objects and check their translation).
#[test]
fn every_conformance_object_parses() -> Result<()> {
    let mut parsed = 0;
    for path in switchyard_test_support::gateway_api_case_files() {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path)?.replace("{GATEWAY_CLASS_NAME}", "switchyard");
        let data: Value = yaml_serde::from_str(&text).with_context(|| name.clone())?;
        for list in ["gateways", "routes", "reference_grants"] {
            let objects = data.get(list).and_then(Value::as_array);
            for (i, object) in objects.into_iter().flatten().enumerate() {
                parse_object(&name, i, object.clone())?;
                parsed += 1;
            }
        }
    }
    assert!(parsed >= 60, "only {parsed} conformance objects");
    Ok(())
}

/// Objects as a cluster hands them out: status, server-set metadata
/// (`uid`, `resourceVersion`, `managedFields` with its free-form
/// `fieldsV1`, ...), defaulted spec fields, arbitrary label keys.
const FROM_KUBECTL_GET: &str = r#"
apiVersion: v1
kind: Service
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Service","metadata":{"name":"blue"}}
  creationTimestamp: "2024-05-01T10:00:00Z"
  labels: {app.kubernetes.io/name: blue, "weird key/with:colon": "x"}
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1:
      f:spec:
        f:ports:
          k:{"port":80,"protocol":"TCP"}: {.: {}, f:port: {}}
    manager: kubectl-client-side-apply
    operation: Update
    time: "2024-05-01T10:00:00Z"
  name: blue
  namespace: demo
  resourceVersion: "4711"
  uid: 0b7f6a52-3c1e-4c5e-9d55-6f1e2a3b4c5d
spec:
  clusterIP: 10.96.0.12
  clusterIPs: [10.96.0.12]
  internalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  ports:
  - {name: http, port: 80, protocol: TCP, targetPort: 8080}
  selector: {app: blue}
  sessionAffinity: None
  type: ClusterIP
status:
  loadBalancer: {}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  generateName: blue-
  generation: 3
  labels: {kubernetes.io/service-name: blue, endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io}
  name: blue-x7k2p
  namespace: demo
  ownerReferences:
  - {apiVersion: v1, blockOwnerDeletion: true, controller: true, kind: Service, name: blue, uid: 0b7f6a52-3c1e-4c5e-9d55-6f1e2a3b4c5d}
addressType: IPv4
endpoints:
- addresses: [10.244.1.5]
  conditions: {ready: true, serving: true, terminating: false}
  nodeName: node-1
  targetRef: {kind: Pod, name: blue-6d4f, namespace: demo, uid: 7c0a}
  zone: zone-a
ports:
- {name: http, port: 8080, protocol: TCP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  creationTimestamp: null
  generation: 2
  name: app
  namespace: demo
spec:
  parentRefs:
  - {group: gateway.networking.k8s.io, kind: Gateway, name: gateway}
  rules:
  - backendRefs:
    - {group: "", kind: Service, name: blue, port: 80, weight: 1}
    matches:
    - path: {type: PathPrefix, value: /}
status:
  parents:
  - conditions:
    - {lastTransitionTime: "2024-05-01T10:00:01Z", message: Accepted, observedGeneration: 2,
       reason: Accepted, status: "True", type: Accepted}
    controllerName: switchyard.io/gateway-controller
    parentRef: {group: gateway.networking.k8s.io, kind: Gateway, name: gateway}
"#;

#[test]
fn objects_as_kubectl_get_prints_them_parse() -> Result<()> {
    let resources = parse_documents("get.yaml", FROM_KUBECTL_GET)?;
    assert_eq!(resources.len(), 3);
    let Resource::Service(service) = &resources[0] else {
        bail!("not a Service: {:?}", resources[0]);
    };
    assert_eq!(service.meta.labels["weird key/with:colon"], "x");
    assert_eq!(parse_keys("get.yaml", FROM_KUBECTL_GET)?.len(), 3);
    Ok(())
}

/// `status` is accepted whatever it holds (it is never read from a file),
/// as long as its shape decodes; the resource is the same without it.
#[test]
fn status_is_accepted_and_ignored() -> Result<()> {
    let route = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
                 metadata: {name: app, namespace: demo}\n\
                 spec:\n  rules:\n  - backendRefs: [{name: blue, port: 80}]\n";
    let with_status = format!("{route}status:\n  parents: []\n  someFutureField: {{a: 1}}\n");
    assert_eq!(
        parse_documents("a.yaml", &with_status)?,
        parse_documents("b.yaml", route)?
    );
    Ok(())
}

/// An unknown key whose value is empty says nothing and is accepted
/// (serializers leave empty values out, so the check cannot tell such a
/// key from a known one); any value that says something is refused.
#[test]
fn unknown_keys_with_empty_values_are_accepted() -> Result<()> {
    let route = |extra: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
             metadata: {{name: app, namespace: demo}}\n\
             spec:\n  rules:\n  - backendRefs: [{{name: blue, port: 80}}]\n    {extra}\n"
        )
    };
    for empty in [
        "matchs: []",
        "matchs: {}",
        "matchs: null",
        "matchs: \"\"",
        "matchs:",
    ] {
        parse_documents("e.yaml", &route(empty)).with_context(|| empty.to_string())?;
    }
    for said in ["matchs: [{}]", "matchs: false", "matchs: 0", "matchs: x"] {
        let err = parse_documents("e.yaml", &route(said)).unwrap_err();
        assert!(
            matches!(&err.problem, Problem::UnknownFields { fields, .. } if fields == &["spec.rules[0].matchs"]),
            "{said}: {err}"
        );
    }
    Ok(())
}

#[test]
fn the_failing_document_of_a_stream_is_named() {
    let text = format!(
        "{FROM_KUBECTL_GET}---\napiVersion: v1\nkind: Service\n\
         metadata: {{name: green, namespace: demo}}\nspec:\n  portz: [{{port: 80}}]\n"
    );
    let err = parse_documents("f.yaml", &text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "f.yaml, document 3 (0-based), Service demo/green: \
         unknown field \"spec.portz\" (not in the Service schema)"
    );
}

#[test]
fn parse_object_is_strict_too() {
    let value = serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {"rules": [{"backendRefs": [{"name": "s", "port": 80, "namespce": "x"}]}]},
    });
    let err = parse_object("cases.yaml", 4, value)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "cases.yaml, document 4 (0-based), HTTPRoute ns/r: \
         unknown field \"spec.rules[0].backendRefs[0].namespce\" (not in the HTTPRoute schema)"
    );
}

/// `delete -f` reads identities only: a misspelt metadata field (which
/// would name another object) or top-level key is refused, what is below
/// `spec` is not read.
#[test]
fn delete_checks_the_header_keys() {
    let err = parse_keys(
        "d.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: blue, namespce: demo}\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "d.yaml, document 0 (0-based), Service default/blue: \
         unknown field \"metadata.namespce\" (not in the Service schema)"
    );
    let err = parse_keys(
        "d.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: blue}\nsepc: {}\nspce: {a: 1}\n",
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("unknown field \"spce\" (not in the Service schema)"),
        "{err}"
    );
    let keys = parse_keys(
        "d.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
         metadata: {name: app, namespace: demo}\nspec: {rules: [{matchs: [1]}]}\n",
    );
    assert!(keys.is_ok(), "{keys:?}");
}

#[test]
fn files_are_strict() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("route.yaml");
    std::fs::write(
        &path,
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
         metadata: {name: app}\nspec:\n  rules:\n  - matchs: [{path: {value: /admin}}]\n",
    )?;
    let err = parse_file(&path).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}, document 0 (0-based), HTTPRoute default/app: \
             unknown field \"spec.rules[0].matchs\" (not in the HTTPRoute schema)",
            path.display()
        )
    );
    Ok(())
}

/// Every mapping of a document, as (field path, JSON pointer), except the
/// free-form maps (labels, annotations, selectors, `fieldsV1`) and
/// `status`, whose keys are anyone's.
fn mappings(at: &str, pointer: &str, value: &Value, out: &mut Vec<(String, String)>) {
    const FREE_FORM: [&str; 5] = ["labels", "annotations", "selector", "fieldsV1", "status"];
    match value {
        Value::Object(map) => {
            out.push((at.to_string(), pointer.to_string()));
            for (key, v) in map {
                if FREE_FORM.contains(&key.as_str()) {
                    continue;
                }
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                mappings(&path, &format!("{pointer}/{key}"), v, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                mappings(&format!("{at}[{i}]"), &format!("{pointer}/{i}"), v, out);
            }
        }
        _ => {}
    }
}

/// A key added to any mapping of any accepted document is refused with
/// exactly its path; `delete -f` refuses it only at the top and in
/// `metadata`, the part it reads.
#[test]
fn an_unknown_key_is_found_at_every_level() -> Result<()> {
    let text = format!("{DEFAULT_CONFIG}---\n{FROM_KUBECTL_GET}");
    let mut checked = 0;
    for (index, doc) in yaml_serde::Deserializer::from_str(&text).enumerate() {
        let value = Value::deserialize(doc)?;
        let mut spots = Vec::new();
        mappings("", "", &value, &mut spots);
        for (path, pointer) in spots {
            let mut broken = value.clone();
            let Some(Value::Object(map)) = broken.pointer_mut(&pointer) else {
                bail!("{pointer} is not a mapping");
            };
            map.insert("zzUnknown".into(), Value::from(1));
            let field = if path.is_empty() {
                "zzUnknown".to_string()
            } else {
                format!("{path}.zzUnknown")
            };
            match parse_object("t.yaml", index, broken.clone()) {
                Err(e) => assert!(
                    matches!(&e.problem, Problem::UnknownFields { fields, .. } if fields.as_slice() == std::slice::from_ref(&field)),
                    "{field}: {e}"
                ),
                Ok(_) => bail!("{field}: accepted"),
            }
            let yaml = yaml_serde::to_string(&broken)?;
            let header = path.is_empty() || path == "metadata";
            assert_eq!(parse_keys("t.yaml", &yaml).is_err(), header, "{field}");
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} spots");
    Ok(())
}
