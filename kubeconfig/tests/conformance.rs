//! Every Gateway, HTTPRoute, GRPCRoute, ReferenceGrant, declared Service, BackendTLSPolicy and
//! manifest ConfigMap of the Gateway API
//! conformance data (`tests/data/gateway-api/*.yaml` of the repository)
//! parses and translates, both one object at a time
//! (`parse_object`) and as a multi-document stream (`parse_documents`), and
//! a few translations are checked field by field.

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use switchyard_kubeconfig::{parse_documents, parse_object};
use switchyard_proto::model::*;

/// The lists of objects a conformance file carries.
const LISTS: [&str; 6] = [
    "gateways",
    "routes",
    "reference_grants",
    "services",
    "backend_tls_policies",
    "config_maps",
];

fn conformance_dir() -> Result<PathBuf> {
    Ok(switchyard_test_support::gateway_api_cases())
}

/// File name -> resources parsed from it, in list order.
fn load_all() -> Result<BTreeMap<String, Vec<Resource>>> {
    let dir = conformance_dir()?;
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .context("file name")?
            .to_string();
        let text = std::fs::read_to_string(&path)?.replace("{GATEWAY_CLASS_NAME}", "switchyard");
        let data: Value = yaml_serde::from_str(&text).with_context(|| name.clone())?;
        let objects: Vec<Value> = LISTS
            .iter()
            .filter_map(|list| data.get(list).and_then(Value::as_array))
            .flatten()
            .cloned()
            .collect();

        let mut one_by_one = Vec::new();
        let mut stream = String::new();
        for (i, object) in objects.iter().enumerate() {
            one_by_one.push(parse_object(&name, i, object.clone())?);
            stream.push_str("---\n");
            stream.push_str(&yaml_serde::to_string(object)?);
        }
        let streamed = parse_documents(&name, &stream)?;
        ensure!(
            streamed == one_by_one,
            "{name}: parse_documents and parse_object disagree"
        );
        out.insert(name, one_by_one);
    }
    Ok(out)
}

fn find<'a>(
    all: &'a BTreeMap<String, Vec<Resource>>,
    file: &str,
    kind: Kind,
    name: &str,
) -> Result<&'a Resource> {
    all.get(file)
        .with_context(|| format!("{file} missing"))?
        .iter()
        .find(|r| r.kind() == kind && r.meta().name == name)
        .with_context(|| format!("{file}: no {kind} {name}"))
}

fn route<'a>(
    all: &'a BTreeMap<String, Vec<Resource>>,
    file: &str,
    name: &str,
) -> Result<&'a HttpRoute> {
    match find(all, file, Kind::HTTPRoute, name)? {
        Resource::HttpRoute(r) => Ok(r),
        _ => bail!("not a route"),
    }
}

#[test]
fn every_conformance_object_parses_and_translates() -> Result<()> {
    let all = load_all()?;
    ensure!(
        all.len() >= 20,
        "only {} conformance files found",
        all.len()
    );
    let count = |kind: Kind| all.values().flatten().filter(|r| r.kind() == kind).count();
    ensure!(count(Kind::Gateway) > 0, "no Gateways");
    ensure!(
        count(Kind::HTTPRoute) >= all.len(),
        "fewer routes than files"
    );
    ensure!(count(Kind::ReferenceGrant) > 0, "no ReferenceGrants");
    for r in all.values().flatten() {
        validate_resource(r)?;
        if let Resource::Gateway(g) = r {
            ensure!(
                g.gateway_class_name == "switchyard",
                "placeholder not substituted"
            );
        }
    }
    Ok(())
}

#[test]
fn request_mirror_filters_translate() -> Result<()> {
    let all = load_all()?;
    let r = route(&all, "HTTPRouteRequestMirror.yaml", "request-mirror")?;
    let mirror = BackendRef {
        namespace: Some("gateway-conformance-infra".into()),
        ..BackendRef::service("infra-backend-v2", 8080)
    };
    assert_eq!(
        r.rules[0].filters,
        [Filter::RequestMirror(RequestMirror {
            backend_ref: mirror.clone(),
            percent: None,
            fraction: None,
        })]
    );
    assert_eq!(
        r.rules[0].matches,
        [RouteMatch {
            path: Some(PathMatch::PathPrefix("/mirror".into())),
            ..Default::default()
        }]
    );
    let Filter::RequestHeaderModifier(m) = &r.rules[1].filters[0] else {
        bail!("rule 1 starts with a header modifier")
    };
    assert_eq!(m.remove, ["X-Header-Remove"]);
    assert_eq!(m.add.len(), 2);

    let r = route(
        &all,
        "HTTPRouteRequestPercentageMirror.yaml",
        "request-percentage-mirror",
    )?;
    let Filter::RequestMirror(p) = &r.rules[0].filters[0] else {
        bail!("percent mirror")
    };
    assert_eq!((p.percent, p.fraction), (Some(20), None));
    let Filter::RequestMirror(f) = &r.rules[1].filters[0] else {
        bail!("fraction mirror")
    };
    assert_eq!((f.percent, f.fraction), (None, Some((25, 50))));
    assert_eq!(f.backend_ref, mirror);
    Ok(())
}

