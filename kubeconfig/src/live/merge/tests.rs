use super::*;
use crate::parse_documents;
use serde_json::{Value, json};
use switchyard_proto::model::{CONTROLLER_NAME, validate_resource};
use switchyard_test_support::fixtures::{self, endpoint, listener};

/// Two GatewayClasses (ours and another controller's) with a Gateway
/// each; a route on both with a cross-namespace backend (granted) and a
/// mirror; a route on theirs only; namespaces, an unrelated grant,
/// Services and slices, some used by no route of ours.
fn cluster() -> String {
    let http = listener("http", 80, "HTTP");
    let mut all_namespaces = http.clone();
    all_namespaces["allowedRoutes"] = json!({"namespaces": {"from": "All"}});
    let to_services = json!([{"group": "", "kind": "Service"}]);
    fixtures::yaml(&[
        fixtures::gateway_class("ours", CONTROLLER_NAME),
        fixtures::gateway_class("theirs", fixtures::OTHER_CONTROLLER),
        fixtures::gateway("infra", "gw", "ours", json!([all_namespaces])),
        fixtures::gateway("infra", "other-gw", "theirs", json!([http])),
        fixtures::route(
            "shop",
            "app",
            json!({"parentRefs": [{"name": "gw", "namespace": "infra"},
                                  {"name": "other-gw", "namespace": "infra"}],
                   "rules": [{"backendRefs": [{"name": "blue", "port": 80},
                                              {"name": "db", "namespace": "data", "port": 80}],
                              "filters": [{"type": "RequestMirror",
                                           "requestMirror": {"backendRef": {"name": "shadow", "port": 80}}}]}]}),
        ),
        fixtures::route(
            "shop",
            "not-ours",
            json!({"parentRefs": [{"name": "other-gw", "namespace": "infra"}],
                   "rules": [{"backendRefs": [{"name": "unrelated", "port": 80}]}]}),
        ),
        fixtures::with_labels(fixtures::namespace("shop"), json!({"team": "a"})),
        fixtures::namespace("kube-system"),
        fixtures::reference_grant("data", "allow-shop", "shop", to_services.clone()),
        fixtures::reference_grant("elsewhere", "unrelated", "shop", to_services),
        fixtures::service("shop", "blue", json!([{"port": 80, "targetPort": 8080}])),
        fixtures::service("shop", "shadow", json!([{"port": 80}])),
        fixtures::service("data", "db", json!([{"port": 80}])),
        fixtures::service("shop", "unrelated", json!([{"port": 80}])),
        slice("blue-1", "blue", "10.0.0.1", Some("zone-a")),
        fixtures::slice(
            "shop",
            "unrelated-1",
            "unrelated",
            json!([{"port": 80}]),
            json!([endpoint("10.0.0.9", None, None)]),
        ),
    ])
}

pub(super) fn keys(resources: &[Resource]) -> Vec<String> {
    resources.iter().map(|r| r.key().to_string()).collect()
}

#[test]
fn only_what_our_gateway_class_serves_is_kept_in_apply_order() {
    let all = parse_documents("cluster.yaml", &cluster()).unwrap();
    let served = select_served(all, CONTROLLER_NAME);
    assert_eq!(
        keys(&served),
        [
            "Namespace shop",
            "GatewayClass ours",
            "Gateway infra/gw",
            "ReferenceGrant data/allow-shop",
            "Service data/db",
            "Service shop/blue",
            "Service shop/shadow",
            "EndpointSlice shop/blue-1",
            "HTTPRoute shop/app",
        ]
    );
    // The route keeps its parentRef to the other Gateway: the router and
    // status report on ours only, but the spec is the user's.
    let Some(Resource::HttpRoute(app)) = served.last() else {
        panic!("no route")
    };
    assert_eq!(app.parent_refs.len(), 2);
}

#[test]
fn nothing_is_served_without_our_gateway_class() {
    let all = parse_documents("cluster.yaml", &cluster()).unwrap();
    assert!(select_served(all, "example.com/nobody").is_empty());
}

/// A slice of `service` in `shop`: one endpoint on port 8080, no
/// conditions (so ready).
fn slice(name: &str, service: &str, address: &str, zone: Option<&str>) -> Value {
    fixtures::slice(
        "shop",
        name,
        service,
        json!([{"port": 8080}]),
        json!([endpoint(address, zone, None)]),
    )
}

/// A cluster's objects as read, without exports or held objects.
pub(super) fn read(name: &str, resources: Vec<Resource>) -> ClusterObjects {
    ClusterObjects {
        name: name.into(),
        resources,
        ..ClusterObjects::default()
    }
}

