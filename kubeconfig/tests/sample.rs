//! A sample file with every supported kind parses into exactly the model
//! values expected, defaults included; the embedded default configuration
//! parses too.

use std::collections::BTreeMap;
use switchyard_kubeconfig::{DEFAULT_CONFIG, parse_documents, parse_keys};
use switchyard_proto::model::*;

const SAMPLE: &str = r#"
# An empty document first: skipped, but it still counts for indexes.
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: switchyard
spec:
  controllerName: switchyard.io/gateway-controller
---
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels:
    team: shop
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: edge
  namespace: shop
  generation: 3
  creationTimestamp: "2024-01-02T03:04:05Z"
spec:
  gatewayClassName: switchyard
  listeners:
  - name: http
    port: 80
    protocol: HTTP
  - name: shops
    port: 8443
    protocol: HTTPS
    hostname: "*.shop.example"
    allowedRoutes:
      namespaces:
        from: Selector
        selector:
          matchLabels:
            team: shop
          matchExpressions:
          - key: env
            operator: In
            values: [prod]
      kinds:
      - kind: HTTPRoute
  - name: tcp
    port: 9000
    protocol: TCP
    allowedRoutes:
      namespaces:
        from: All
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata:
  name: from-shop
  namespace: backends
spec:
  from:
  - group: gateway.networking.k8s.io
    kind: HTTPRoute
    namespace: shop
  to:
  - group: ""
    kind: Service
---
apiVersion: v1
kind: Service
metadata:
  name: cart
  namespace: shop
  annotations:
    switchyard.io/health-path: /healthz
spec:
  ports:
  - name: http
    port: 80
    targetPort: web
  - port: 81
  - name: admin
    port: 9090
    targetPort: 19090
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: cart-abc
  namespace: shop
  labels:
    kubernetes.io/service-name: cart
addressType: IPv4
ports:
- name: http
  port: 8080
- name: ""
  port: 81
endpoints:
- addresses: [10.0.0.1]
  zone: zone-a
- addresses: [10.0.0.2]
  conditions:
    ready: false
    terminating: true
- addresses: [10.0.0.3]
  conditions:
    ready: false
    serving: true
---
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: store
  annotations:
    switchyard.io/readiness-policy: majority
spec:
  parentRefs:
  - name: edge
    namespace: shop
    sectionName: http
  - name: edge
    namespace: shop
    port: 8443
  hostnames: [store.shop.example]
  rules:
  - name: api
    matches:
    - path:
        type: RegularExpression
        value: "/api/v[0-9]+/.*"
      headers:
      - name: X-Version
        value: "2"
      - name: X-Canary
        type: RegularExpression
        value: "^(yes|true)$"
      queryParams:
      - name: debug
        value: "1"
      method: POST
    - headers:
      - name: X-Only-Header
        value: a
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: X-Set, value: s}]
        add: [{name: X-Add, value: a}]
        remove: [X-Remove]
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        add: [{name: X-Served-By, value: switchyard}]
    - type: RequestMirror
      requestMirror:
        backendRef:
          name: shadow
          port: 8080
        fraction:
          numerator: 1
    - type: URLRewrite
      urlRewrite:
        hostname: internal.shop
        path:
          type: ReplacePrefixMatch
          replacePrefixMatch: /v2
    backendRefs:
    - name: cart
      port: 80
      weight: 90
      filters:
      - type: RequestHeaderModifier
        requestHeaderModifier:
          set: [{name: X-Backend, value: cart}]
    - name: cart-next
      namespace: backends
      port: 80
      weight: 10
    - name: bucket
      group: storage.example
      kind: Bucket
  - matches:
    - path:
        type: Exact
        value: /old
    filters:
    - type: RequestRedirect
      requestRedirect:
        scheme: https
        hostname: new.shop.example
        port: 8443
        statusCode: 301
        path:
          type: ReplaceFullPath
          replaceFullPath: /new
  - backendRefs:
    - name: cart
      port: 80
"#;

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

fn expected() -> Vec<Resource> {
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
            },
            Listener {
                name: "shops".into(),
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
            },
        ],
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
            },
            ServicePort {
                name: None,
                port: 81,
                target_port: Some(81),
            },
            ServicePort {
                name: Some("admin".into()),
                port: 9090,
                target_port: Some(19090),
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
        gateway,
        grant,
        service,
        slice,
        route,
    ]
}

