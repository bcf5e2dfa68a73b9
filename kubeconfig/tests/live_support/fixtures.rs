//! Objects as an API server would hold them, for the fake server.

use serde_json::{Value, json};

/// Gateway API group/version.
pub const GW: &str = "gateway.networking.k8s.io/v1";

/// Our GatewayClass.
pub fn gateway_class() -> Value {
    json!({"apiVersion": GW, "kind": "GatewayClass",
           "metadata": {"name": "switchyard", "generation": 1},
           "spec": {"controllerName": "switchyard.io/gateway-controller"}})
}

/// Another controller's GatewayClass and Gateway.
pub fn foreign_gateway() -> Vec<Value> {
    vec![
        json!({"apiVersion": GW, "kind": "GatewayClass",
               "metadata": {"name": "other", "generation": 1},
               "spec": {"controllerName": "example.com/other"}}),
        json!({"apiVersion": GW, "kind": "Gateway",
               "metadata": {"name": "other", "namespace": "shop", "generation": 1},
               "spec": {"gatewayClassName": "other",
                        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
    ]
}

/// Gateway `shop/gw` of our class.
pub fn gateway() -> Value {
    json!({"apiVersion": GW, "kind": "Gateway",
           "metadata": {"name": "gw", "namespace": "shop", "generation": 2},
           "spec": {"gatewayClassName": "switchyard",
                    "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})
}

/// Namespace `shop`.
pub fn namespace() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": "shop", "labels": {"kubernetes.io/metadata.name": "shop"}}})
}

/// HTTPRoute `shop/app` to `backend` port 80, on our Gateway and another
/// controller's.
pub fn route(backend: &str, generation: i64) -> Value {
    json!({"apiVersion": GW, "kind": "HTTPRoute",
           "metadata": {"name": "app", "namespace": "shop", "generation": generation},
           "spec": {"parentRefs": [{"name": "gw"}, {"name": "other"}],
                    "rules": [{"backendRefs": [{"name": backend, "port": 80}]}]}})
}

/// Service `shop/<name>` port 80 to 8080.
pub fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": "shop"},
           "spec": {"ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}})
}

/// EndpointSlice `shop/<name>` of Service `service`: one endpoint.
pub fn slice(name: &str, service: &str, address: &str, zone: &str, ready: bool) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": name, "namespace": "shop",
                        "labels": {"kubernetes.io/service-name": service}},
           "addressType": "IPv4",
           "ports": [{"port": 8080, "protocol": "TCP"}],
           "endpoints": [{"addresses": [address], "zone": zone,
                          "conditions": {"ready": ready}}]})
}

/// Everything a served route needs, with `blue` as its backend.
pub fn cluster() -> Vec<Value> {
    let mut all = vec![
        namespace(),
        gateway_class(),
        gateway(),
        route("blue", 1),
        service("blue"),
        slice("blue-a1", "blue", "10.0.0.1", "zone-a", true),
        service("unrelated"),
        slice("unrelated-x", "unrelated", "10.9.9.9", "zone-a", true),
    ];
    all.extend(foreign_gateway());
    all
}