pub(super) fn slices(merged: &Merged) -> Vec<(&str, &str, &str)> {
    merged
        .resources
        .iter()
        .filter_map(|r| match r {
            Resource::EndpointSlice(s) => Some((
                s.meta.name.as_str(),
                s.cluster.as_deref().unwrap_or_default(),
                s.endpoints[0].addresses[0].as_str(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn a_service_in_two_clusters_is_served_by_the_first_clusters_endpoints_only() {
    let east = parse_documents("east", &cluster()).unwrap();
    // The west cluster has only the backend: the same Service and a slice
    // whose name equals east's. Not exported: its pods are not east's.
    let west_yaml = fixtures::yaml(&[
        fixtures::service("shop", "blue", json!([{"port": 80, "targetPort": 9090}])),
        slice("blue-1", "blue", "10.1.0.1", Some("zone-b")),
    ]);
    let west = parse_documents("west", &west_yaml).unwrap();
    let merged = merge_clusters(
        &[read("east", east), read("admin@West_2", west)],
        CONTROLLER_NAME,
    );
    assert_eq!(slices(&merged), [("blue-1.east", "east", "10.0.0.1")]);
    // One Service, the first cluster's, tagged with its origin.
    let services: Vec<_> = merged
        .resources
        .iter()
        .filter_map(|r| match r {
            Resource::Service(s) if s.meta.name == "blue" => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(services.len(), 1);
    assert_eq!(services[0].ports[0].target_port, Some(8080));
    assert_eq!(services[0].meta.origin.as_deref(), Some("east"));
    assert_eq!(merged.contributed["east"], ["shop/blue"]);
    assert!(merged.contributed["admin@West_2"].is_empty());
    for r in &merged.resources {
        validate_resource(r).unwrap();
    }
}

#[test]
fn a_gateway_class_of_another_controller_in_another_cluster_is_never_ours() {
    // West names its class "ours" too, but for another controller, and
    // has a Gateway and route of its own on it.
    let west_yaml = fixtures::yaml(&[
        fixtures::gateway_class("ours", fixtures::OTHER_CONTROLLER),
        fixtures::gateway(
            "infra",
            "west-gw",
            "ours",
            json!([listener("http", 80, "HTTP")]),
        ),
        fixtures::route(
            "shop",
            "west-app",
            json!({"parentRefs": [{"name": "west-gw", "namespace": "infra"}],
                   "rules": [{"backendRefs": [{"name": "blue", "port": 80}]}]}),
        ),
    ]);
    let west = parse_documents("west", &west_yaml).unwrap();
    // West first: its class wins the name but is not ours.
    let east = parse_documents("east", &cluster()).unwrap();
    let merged = merge_clusters(&[read("west", west), read("east", east)], CONTROLLER_NAME);
    let keys = keys(&merged.resources);
    assert!(keys.contains(&"Gateway infra/gw".to_string()), "{keys:?}");
    assert!(keys.contains(&"HTTPRoute shop/app".to_string()));
    assert!(
        !keys.contains(&"Gateway infra/west-gw".to_string()),
        "{keys:?}"
    );
    assert!(!keys.contains(&"HTTPRoute shop/west-app".to_string()));
    let class = merged.resources.iter().find_map(|r| match r {
        Resource::GatewayClass(c) => Some(c),
        _ => None,
    });
    assert_eq!(class.unwrap().meta.origin.as_deref(), Some("east"));
}

#[test]
fn held_objects_of_a_cluster_pass_as_stored_and_win_by_source_order() {
    let east = parse_documents("east", &cluster()).unwrap();
    let west_yaml = fixtures::yaml(&[slice("blue-9", "blue", "10.1.0.9", None)]);
    let west = parse_documents("west", &west_yaml).unwrap();
    let before = merge_clusters(
        &[read("east", east), read("west", west.clone())],
        CONTROLLER_NAME,
    );
    // East is not listed in this term: what the store held from it.
    let held: Vec<Resource> = before
        .resources
        .iter()
        .filter(|r| r.meta().origin.as_deref() == Some("east"))
        .cloned()
        .collect();
    let after = merge_clusters(
        &[
            ClusterObjects {
                name: "east".into(),
                held,
                ..ClusterObjects::default()
            },
            read("west", west),
        ],
        CONTROLLER_NAME,
    );
    assert_eq!(after.resources, before.resources, "nothing renamed twice");
}

#[test]
fn one_cluster_keeps_slice_names_and_tags_the_cluster() {
    let east = parse_documents("east", &cluster()).unwrap();
    let merged = merge_clusters(&[read("east", east)], CONTROLLER_NAME);
    let slice = merged
        .resources
        .iter()
        .find_map(|r| match r {
            Resource::EndpointSlice(s) => Some(s),
            _ => None,
        })
        .unwrap();
    assert_eq!(slice.meta.name, "blue-1");
    assert_eq!(slice.cluster.as_deref(), Some("east"));
}

#[test]
fn cluster_labels_are_dns_labels() {
    assert_eq!(cluster_label("kind-kind"), "kind-kind");
    assert_eq!(
        cluster_label("arn:aws:eks:eu-west-1:123:cluster/prod"),
        "arn-aws-eks-eu-west-1-123-cluster-prod"
    );
    assert_eq!(cluster_label("@@"), "cluster");
    assert!(cluster_label(&"x".repeat(100)).len() <= 63);
    let long = slice_name(&"a".repeat(260), "east");
    assert!(long.len() <= 253 && long.ends_with(".east"));
}

/// A `kubernetes.io/tls` Secret (its PEM is not read here).
fn tls_secret(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
           "metadata": {"name": name, "namespace": namespace},
           "stringData": {"tls.crt": "cert", "tls.key": "key"}})
}

#[test]
fn only_the_secrets_our_listeners_name_are_kept_with_grants_where_they_live() {
    let mut https = listener("https", 443, "HTTPS");
    https["tls"] = json!({"certificateRefs": [{"name": "local"},
                                               {"name": "shared", "namespace": "certs"}]});
    let mut theirs = listener("https", 443, "HTTPS");
    theirs["tls"] = json!({"certificateRefs": [{"name": "theirs"}]});
    let to_secrets = json!([{"group": "", "kind": "Secret"}]);
    let mut grant = fixtures::reference_grant("certs", "gateways", "infra", to_secrets.clone());
    grant["spec"]["from"][0]["kind"] = json!("Gateway");
    let all = parse_documents(
        "cluster.yaml",
        &fixtures::yaml(&[
            fixtures::gateway_class("ours", CONTROLLER_NAME),
            fixtures::gateway_class("theirs", fixtures::OTHER_CONTROLLER),
            fixtures::gateway("infra", "gw", "ours", json!([https])),
            fixtures::gateway("infra", "other-gw", "theirs", json!([theirs])),
            tls_secret("infra", "local"),
            tls_secret("certs", "shared"),
            tls_secret("infra", "theirs"),
            tls_secret("infra", "unnamed"),
            grant,
            fixtures::reference_grant("elsewhere", "unrelated", "infra", to_secrets),
        ]),
    )
    .unwrap();
    let served = select_served(all, CONTROLLER_NAME);
    assert_eq!(
        keys(&served),
        [
            "GatewayClass ours",
            "Secret certs/shared",
            "Secret infra/local",
            "Gateway infra/gw",
            "ReferenceGrant certs/gateways",
        ]
    );
}

/// `route` (an HTTPRoute fixture) declared as a GRPCRoute.
fn as_grpc(mut route: Value) -> Value {
    route["kind"] = json!("GRPCRoute");
    route
}

#[test]
fn a_grpc_route_named_like_a_served_http_route_is_left_out_and_named() {
    let on_gw = |backend: &str| {
        json!({"parentRefs": [{"name": "gw", "namespace": "infra"}],
               "rules": [{"backendRefs": [{"name": backend, "port": 80}]}]})
    };
    let extra = fixtures::yaml(&[
        // Same name as the served HTTPRoute shop/app: left out.
        as_grpc(fixtures::route("shop", "app", on_gw("blue"))),
        // Same name as an HTTPRoute of another controller's Gateway only:
        // served.
        as_grpc(fixtures::route("shop", "not-ours", on_gw("blue"))),
        as_grpc(fixtures::route("shop", "calls", on_gw("blue"))),
    ]);
    let text = format!("{}---\n{extra}", cluster());
    let cluster = ClusterObjects {
        name: "east".into(),
        resources: parse_documents("cluster.yaml", &text).unwrap(),
        ..Default::default()
    };
    let merged = merge_clusters(&[cluster], CONTROLLER_NAME);
    let routes: Vec<String> = keys(&merged.resources)
        .into_iter()
        .filter(|k| k.contains("Route "))
        .collect();
    assert_eq!(
        routes,
        [
            "HTTPRoute shop/app",
            "GRPCRoute shop/calls",
            "GRPCRoute shop/not-ours"
        ]
    );
    let collided: Vec<ObjectName> = merged
        .route_collisions
        .iter()
        .map(|r| r.meta.object_name())
        .collect();
    assert_eq!(collided, [ObjectName::new("shop", "app")]);
    // Everything else of the cluster is still served.
    assert!(keys(&merged.resources).contains(&"Service shop/blue".to_string()));
}