#[test]
fn every_kind_translates_to_the_expected_model() {
    let got = parse_documents("sample.yaml", SAMPLE).expect("sample parses");
    let want = expected();
    assert_eq!(got.len(), want.len());
    // Compare one by one so a failure points at the resource that differs.
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "resource {}", w.key());
    }
    for r in &got {
        validate_resource(r).expect("already validated");
    }
}

#[test]
fn keys_match_the_parsed_resources() {
    let keys = parse_keys("sample.yaml", SAMPLE).expect("keys");
    let want: Vec<ResourceKey> = expected().iter().map(Resource::key).collect();
    assert_eq!(keys, want);
}

#[test]
fn keys_need_only_apiversion_kind_and_metadata() {
    let text = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n---\n\
                apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
                metadata: {name: app, namespace: demo}\n";
    let keys = parse_keys("delete.yaml", text).expect("keys");
    assert_eq!(
        keys,
        vec![
            ResourceKey {
                kind: Kind::Service,
                name: ObjectName::new("default", "web"),
            },
            ResourceKey {
                kind: Kind::HTTPRoute,
                name: ObjectName::new("demo", "app"),
            },
        ]
    );
}

#[test]
fn the_default_config_parses() {
    let got = parse_documents("default.yaml", DEFAULT_CONFIG).expect("default config parses");
    let keys: Vec<String> = got.iter().map(|r| r.key().to_string()).collect();
    assert_eq!(
        keys,
        [
            "GatewayClass switchyard",
            "Namespace demo",
            "Gateway demo/gateway",
            "Service demo/blue",
            "Service demo/green",
            "EndpointSlice demo/blue-1",
            "EndpointSlice demo/green-1",
            "HTTPRoute demo/app",
        ]
    );
    let Resource::GatewayClass(class) = &got[0] else {
        panic!("first is the class")
    };
    assert_eq!(class.controller_name, CONTROLLER_NAME);
    let Resource::Gateway(gw) = &got[2] else {
        panic!("third is the gateway")
    };
    assert_eq!(gw.listeners.len(), 1);
    assert_eq!(gw.listeners[0].port, 8080);
    assert_eq!(gw.listeners[0].protocol, ListenerProtocol::Http);
    for (i, port) in [(5, 18081), (6, 18082)] {
        let Resource::EndpointSlice(s) = &got[i] else {
            panic!("slice at {i}")
        };
        assert_eq!(s.ports[0].port, port);
        assert_eq!(s.endpoints[0].addresses, ["127.0.0.1"]);
    }
    let Resource::HttpRoute(route) = &got[7] else {
        panic!("last is the route")
    };
    assert_eq!(
        route.rules[0].backend_refs,
        [BackendRef::service("blue", 80)]
    );
    let Resource::Service(blue) = &got[3] else {
        panic!("fourth is blue")
    };
    assert_eq!(blue.ports[0].port, 80);
    assert_eq!(blue.ports[0].target_port, Some(8080));
}

#[test]
fn empty_and_comment_only_texts_hold_no_objects() {
    for text in [
        "",
        "# nothing here\n",
        "---\n---\n",
        "---\n# just a comment\n...\n",
    ] {
        assert_eq!(parse_documents("empty.yaml", text).expect(text), vec![]);
        assert_eq!(parse_keys("empty.yaml", text).expect(text), vec![]);
    }
}

#[test]
fn unquoted_scalars_in_string_fields_are_strings() {
    let text = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
                metadata: {name: r}\nspec:\n  rules:\n  - matches:\n    - headers:\n\
                \x20     - {name: X-Version, value: 2}\n      queryParams:\n\
                \x20     - {name: on, value: true}\n";
    let got = parse_documents("scalars.yaml", text).expect("parses");
    let Resource::HttpRoute(r) = &got[0] else {
        panic!("a route")
    };
    assert_eq!(r.rules[0].matches[0].headers[0].value, "2");
    assert_eq!(r.rules[0].matches[0].query_params[0].value, "true");
}
