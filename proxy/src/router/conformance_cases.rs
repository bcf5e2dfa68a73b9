//! The shared Gateway API conformance case files, run against the router
//! alone: each file's Gateways, routes and grants are translated to the
//! model, each case's request is routed, and the decision is judged the
//! way the suite judges a response (status, backend, namespace, backend
//! request, response headers, redirect Location, mirrors).
//!
//! It owns only this pure check; the end-to-end harness (real proxy, echo
//! backends, distributions) is the server side's. TLS cases are skipped.
//! The data lives outside the repository: `SWITCHYARD_CONFORMANCE_DIR`, or
//! `../shared/conformance/gateway-api` next to the workspace; when neither
//! exists the test says so and passes.

use super::testkit::OUR_CLASS;
use super::{Decision, ListenerKey, RouteTable};
use serde_json::Value;
use std::path::PathBuf;
use switchyard_proto::model::*;

const GW_GROUP: &str = "gateway.networking.k8s.io";

fn text(v: &Value) -> Option<String> {
    v.as_str().map(String::from)
}

fn text_or(v: &Value, default: &str) -> String {
    text(v).unwrap_or_else(|| default.to_string())
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn port(v: &Value) -> Option<u16> {
    v.as_u64().and_then(|p| u16::try_from(p).ok())
}

fn meta(v: &Value) -> ObjectMeta {
    ObjectMeta::named(
        text_or(&v["metadata"]["namespace"], ""),
        text_or(&v["metadata"]["name"], ""),
    )
}

fn labels(v: &Value) -> std::collections::BTreeMap<String, String> {
    v.as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), text_or(v, ""))).collect())
        .unwrap_or_default()
}

fn gateway(v: &Value) -> Gateway {
    let listeners = list(&v["spec"]["listeners"])
        .iter()
        .map(|l| {
            let ar = &l["allowedRoutes"];
            let namespaces = match ar["namespaces"]["from"].as_str() {
                Some("All") => RouteNamespaces::All,
                Some("Selector") => {
                    let sel = &ar["namespaces"]["selector"];
                    RouteNamespaces::Selector(LabelSelector {
                        match_labels: labels(&sel["matchLabels"]),
                        match_expressions: list(&sel["matchExpressions"])
                            .iter()
                            .map(|e| LabelExpression {
                                key: text_or(&e["key"], ""),
                                operator: text_or(&e["operator"], ""),
                                values: list(&e["values"]).iter().filter_map(text).collect(),
                            })
                            .collect(),
                    })
                }
                _ => RouteNamespaces::Same,
            };
            Listener {
                name: text_or(&l["name"], ""),
                port: port(&l["port"]).unwrap_or(0),
                protocol: match l["protocol"].as_str() {
                    Some("HTTP") => ListenerProtocol::Http,
                    Some("HTTPS") => ListenerProtocol::Https,
                    other => ListenerProtocol::Other(other.unwrap_or("").into()),
                },
                hostname: text(&l["hostname"]),
                allowed_routes: AllowedRoutes {
                    namespaces,
                    kinds: list(&ar["kinds"])
                        .iter()
                        .map(|k| GroupKind {
                            group: text_or(&k["group"], GW_GROUP),
                            kind: text_or(&k["kind"], ""),
                        })
                        .collect(),
                },
            }
        })
        .collect();
    Gateway {
        meta: meta(v),
        gateway_class_name: OUR_CLASS.into(),
        listeners,
    }
}

fn header_values(v: &Value) -> Vec<switchyard_proto::model::HeaderValue> {
    list(v)
        .iter()
        .map(|h| switchyard_proto::model::HeaderValue {
            name: text_or(&h["name"], ""),
            value: text_or(&h["value"], ""),
        })
        .collect()
}

fn modifier(v: &Value) -> HeaderModifier {
    HeaderModifier {
        set: header_values(&v["set"]),
        add: header_values(&v["add"]),
        remove: list(&v["remove"]).iter().filter_map(text).collect(),
    }
}

fn path_modifier(v: &Value) -> Option<PathModifier> {
    match v["type"].as_str()? {
        "ReplaceFullPath" => Some(PathModifier::ReplaceFullPath(text_or(
            &v["replaceFullPath"],
            "",
        ))),
        _ => Some(PathModifier::ReplacePrefixMatch(text_or(
            &v["replacePrefixMatch"],
            "",
        ))),
    }
}

