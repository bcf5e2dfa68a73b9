//! Computing the status a Gateway API conformance file expects
//! (`status_expectations`, see `tests/data/gateway-api/README.md`) with the
//! product's status functions, and comparing it the way the suite does
//! (`conformance/utils/kubernetes/helpers.go`). Shared by the status
//! runners: `conformance_gateway_tls.rs` (the files with `secrets`) and
//! `conformance_grpc_status.rs` (the GRPCRoute files).
//!
//! The world of one file: our class, the file's Gateways, routes, grants
//! and declared Services (`services`), its Secrets as the file describes
//! them, a Service for every other base backend it uses and the
//! namespaces of all of them, read by `parse_object`; one live proxy that
//! bound every listener port. Each expectation looks at its Gateway alone
//! (the file's other Gateways left out), as the suite gives every Gateway
//! an address of its own.
// Each runner uses its own part of the helpers.
#![allow(dead_code)]

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
use switchyard_test_support::conformance_secrets::secret_documents;
use switchyard_test_support::fixtures;
use switchyard_test_support::listener_tls::TestCa;

/// The GatewayClass the files' placeholder becomes.
pub const CLASS: &str = "switchyard";

/// The case files `keep` selects, as `(name, data)`, the class
/// placeholder replaced.
pub fn case_files(keep: impl Fn(&Value) -> bool) -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for path in switchyard_test_support::gateway_api_case_files() {
        let text = std::fs::read_to_string(&path)?.replace("{GATEWAY_CLASS_NAME}", CLASS);
        let data: Value =
            yaml_serde::from_str(&text).with_context(|| path.display().to_string())?;
        if keep(&data) {
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
pub fn namespace_document(name: &str) -> Value {
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
pub fn documents(data: &Value, ca: &TestCa) -> Result<Vec<Value>> {
    let mut docs = vec![fixtures::gateway_class(CLASS, CONTROLLER_NAME)];
    for list in ["gateways", "routes", "reference_grants", "services"] {
        docs.extend(data[list].as_array().into_iter().flatten().cloned());
    }
    // Services the file declares (`services`) as the base manifests do.
    let declared: BTreeSet<(String, String)> = data["services"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                s["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
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
        if !declared.contains(&(ns.to_string(), name.to_string())) {
            docs.push(fixtures::service(ns, name, json!([{"port": port}])));
        }
    }
    docs.extend(namespaces.iter().map(|ns| namespace_document(ns)));
    Ok(docs)
}

/// One live proxy that bound every port a listener of the file names.
pub fn proxy_with_every_port(resources: &[Resource]) -> Vec<ProxyStatus> {
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
pub fn has_condition(
    actual: &[Condition],
    type_: &str,
    status: &str,
    reason: Option<&str>,
) -> bool {
    actual.iter().any(|c| {
        c.type_ == type_ && c.status.as_str() == status && reason.is_none_or(|r| c.reason == r)
    })
}

pub fn shown(conditions: &[Condition]) -> String {
    let all: Vec<String> = conditions
        .iter()
        .map(|c| format!("{} {} {}", c.type_, c.status.as_str(), c.reason))
        .collect();
    all.join(", ")
}

/// What differs between one listener's expected and computed status (the
/// suite's `gatewayListenersMatch` for one listener); empty when it
/// matches. `gateway` names the Gateway in the messages.
pub fn listener_mismatches(
    gateway: &str,
    expected: &Value,
    actual: &ListenerStatus,
) -> Vec<String> {
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
pub fn gateway_mismatches(expectation: &Value, status: &GatewayStatus) -> Vec<String> {
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
pub fn route_mismatches(
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
    // `listeners`: the suite's parent entries name each section
    // (`RoutesAndParentMustBeAccepted`), each with the conditions.
    let sections: Vec<Option<&str>> = match expectation["listeners"].as_array() {
        Some(names) => names
            .iter()
            .map(|n| n.as_str().map(Some).context("route entry listeners[]"))
            .collect::<Result<_>>()?,
        None => vec![None],
    };
    for section in sections {
        let of_section: Vec<&RouteParentStatus> = of_parent
            .iter()
            .copied()
            .filter(|s| section.is_none() || s.parent_ref.section_name.as_deref() == section)
            .collect();
        let at = section.map(|s| format!(" section {s}")).unwrap_or_default();
        out.extend(condition_mismatches(
            name,
            parent,
            &at,
            &of_section,
            conditions,
            reason,
        ));
    }
    Ok(out)
}

/// The expected `conditions` (with `reason`, if any) missing from the
/// statuses `of_parent`.
fn condition_mismatches(
    name: &str,
    parent: &str,
    at: &str,
    of_parent: &[&RouteParentStatus],
    conditions: &serde_json::Map<String, Value>,
    reason: Option<&str>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (type_, status) in conditions {
        let status = status.as_str().unwrap_or_default();
        if !of_parent
            .iter()
            .any(|s| has_condition(&s.conditions, type_, status, reason))
        {
            let seen: Vec<String> = of_parent.iter().map(|s| shown(&s.conditions)).collect();
            out.push(format!(
                "route {name} parent {parent}{at}: no condition {type_} {status} {} among [{}]",
                reason.unwrap_or("(any reason)"),
                seen.join("; ")
            ));
        }
    }
    out
}

/// The file's world with `gateway` its only Gateway (`None`: all of them).
pub fn alone(resources: &[Resource], gateway: Option<&str>) -> Vec<Resource> {
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
pub fn file_mismatches(name: &str, data: &Value) -> Result<Vec<String>> {
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
