//! The world `prop_router` routes in: a table compiled from every
//! Gateway, HTTPRoute and ReferenceGrant of the Gateway API conformance
//! files plus hand-built routes for what they lack, and the vocabulary
//! (hosts, paths, header names, listener keys) requests are built from.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;
use switchyard_proto::model::validate::MAX_WEIGHT;
use switchyard_proto::model::*;
use switchyard_proxy::router::{ListenerKey, RouteTable};

/// The compiled table and the vocabulary requests are built from.
pub struct World {
    pub table: RouteTable,
    pub backends: BTreeSet<BackendKey>,
    /// Every listener key a served Gateway has, plus keys nobody serves.
    pub keys: Vec<ListenerKey>,
    /// Hostnames from listeners and routes (wildcards as written).
    pub hosts: Vec<String>,
    /// Paths from path matches, filters and redirects.
    pub paths: Vec<String>,
    /// Header names from matches.
    pub header_names: Vec<String>,
}

pub static WORLD: LazyLock<World> = LazyLock::new(build_world);

pub const INFRA: &str = "gateway-conformance-infra";

fn build_world() -> World {
    let paths = switchyard_test_support::gateway_api_case_files();

    // Keyed by name so objects shared between files (the base Gateways)
    // appear once; the first file's copy wins.
    let mut gateways: BTreeMap<ObjectName, Gateway> = BTreeMap::new();
    let mut routes: BTreeMap<ObjectName, HttpRoute> = BTreeMap::new();
    let mut grants: BTreeMap<ObjectName, ReferenceGrant> = BTreeMap::new();
    let mut services: BTreeMap<(String, String), BTreeSet<u16>> = BTreeMap::new();
    let mut namespace_labels: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for path in &paths {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).expect("readable conformance file");
        let data: Value = yaml_serde::from_str(&text).expect("conformance file is YAML");
        let mut index = 0;
        for list in ["gateways", "routes", "reference_grants"] {
            for object in data[list].as_array().into_iter().flatten() {
                let resource = switchyard_kubeconfig::parse_object(&source, index, object.clone())
                    .unwrap_or_else(|e| panic!("{e}"));
                index += 1;
                let name = resource.meta().object_name();
                namespace_labels.entry(name.namespace.clone()).or_default();
                match resource {
                    Resource::Gateway(g) => {
                        gateways.entry(name).or_insert(g);
                    }
                    Resource::HttpRoute(r) => {
                        routes.entry(name).or_insert(r);
                    }
                    Resource::ReferenceGrant(g) => {
                        grants.entry(name).or_insert(g);
                    }
                    other => panic!("{source}: unexpected {} in {list}", other.kind()),
                }
            }
        }
        for backend in data["backends"].as_array().into_iter().flatten() {
            if !backend["exists_in_base"].as_bool().unwrap_or(false) {
                continue;
            }
            let key = backend["service"]
                .as_str()
                .and_then(BackendKey::parse)
                .expect("backends[].service is ns/name:port");
            services
                .entry((key.service.namespace, key.service.name))
                .or_default()
                .insert(key.port);
        }
        if let Some(labels) = data["namespace_labels"].as_object() {
            for (ns, pairs) in labels {
                let entry = namespace_labels.entry(ns.clone()).or_default();
                for (k, v) in pairs.as_object().into_iter().flatten() {
                    entry.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
                }
            }
        }
    }
    for (name, route) in extra_routes() {
        routes.insert(name, route);
    }
    for (ns, name, port) in [
        (INFRA, "prop-a", 80),
        (INFRA, "prop-b", 80),
        (INFRA, "prop-b", 81),
    ] {
        services
            .entry((ns.to_string(), name.to_string()))
            .or_default()
            .insert(port);
    }

    let mut snapshot = ConfigSnapshot {
        version: 1,
        ..Default::default()
    };
    let classes: BTreeSet<String> = gateways
        .values()
        .map(|g| g.gateway_class_name.clone())
        .collect();
    for class in classes {
        snapshot.gateway_classes.push(GatewayClass {
            meta: ObjectMeta::named("", class),
            controller_name: CONTROLLER_NAME.to_string(),
        });
    }
    for (ns, labels) in namespace_labels {
        let mut meta = ObjectMeta::named("", ns.clone());
        meta.labels = labels;
        meta.labels
            .insert("kubernetes.io/metadata.name".to_string(), ns);
        snapshot.namespaces.push(Namespace { meta });
    }
    // One snapshot merges every case file's Gateways on the fleet's ports
    // (in the suite each Gateway has an address of its own), so catch-all
    // listeners on :80 clash: the oldest keeps the port and the others are
    // Conflicted and serve nothing, which the properties cover too. A
    // Gateway without a creation time counts as the oldest: leave it off
    // `same-namespace` only, which most cases and the extra routes use.
    for (name, g) in gateways.iter_mut() {
        if name.name != "same-namespace" {
            g.meta.creation_timestamp_ms = Some(1);
        }
    }
    snapshot.gateways = gateways.into_values().collect();
    snapshot.reference_grants = grants.into_values().collect();
    snapshot.services = services
        .into_iter()
        .map(|((ns, name), ports)| Service {
            meta: ObjectMeta::named(ns, name),
            ports: ports
                .into_iter()
                .map(|port| ServicePort {
                    name: Some("http".to_string()),
                    port,
                    target_port: None,
                    app_protocol: None,
                })
                .collect(),
        })
        .collect();
    let routes: Vec<HttpRoute> = routes.into_values().collect();
    let table = RouteTable::compile(&snapshot, &routes);

    let mut keys = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for g in &snapshot.gateways {
        for l in &g.listeners {
            keys.insert(ListenerKey {
                gateway: Some(g.meta.object_name()),
                port: l.port,
            });
            keys.insert(ListenerKey {
                gateway: None,
                port: l.port,
            });
            hosts.extend(l.hostname.clone());
        }
    }
    // Keys no served Gateway has: the router must 404, not panic.
    keys.insert(ListenerKey {
        gateway: Some(ObjectName::new("nope", "nope")),
        port: 80,
    });
    keys.insert(ListenerKey {
        gateway: None,
        port: 0,
    });
    let mut paths = BTreeSet::new();
    let mut header_names = BTreeSet::new();
    for r in &routes {
        hosts.extend(r.hostnames.iter().cloned());
        for rule in &r.rules {
            for m in &rule.matches {
                match &m.path {
                    Some(PathMatch::Exact(p)) | Some(PathMatch::PathPrefix(p)) => {
                        paths.insert(p.clone());
                    }
                    _ => {}
                }
                header_names.extend(m.headers.iter().map(|h| h.name.clone()));
            }
        }
    }
    let backends = table.backends();
    assert!(
        backends.len() > 5,
        "the table serves too few backends: {backends:?}"
    );
    World {
        table,
        backends,
        keys: keys.into_iter().collect(),
        hosts: hosts.into_iter().collect(),
        paths: paths.into_iter().collect(),
        header_names: header_names.into_iter().collect(),
    }
}

