//! The model values `sample.yaml` must translate to, defaults included.

use std::collections::BTreeMap;
use switchyard_proto::model::*;

fn meta(namespace: &str, name: &str) -> ObjectMeta {
    ObjectMeta::named(namespace, name)
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn header(name: &str, value: &str) -> HeaderValue {
    HeaderValue {
        name: name.into(),
        value: value.into(),
    }
}

fn prefix_root() -> Option<PathMatch> {
    Some(PathMatch::PathPrefix("/".into()))
}

pub fn expected() -> Vec<Resource> {
    let gateway_class = Resource::GatewayClass(GatewayClass {
        meta: meta("", "switchyard"),
        controller_name: CONTROLLER_NAME.into(),
    });
    let namespace = Resource::Namespace(Namespace {
        meta: ObjectMeta {
            labels: labels(&[("team", "shop")]),
            ..meta("", "shop")
        },
    });
    let gateway = Resource::Gateway(Gateway {
        meta: ObjectMeta {
            k8s_generation: Some(3),
            creation_timestamp_ms: Some(1_704_164_645_000),
            ..meta("shop", "edge")
        },
        gateway_class_name: "switchyard".into(),
        listeners: vec![
            Listener {
                name: "http".into(),
                port: 80,
                protocol: ListenerProtocol::Http,
                hostname: None,
                allowed_routes: AllowedRoutes::default(),
                tls: None,
            },
            Listener {
                name: "shops".into(),
                tls: Some(ListenerTls {
                    mode: TlsMode::Terminate,
                    certificate_refs: vec![CertificateRef {
                        group: "".into(),
                        kind: "Secret".into(),
                        name: "shop-cert".into(),
                        namespace: None,
                    }],
                }),
                port: 8443,
                protocol: ListenerProtocol::Https,
                hostname: Some("*.shop.example".into()),
                allowed_routes: AllowedRoutes {
                    namespaces: RouteNamespaces::Selector(LabelSelector {
                        match_labels: labels(&[("team", "shop")]),
                        match_expressions: vec![LabelExpression {
                            key: "env".into(),
                            operator: "In".into(),
                            values: vec!["prod".into()],
                        }],
                    }),
                    kinds: vec![GroupKind {
                        group: "gateway.networking.k8s.io".into(),
                        kind: "HTTPRoute".into(),
                    }],
                },
            },
            Listener {
                name: "tcp".into(),
                port: 9000,
                protocol: ListenerProtocol::Other("TCP".into()),
                hostname: None,
                allowed_routes: AllowedRoutes {
                    namespaces: RouteNamespaces::All,
                    kinds: vec![],
                },
                tls: None,
            },
        ],
    });
    let secret = Resource::Secret(Secret {
        meta: meta("shop", "shop-cert"),
        secret_type: TLS_SECRET_TYPE.into(),
        certificate_chain: "cert-pem".into(),
        private_key: PrivateKeyPem("key-pem".into()),
    });
    let grant = Resource::ReferenceGrant(ReferenceGrant {
        meta: meta("backends", "from-shop"),
        from: vec![GrantFrom {
            group: "gateway.networking.k8s.io".into(),
            kind: "HTTPRoute".into(),
            namespace: "shop".into(),
        }],
        to: vec![GrantTo {
            group: "".into(),
            kind: "Service".into(),
            name: None,
        }],
    });
    let service = Resource::Service(Service {
        meta: ObjectMeta {
            annotations: labels(&[(ANNOTATION_HEALTH_PATH, "/healthz")]),
            ..meta("shop", "cart")
        },
        ports: vec![
            ServicePort {
                name: Some("http".into()),
                port: 80,
                target_port: None,
                app_protocol: None,
            },
            ServicePort {
                name: None,
                port: 81,
                target_port: Some(81),
                app_protocol: Some("kubernetes.io/h2c".into()),
            },
            ServicePort {
                name: Some("admin".into()),
                port: 9090,
                target_port: Some(19090),
                app_protocol: None,
            },
        ],
    });
    let slice = Resource::EndpointSlice(EndpointSlice {
        meta: ObjectMeta {
            labels: labels(&[(SERVICE_NAME_LABEL, "cart")]),
            ..meta("shop", "cart-abc")
        },
        address_type: "IPv4".into(),
        ports: vec![
            EndpointPort {
                name: Some("http".into()),
                port: 8080,
            },
            EndpointPort {
                name: None,
                port: 81,
            },
        ],
        endpoints: vec![
            Endpoint {
                addresses: vec!["10.0.0.1".into()],
                ready: true,
                serving: true,
                terminating: false,
                zone: Some("zone-a".into()),
            },
            Endpoint {
                addresses: vec!["10.0.0.2".into()],
                ready: false,
                serving: false,
                terminating: true,
                zone: None,
            },
            Endpoint {
                addresses: vec!["10.0.0.3".into()],
                ready: false,
                serving: true,
                terminating: false,
                zone: None,
            },
        ],
        cluster: None,
    });
    let mut cart = BackendRef::service("cart", 80);
    cart.weight = 90;
    cart.filters = vec![Filter::RequestHeaderModifier(HeaderModifier {
        set: vec![header("X-Backend", "cart")],
        ..Default::default()
    })];
    let mut cart_next = BackendRef::service("cart-next", 80);
    cart_next.namespace = Some("backends".into());
    cart_next.weight = 10;
    let bucket = BackendRef {
        group: "storage.example".into(),
        kind: "Bucket".into(),
        namespace: None,
        name: "bucket".into(),
        port: None,
        weight: 1,
        filters: vec![],
    };
    let shadow = BackendRef::service("shadow", 8080);
    let route = Resource::HttpRoute(HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta {
            annotations: labels(&[(ANNOTATION_POLICY, "majority")]),
            ..meta("default", "store")
        },
        parent_refs: vec![
            ParentRef {
                group: "gateway.networking.k8s.io".into(),
                kind: "Gateway".into(),
                namespace: Some("shop".into()),
                name: "edge".into(),
                section_name: Some("http".into()),
                port: None,
            },
            ParentRef {
                group: "gateway.networking.k8s.io".into(),
                kind: "Gateway".into(),
                namespace: Some("shop".into()),
                name: "edge".into(),
                section_name: None,
                port: Some(8443),
            },
        ],
        hostnames: vec!["store.shop.example".into()],
        rules: vec![
            RouteRule {
                name: Some("api".into()),
                matches: vec![
                    RouteMatch {
                        path: Some(PathMatch::RegularExpression("/api/v[0-9]+/.*".into())),
                        headers: vec![
                            HeaderMatch {
                                match_type: StringMatchType::Exact,
                                name: "X-Version".into(),
                                value: "2".into(),
                            },
                            HeaderMatch {
                                match_type: StringMatchType::RegularExpression,
                                name: "X-Canary".into(),
                                value: "^(yes|true)$".into(),
                            },
                        ],
                        query_params: vec![QueryParamMatch {
                            match_type: StringMatchType::Exact,
                            name: "debug".into(),
                            value: "1".into(),
                        }],
                        method: Some("POST".into()),
                    },
                    RouteMatch {
                        path: prefix_root(),
                        headers: vec![HeaderMatch {
                            match_type: StringMatchType::Exact,
                            name: "X-Only-Header".into(),
                            value: "a".into(),
                        }],
                        ..Default::default()
                    },
                ],
                filters: vec![
                    Filter::RequestHeaderModifier(HeaderModifier {
                        set: vec![header("X-Set", "s")],
                        add: vec![header("X-Add", "a")],
                        remove: vec!["X-Remove".into()],
                    }),
                    Filter::ResponseHeaderModifier(HeaderModifier {
                        add: vec![header("X-Served-By", "switchyard")],
                        ..Default::default()
                    }),
                    Filter::RequestMirror(RequestMirror {
                        backend_ref: shadow,
                        percent: None,
                        fraction: Some((1, 100)),
                    }),
                    Filter::UrlRewrite(UrlRewrite {
                        hostname: Some("internal.shop".into()),
                        path: Some(PathModifier::ReplacePrefixMatch("/v2".into())),
                    }),
                ],
                backend_refs: vec![cart, cart_next, bucket],
            },
            RouteRule {
                name: None,
                matches: vec![RouteMatch {
                    path: Some(PathMatch::Exact("/old".into())),
                    ..Default::default()
                }],
                filters: vec![Filter::RequestRedirect(RequestRedirect {
                    scheme: Some("https".into()),
                    hostname: Some("new.shop.example".into()),
                    path: Some(PathModifier::ReplaceFullPath("/new".into())),
                    port: Some(8443),
                    status_code: Some(301),
                })],
                backend_refs: vec![],
            },
            RouteRule {
                name: None,
                matches: vec![RouteMatch {
                    path: prefix_root(),
                    ..Default::default()
                }],
                filters: vec![],
                backend_refs: vec![BackendRef::service("cart", 80)],
            },
        ],
    });
    vec![
        gateway_class,
        namespace,
        secret,
        gateway,
        grant,
        service,
        slice,
        route,
    ]
}