fn filter(v: &Value) -> Option<Filter> {
    Some(match v["type"].as_str()? {
        "RequestHeaderModifier" => {
            Filter::RequestHeaderModifier(modifier(&v["requestHeaderModifier"]))
        }
        "ResponseHeaderModifier" => {
            Filter::ResponseHeaderModifier(modifier(&v["responseHeaderModifier"]))
        }
        "RequestRedirect" => {
            let r = &v["requestRedirect"];
            Filter::RequestRedirect(RequestRedirect {
                scheme: text(&r["scheme"]),
                hostname: text(&r["hostname"]),
                path: path_modifier(&r["path"]),
                port: port(&r["port"]),
                status_code: r["statusCode"].as_u64().and_then(|c| u16::try_from(c).ok()),
            })
        }
        "URLRewrite" => Filter::UrlRewrite(UrlRewrite {
            hostname: text(&v["urlRewrite"]["hostname"]),
            path: path_modifier(&v["urlRewrite"]["path"]),
        }),
        "RequestMirror" => {
            let m = &v["requestMirror"];
            let f = &m["fraction"];
            Filter::RequestMirror(RequestMirror {
                backend_ref: backend_ref(&m["backendRef"]),
                percent: m["percent"].as_u64().map(|p| p as u32),
                fraction: f["numerator"]
                    .as_u64()
                    .map(|n| (n as u32, f["denominator"].as_u64().unwrap_or(100) as u32)),
            })
        }
        _ => return None,
    })
}

fn backend_ref(v: &Value) -> BackendRef {
    BackendRef {
        group: text_or(&v["group"], ""),
        kind: text_or(&v["kind"], "Service"),
        namespace: text(&v["namespace"]),
        name: text_or(&v["name"], ""),
        port: port(&v["port"]),
        weight: v["weight"].as_u64().map_or(1, |w| w as u32),
        filters: list(&v["filters"]).iter().filter_map(filter).collect(),
    }
}

fn string_match(v: &Value) -> StringMatchType {
    match v["type"].as_str() {
        Some("RegularExpression") => StringMatchType::RegularExpression,
        _ => StringMatchType::Exact,
    }
}

fn route(v: &Value) -> HttpRoute {
    let s = &v["spec"];
    let rules = list(&s["rules"])
        .iter()
        .map(|r| RouteRule {
            name: text(&r["name"]),
            matches: list(&r["matches"])
                .iter()
                .map(|m| RouteMatch {
                    path: m["path"].as_object().map(|_| {
                        let value = text_or(&m["path"]["value"], "/");
                        match m["path"]["type"].as_str() {
                            Some("Exact") => PathMatch::Exact(value),
                            Some("RegularExpression") => PathMatch::RegularExpression(value),
                            _ => PathMatch::PathPrefix(value),
                        }
                    }),
                    headers: list(&m["headers"])
                        .iter()
                        .map(|h| HeaderMatch {
                            match_type: string_match(h),
                            name: text_or(&h["name"], ""),
                            value: text_or(&h["value"], ""),
                        })
                        .collect(),
                    query_params: list(&m["queryParams"])
                        .iter()
                        .map(|q| QueryParamMatch {
                            match_type: string_match(q),
                            name: text_or(&q["name"], ""),
                            value: text_or(&q["value"], ""),
                        })
                        .collect(),
                    method: text(&m["method"]),
                })
                .collect(),
            filters: list(&r["filters"]).iter().filter_map(filter).collect(),
            backend_refs: list(&r["backendRefs"]).iter().map(backend_ref).collect(),
        })
        .collect();
    HttpRoute {
        meta: meta(v),
        parent_refs: list(&s["parentRefs"])
            .iter()
            .map(|p| ParentRef {
                group: text_or(&p["group"], GW_GROUP),
                kind: text_or(&p["kind"], "Gateway"),
                namespace: text(&p["namespace"]),
                name: text_or(&p["name"], ""),
                section_name: text(&p["sectionName"]),
                port: port(&p["port"]),
            })
            .collect(),
        hostnames: list(&s["hostnames"]).iter().filter_map(text).collect(),
        rules,
    }
}

fn grant(v: &Value) -> ReferenceGrant {
    ReferenceGrant {
        meta: meta(v),
        from: list(&v["spec"]["from"])
            .iter()
            .map(|f| GrantFrom {
                group: text_or(&f["group"], ""),
                kind: text_or(&f["kind"], ""),
                namespace: text_or(&f["namespace"], ""),
            })
            .collect(),
        to: list(&v["spec"]["to"])
            .iter()
            .map(|t| GrantTo {
                group: text_or(&t["group"], ""),
                kind: text_or(&t["kind"], ""),
                name: text(&t["name"]),
            })
            .collect(),
    }
}

