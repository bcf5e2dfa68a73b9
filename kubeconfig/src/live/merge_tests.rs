use super::*;
use crate::parse_documents;
use switchyard_proto::model::{CONTROLLER_NAME, validate_resource};

const CLUSTER: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ours}
spec: {controllerName: switchyard.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: theirs}
spec: {controllerName: example.com/other}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: ours
  listeners: [{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: other-gw, namespace: infra}
spec:
  gatewayClassName: theirs
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: shop}
spec:
  parentRefs: [{name: gw, namespace: infra}, {name: other-gw, namespace: infra}]
  rules:
  - backendRefs: [{name: blue, port: 80}, {name: db, namespace: data, port: 80}]
    filters:
    - type: RequestMirror
      requestMirror: {backendRef: {name: shadow, port: 80}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: not-ours, namespace: shop}
spec:
  parentRefs: [{name: other-gw, namespace: infra}]
  rules: [{backendRefs: [{name: unrelated, port: 80}]}]
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: kube-system}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: allow-shop, namespace: data}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: shop}]
  to: [{group: "", kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: unrelated, namespace: elsewhere}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: shop}]
  to: [{group: "", kind: Service}]
---
apiVersion: v1
kind: Service
metadata: {name: blue, namespace: shop}
spec: {ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: shadow, namespace: shop}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: data}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: unrelated, namespace: shop}
spec: {ports: [{port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: blue-1, namespace: shop, labels: {kubernetes.io/service-name: blue}}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.0.0.1], zone: zone-a}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: unrelated-1, namespace: shop, labels: {kubernetes.io/service-name: unrelated}}
addressType: IPv4
ports: [{port: 80}]
endpoints: [{addresses: [10.0.0.9]}]
"#;

fn keys(resources: &[Resource]) -> Vec<String> {
    resources.iter().map(|r| r.key().to_string()).collect()
}

#[test]
fn only_what_our_gateway_class_serves_is_kept_in_apply_order() {
    let all = parse_documents("cluster.yaml", CLUSTER).unwrap();
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
    let all = parse_documents("cluster.yaml", CLUSTER).unwrap();
    assert!(select_served(all, "example.com/nobody").is_empty());
}

fn slice(name: &str, service: &str, address: &str, zone: &str) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}, namespace: shop, labels: {{kubernetes.io/service-name: {service}}}}}\naddressType: IPv4\nports: [{{port: 8080}}]\nendpoints: [{{addresses: [{address}], zone: {zone}}}]\n"
    )
}

#[test]
fn endpoints_of_one_service_in_two_clusters_are_merged_and_tagged() {
    let east = parse_documents("east", CLUSTER).unwrap();
    // The west cluster has only the backend: the same Service and a slice
    // whose name equals east's.
    let west_yaml = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: blue, namespace: shop}}\nspec: {{ports: [{{port: 80, targetPort: 9090}}]}}\n---\n{}",
        slice("blue-1", "blue", "10.1.0.1", "zone-b")
    );
    let west = parse_documents("west", &west_yaml).unwrap();
    let merged = merge_clusters(
        &[
            ClusterObjects {
                name: "east".into(),
                resources: east,
            },
            ClusterObjects {
                name: "admin@West_2".into(),
                resources: west,
            },
        ],
        CONTROLLER_NAME,
    );
    let slices: Vec<_> = merged
        .resources
        .iter()
        .filter_map(|r| match r {
            Resource::EndpointSlice(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(slices.len(), 2);
    let tagged: Vec<_> = slices
        .iter()
        .map(|s| {
            (
                s.meta.name.as_str(),
                s.cluster.as_deref().unwrap(),
                s.endpoints[0].addresses[0].as_str(),
                s.endpoints[0].zone.as_deref().unwrap(),
            )
        })
        .collect();
    assert!(tagged.contains(&("blue-1.east", "east", "10.0.0.1", "zone-a")));
    assert!(tagged.contains(&("blue-1.admin-west-2", "admin@West_2", "10.1.0.1", "zone-b")));
    // One Service, the first cluster's.
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
    assert_eq!(merged.contributed["east"], ["shop/blue"]);
    assert_eq!(merged.contributed["admin@West_2"], ["shop/blue"]);
    for r in &merged.resources {
        validate_resource(r).unwrap();
    }
}

#[test]
fn one_cluster_keeps_slice_names_and_tags_the_cluster() {
    let east = parse_documents("east", CLUSTER).unwrap();
    let merged = merge_clusters(
        &[ClusterObjects {
            name: "east".into(),
            resources: east,
        }],
        CONTROLLER_NAME,
    );
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