#[test]
fn weights_and_backend_defaults_translate() -> Result<()> {
    let all = load_all()?;
    let r = route(&all, "HTTPRouteWeight.yaml", "weighted-backends")?;
    let weights: Vec<(&str, u32)> = r.rules[0]
        .backend_refs
        .iter()
        .map(|b| (b.name.as_str(), b.weight))
        .collect();
    assert_eq!(
        weights,
        [
            ("infra-backend-v1", 70),
            ("infra-backend-v2", 30),
            ("infra-backend-v3", 0)
        ]
    );
    assert!(r.rules[0].backend_refs.iter().all(BackendRef::is_service));
    // A rule without matches gets the API server's default match.
    assert_eq!(
        r.rules[0].matches,
        [RouteMatch {
            path: Some(PathMatch::PathPrefix("/".into())),
            ..Default::default()
        }]
    );
    assert_eq!(
        r.parent_refs,
        [ParentRef {
            group: "gateway.networking.k8s.io".into(),
            kind: "Gateway".into(),
            namespace: None,
            name: "same-namespace".into(),
            section_name: None,
            port: None,
        }]
    );

    let r = route(
        &all,
        "HTTPRouteInvalidBackendRefUnknownKind.yaml",
        "invalid-backend-ref-unknown-kind",
    )?;
    let b = &r.rules[0].backend_refs[0];
    assert_eq!(
        (b.group.as_str(), b.kind.as_str()),
        ("unknownkind.example.com", "NonExistent")
    );
    assert!(!b.is_service());
    assert_eq!(b.weight, 1);
    Ok(())
}

#[test]
fn reference_grants_translate() -> Result<()> {
    let all = load_all()?;
    let Resource::ReferenceGrant(g) = find(
        &all,
        "HTTPRouteReferenceGrant.yaml",
        Kind::ReferenceGrant,
        "reference-grant",
    )?
    else {
        bail!("not a grant")
    };
    assert_eq!(g.meta.namespace, "gateway-conformance-web-backend");
    assert!(g.permits(
        "gateway.networking.k8s.io",
        "HTTPRoute",
        "gateway-conformance-infra",
        "",
        "Service",
        "web-backend"
    ));
    assert!(!g.permits(
        "gateway.networking.k8s.io",
        "HTTPRoute",
        "gateway-conformance-infra",
        "",
        "Service",
        "other"
    ));
    Ok(())
}

#[test]
fn paths_methods_redirects_and_listeners_translate() -> Result<()> {
    let all = load_all()?;
    let r = route(&all, "HTTPRouteExactPathMatching.yaml", "exact-matching")?;
    assert_eq!(
        r.rules[0].matches[0].path,
        Some(PathMatch::Exact("/one".into()))
    );

    let r = route(&all, "HTTPRouteMethodMatching.yaml", "method-matching")?;
    assert_eq!(r.rules[0].matches[0].method.as_deref(), Some("POST"));
    // A match with only a method still gets the default path.
    assert_eq!(
        r.rules[0].matches[0].path,
        Some(PathMatch::PathPrefix("/".into()))
    );

    let redirects: Vec<&RequestRedirect> = all["HTTPRouteRedirectPortAndScheme.yaml"]
        .iter()
        .filter_map(|r| match r {
            Resource::HttpRoute(r) => Some(r),
            _ => None,
        })
        .flat_map(|r| &r.rules)
        .flat_map(|rule| &rule.filters)
        .filter_map(|f| match f {
            Filter::RequestRedirect(r) => Some(r),
            _ => None,
        })
        .collect();
    ensure!(!redirects.is_empty(), "no redirects found");
    assert!(
        redirects
            .iter()
            .any(|r| r.scheme.as_deref() == Some("https"))
    );
    assert!(redirects.iter().any(|r| r.port.is_some()));

    let Resource::Gateway(gw) = find(
        &all,
        "HTTPRouteRedirectPortAndScheme.yaml",
        Kind::Gateway,
        "same-namespace-with-https-listener",
    )?
    else {
        bail!("not a gateway")
    };
    assert_eq!(gw.listeners.len(), 4);
    assert!(
        gw.listeners
            .iter()
            .all(|l| l.protocol == ListenerProtocol::Https && l.port == 443)
    );
    assert_eq!(gw.listeners[2].hostname.as_deref(), Some("*.wildcard.org"));

    let Resource::Gateway(gw) = find(
        &all,
        "HTTPRouteDisallowedKind.yaml",
        Kind::Gateway,
        "tlsroutes-only",
    )?
    else {
        bail!("not a gateway")
    };
    assert_eq!(
        gw.listeners[0].allowed_routes.kinds,
        [GroupKind {
            group: "gateway.networking.k8s.io".into(),
            kind: "TLSRoute".into(),
        }]
    );
    Ok(())
}

#[test]
fn grpc_method_matches_translate_to_paths() -> Result<()> {
    let all = load_all()?;
    let Resource::HttpRoute(r) = find(
        &all,
        "GRPCExactMethodMatching.yaml",
        Kind::GRPCRoute,
        "exact-matching",
    )?
    else {
        bail!("not a route")
    };
    assert_eq!(r.kind, RouteKind::Grpc);
    assert_eq!(
        r.rules[1].matches[0].path,
        Some(PathMatch::Exact(
            "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/EchoTwo".into()
        ))
    );
    let Resource::Service(s) = find(
        &all,
        "GRPCExactMethodMatching.yaml",
        Kind::Service,
        "grpc-infra-backend-v1",
    )?
    else {
        bail!("not a Service")
    };
    assert_eq!(
        s.ports[0].app_protocol.as_deref(),
        Some("kubernetes.io/h2c")
    );
    assert_eq!(
        (s.ports[0].port, s.ports[0].target_port),
        (8080, Some(3000))
    );
    Ok(())
}