/// The base manifests' Services and namespace labels (README tables).
fn base_snapshot() -> ConfigSnapshot {
    let svc = |ns: &str, name: &str, ports: &[u16]| Service {
        meta: ObjectMeta::named(ns, name),
        ports: ports
            .iter()
            .map(|&port| ServicePort {
                name: None,
                port,
                target_port: None,
            })
            .collect(),
    };
    let infra = "gateway-conformance-infra";
    let app = "gateway-conformance-app-backend";
    let web = "gateway-conformance-web-backend";
    let ns = |name: &str, label: &str| {
        let mut meta = ObjectMeta::named("", name);
        meta.labels
            .insert("gateway-conformance".into(), label.into());
        Namespace { meta }
    };
    ConfigSnapshot {
        gateway_classes: vec![GatewayClass {
            meta: ObjectMeta::named("", OUR_CLASS),
            controller_name: CONTROLLER_NAME.into(),
        }],
        namespaces: vec![ns(infra, "infra"), ns(app, "backend"), ns(web, "backend")],
        services: vec![
            svc(infra, "infra-backend-v1", &[8080, 8081, 8082]),
            svc(infra, "infra-backend-v2", &[8080]),
            svc(infra, "infra-backend-v3", &[8080]),
            svc(app, "app-backend-v1", &[8080]),
            svc(app, "app-backend-v2", &[8080]),
            svc(web, "web-backend", &[8080]),
        ],
        ..Default::default()
    }
}

/// Values of `name` joined with `,`, as the suite compares them.
fn joined(h: &http::HeaderMap, name: &str) -> Option<String> {
    let values: Vec<&str> = h
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

fn check_headers(
    h: &http::HeaderMap,
    want: &Value,
    absent: &Value,
    what: &str,
) -> Result<(), String> {
    for (name, value) in want.as_object().into_iter().flatten() {
        let got = joined(h, name);
        if got.as_deref() != value.as_str() {
            return Err(format!("{what} header {name}: got {got:?}, want {value}"));
        }
    }
    for name in list(absent).iter().filter_map(Value::as_str) {
        if h.contains_key(name) {
            return Err(format!("{what} header {name} should be absent"));
        }
    }
    Ok(())
}

fn header_map(v: &Value) -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    for (k, v) in v.as_object().into_iter().flatten() {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(k.as_bytes()),
            http::HeaderValue::from_str(v.as_str().unwrap_or("")),
        ) {
            h.append(n, v);
        }
    }
    h
}

/// Judges one decision against a case's `expected`.
fn judge(d: Decision, request: &Value, host: &str, expected: &Value) -> Result<(), String> {
    let want_status = expected["status"].as_u64().unwrap_or(0);
    let plan = match d {
        Decision::Respond(r) => {
            if u64::from(r.status.as_u16()) != want_status {
                return Err(format!(
                    "status {} ({}), want {want_status}",
                    r.status, r.reason
                ));
            }
            if let Some(redirect) = expected["redirect"].as_object() {
                let location = r
                    .headers
                    .iter()
                    .find(|(n, _)| n == http::header::LOCATION)
                    .and_then(|(_, v)| v.to_str().ok())
                    .ok_or("no Location")?;
                let uri: http::Uri = location
                    .parse()
                    .map_err(|e| format!("Location {location}: {e}"))?;
                let scheme = uri.scheme_str().unwrap_or("");
                let default_port = if scheme == "https" { 443 } else { 80 };
                let port_ok = match redirect["port"].as_str() {
                    None => uri.port_u16().is_none_or(|p| p == default_port),
                    Some(p) => uri.port_u16().map(|x| x.to_string()).as_deref() == Some(p),
                };
                let host_ok = redirect["host"]
                    .as_str()
                    .is_none_or(|h| uri.host() == Some(h));
                if Some(scheme) != redirect["scheme"].as_str()
                    || !port_ok
                    || !host_ok
                    || Some(uri.path()) != redirect["path"].as_str()
                {
                    return Err(format!(
                        "Location {location}, want {:?}",
                        redirect["location"]
                    ));
                }
            }
            return Ok(());
        }
        Decision::Forward(plan) => plan,
    };
    if want_status != 200 {
        return Err(format!(
            "forwarded to {}, want status {want_status}",
            plan.backend
        ));
    }
    if let Some(b) = expected["backend"].as_str()
        && plan.backend.service.name != b
    {
        return Err(format!("backend {}, want {b}", plan.backend));
    }
    if let Some(ns) = expected["namespace"].as_str()
        && plan.backend.service.namespace != ns
    {
        return Err(format!("namespace of {}, want {ns}", plan.backend));
    }
    let original_path = request["path"].as_str().unwrap_or("/");
    let path = plan
        .path_and_query
        .clone()
        .unwrap_or_else(|| original_path.to_string());
    let sent_host = plan.host.clone().unwrap_or_else(|| host.to_string());
    let mut headers = header_map(&request["headers"]);
    plan.request_headers.apply(&mut headers);
    let br = &expected["backend_request"];
    if br.is_object() {
        if br["path"].as_str().is_some_and(|p| p != path) {
            return Err(format!("backend path {path}, want {}", br["path"]));
        }
        if br["host"].as_str().is_some_and(|h| h != sent_host) {
            return Err(format!("backend host {sent_host}, want {}", br["host"]));
        }
        check_headers(&headers, &br["headers"], &br["absent_headers"], "request")?;
    } else if path != original_path || sent_host != host {
        return Err(format!("request changed: {sent_host}{path}"));
    }
    let mut response = header_map(&request["echo_backend_set_response_headers"]);
    plan.response_headers.apply(&mut response);
    check_headers(
        &response,
        &expected["response_headers"],
        &expected["absent_response_headers"],
        "response",
    )?;
    for m in list(&expected["mirrored_to"]) {
        let name = m["backend"].as_str().unwrap_or("");
        if !plan.mirrors.iter().any(|b| b.service.name == name) {
            return Err(format!("not mirrored to {name}"));
        }
    }
    Ok(())
}