/// Routes covering what the conformance files do not: regexes, query and
/// method matches, backend redirects, rewrites after regex matches,
/// fractional mirrors, extreme weights, missing Services and ports.
fn extra_routes() -> Vec<(ObjectName, HttpRoute)> {
    let svc = |name: &str, port: u16, weight: u32| BackendRef {
        weight,
        ..BackendRef::service(name, port)
    };
    let m = |path: Option<PathMatch>| RouteMatch {
        path,
        ..Default::default()
    };
    let regex = |p: &str| Some(PathMatch::RegularExpression(p.to_string()));
    let rules = vec![
        RouteRule {
            matches: vec![
                m(regex("/v[0-9]+(/.*)?")),
                m(regex("/(")), // bad regex: never matches, noted
                RouteMatch {
                    headers: vec![HeaderMatch {
                        match_type: StringMatchType::RegularExpression,
                        name: "x-version".into(),
                        value: "v[12]|.*beta.*".into(),
                    }],
                    query_params: vec![QueryParamMatch {
                        match_type: StringMatchType::RegularExpression,
                        name: "q".into(),
                        value: "[a-z]*".into(),
                    }],
                    ..m(Some(PathMatch::PathPrefix("/prop".into())))
                },
            ],
            filters: vec![Filter::UrlRewrite(UrlRewrite {
                hostname: Some("rewritten.example".into()),
                path: Some(PathModifier::ReplacePrefixMatch("/new/".into())),
            })],
            backend_refs: vec![svc("prop-a", 80, MAX_WEIGHT), svc("prop-b", 81, 1)],
            ..Default::default()
        },
        RouteRule {
            matches: vec![RouteMatch {
                method: Some("POST".into()),
                query_params: vec![QueryParamMatch {
                    match_type: StringMatchType::Exact,
                    name: "animal".into(),
                    value: "whale".into(),
                }],
                ..m(Some(PathMatch::Exact("/prop/post".into())))
            }],
            filters: vec![Filter::RequestMirror(RequestMirror {
                backend_ref: svc("prop-b", 80, 1),
                percent: None,
                fraction: Some((1, 3)),
            })],
            backend_refs: vec![
                svc("prop-a", 80, 0),
                svc("missing", 80, u32::MAX / 4),
                svc("prop-b", 99, 1),
                BackendRef {
                    filters: vec![Filter::RequestRedirect(RequestRedirect {
                        scheme: Some("https".into()),
                        hostname: None,
                        path: Some(PathModifier::ReplaceFullPath("/moved".into())),
                        port: Some(8443),
                        status_code: Some(301),
                    })],
                    ..svc("prop-a", 80, u32::MAX / 4)
                },
                BackendRef {
                    filters: vec![Filter::RequestMirror(RequestMirror {
                        backend_ref: svc("missing", 80, 1),
                        percent: Some(50),
                        fraction: None,
                    })],
                    ..svc("prop-b", 80, 3)
                },
            ],
            ..Default::default()
        },
        RouteRule {
            matches: vec![m(Some(PathMatch::PathPrefix("/prop/redirect/".into())))],
            filters: vec![
                Filter::RequestRedirect(RequestRedirect {
                    path: Some(PathModifier::ReplacePrefixMatch("/".into())),
                    ..Default::default()
                }),
                Filter::ResponseHeaderModifier(HeaderModifier {
                    set: vec![HeaderValue {
                        name: "x-set".into(),
                        value: "1".into(),
                    }],
                    ..Default::default()
                }),
            ],
            ..Default::default()
        },
        RouteRule {
            // Regex match plus ReplacePrefixMatch: the path is kept.
            matches: vec![m(regex("/prop/re/.*"))],
            filters: vec![Filter::UrlRewrite(UrlRewrite {
                hostname: None,
                path: Some(PathModifier::ReplacePrefixMatch("/x".into())),
            })],
            backend_refs: vec![svc("prop-a", 80, 1)],
            ..Default::default()
        },
        RouteRule {
            // No backends: 500.
            matches: vec![m(Some(PathMatch::Exact("/prop/empty".into())))],
            ..Default::default()
        },
    ];
    let parent = ParentRef {
        group: "gateway.networking.k8s.io".into(),
        kind: "Gateway".into(),
        namespace: None,
        name: "same-namespace".into(),
        section_name: None,
        port: None,
    };
    let with_hosts = HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named(INFRA, "prop-hosts"),
        parent_refs: vec![parent.clone()],
        hostnames: vec!["*.prop.example".into(), "prop.example".into()],
        rules: rules.clone(),
    };
    let any_host = HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named(INFRA, "prop-any"),
        parent_refs: vec![parent],
        hostnames: Vec::new(),
        rules,
    };
    [with_hosts, any_host]
        .into_iter()
        .map(|r| (r.meta.object_name(), r))
        .collect()
}