fn data_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("SWITCHYARD_CONFORMANCE_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance/gateway-api")
        }
    };
    dir.is_dir().then_some(dir)
}

#[test]
fn shared_conformance_cases_route_as_the_suite_expects() {
    let Some(dir) = data_dir() else {
        eprintln!("conformance data not found; set SWITCHYARD_CONFORMANCE_DIR to run these cases");
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("readable conformance dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no case files in {}", dir.display());
    let (mut ran, mut failures) = (0, Vec::new());
    for file in files {
        let source = std::fs::read_to_string(&file).expect("readable case file");
        let doc: Value = yaml_serde::from_str(&source).expect("valid case YAML");
        let name = doc["name"].as_str().unwrap_or("?").to_string();
        let mut snapshot = base_snapshot();
        snapshot.gateways = list(&doc["gateways"]).iter().map(gateway).collect();
        snapshot.reference_grants = list(&doc["reference_grants"]).iter().map(grant).collect();
        for (ns, l) in doc["namespace_labels"].as_object().into_iter().flatten() {
            if let Some(n) = snapshot.namespaces.iter_mut().find(|n| n.meta.name == *ns) {
                n.meta.labels = labels(l);
            }
        }
        let routes: Vec<HttpRoute> = list(&doc["routes"]).iter().map(route).collect();
        for case in list(&doc["cases"]) {
            let request = &case["request"];
            if request["requires_tls"].as_bool() == Some(true)
                || request["scheme"].as_str() == Some("https")
            {
                continue;
            }
            if case["before"]["action"].as_str() == Some("delete") {
                let object = case["before"]["object"].as_str().unwrap_or("");
                snapshot
                    .reference_grants
                    .retain(|g| g.meta.object_name().to_string() != object);
            }
            let table = RouteTable::compile(&snapshot, &routes);
            let gw = request["gateway"].as_str().unwrap_or("");
            let (ns, gw_name) = gw.split_once('/').unwrap_or(("", gw));
            let listener_port = port(&request["port"]).unwrap_or(80);
            let key = ListenerKey {
                gateway: Some(ObjectName::new(ns, gw_name)),
                port: listener_port,
            };
            // No Host in the case: the client sends the gateway address.
            let host = text(&request["host"]).unwrap_or_else(|| match listener_port {
                80 => "192.0.2.10".to_string(),
                p => format!("192.0.2.10:{p}"),
            });
            let mut b = http::Request::builder()
                .method(request["method"].as_str().unwrap_or("GET"))
                .uri(request["path"].as_str().unwrap_or("/"))
                .header("host", host.as_str());
            for (k, v) in request["headers"].as_object().into_iter().flatten() {
                b = b.header(k.as_str(), v.as_str().unwrap_or(""));
            }
            let parts = b.body(()).expect("valid case request").into_parts().0;
            ran += 1;
            if let Err(e) = judge(
                table.route(&key, &parts, 0),
                request,
                &host,
                &case["expected"],
            ) {
                failures.push(format!("{name} case {}: {e}", case["id"]));
            }
        }
    }
    assert!(ran > 50, "only {ran} cases ran");
    assert!(
        failures.is_empty(),
        "{} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
