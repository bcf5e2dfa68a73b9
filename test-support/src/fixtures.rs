//! Kubernetes objects for tests, as an API server holds them
//! (`serde_json::Value`): what the fake API server serves
//! ([`crate::fake_kube`]) and, rendered by [`yaml`], what the YAML parser
//! reads in the kubeconfig crate's unit tests.
//!
//! Owns: one builder per kind (the fields switchyard reads, nothing
//! more) and [`shop`], the one small cluster the live-sync tests share: a
//! namespace, our GatewayClass and Gateway, a route to Service `blue`
//! with one ready endpoint, another controller's Gateway, and a Service
//! with a slice that no route uses.
//!
//! Does not own: the model values of the property tests
//! ([`crate::strategies`]), or a test's one-off objects (written where
//! the test reads them).

use serde_json::{Value, json};

/// Gateway API group/version of Gateways, GatewayClasses and HTTPRoutes.
pub const GW: &str = "gateway.networking.k8s.io/v1";

/// Gateway API group/version of ReferenceGrants.
pub const GW_BETA: &str = "gateway.networking.k8s.io/v1beta1";

/// The controller of the GatewayClasses that are not ours.
pub const OTHER_CONTROLLER: &str = "example.com/other";

/// `objects` as one YAML stream, one document each (JSON is YAML), for
/// tests of the parser or anything that reads files.
pub fn yaml(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| format!("{o}\n"))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// `object` with `metadata.generation` set, as the API server counts spec
/// changes.
pub fn with_generation(mut object: Value, generation: i64) -> Value {
    object["metadata"]["generation"] = json!(generation);
    object
}

/// `object` with `metadata.labels` set.
pub fn with_labels(mut object: Value, labels: Value) -> Value {
    object["metadata"]["labels"] = labels;
    object
}

/// A cluster-scoped Namespace.
pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// A GatewayClass naming `controller`.
pub fn gateway_class(name: &str, controller: &str) -> Value {
    json!({"apiVersion": GW, "kind": "GatewayClass",
           "metadata": {"name": name},
           "spec": {"controllerName": controller}})
}

/// A Gateway of `class` with `listeners` (see [`listener`]).
pub fn gateway(namespace: &str, name: &str, class: &str, listeners: Value) -> Value {
    json!({"apiVersion": GW, "kind": "Gateway",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"gatewayClassName": class, "listeners": listeners}})
}

/// A listener without hostname or allowedRoutes.
pub fn listener(name: &str, port: u16, protocol: &str) -> Value {
    json!({"name": name, "port": port, "protocol": protocol})
}

/// An HTTPRoute with `spec` as given.
pub fn route(namespace: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": GW, "kind": "HTTPRoute",
           "metadata": {"name": name, "namespace": namespace},
           "spec": spec})
}

/// A ReferenceGrant letting HTTPRoutes of `from_namespace` refer to `to`
/// (a list of `{group, kind[, name]}`).
pub fn reference_grant(namespace: &str, name: &str, from_namespace: &str, to: Value) -> Value {
    json!({"apiVersion": GW_BETA, "kind": "ReferenceGrant",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                              "namespace": from_namespace}],
                    "to": to}})
}

/// A Service with `ports` (a list of `{port[, targetPort, protocol]}`).
pub fn service(namespace: &str, name: &str, ports: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"ports": ports}})
}

/// An IPv4 EndpointSlice of Service `service` with `ports` and
/// `endpoints` (see [`endpoint`]).
pub fn slice(namespace: &str, name: &str, service: &str, ports: Value, endpoints: Value) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": name, "namespace": namespace,
                        "labels": {"kubernetes.io/service-name": service}},
           "addressType": "IPv4",
           "ports": ports,
           "endpoints": endpoints})
}

/// One endpoint of a slice: its address, and its zone and `ready`
/// condition when given (Kubernetes reads a missing `ready` as ready).
pub fn endpoint(address: &str, zone: Option<&str>, ready: Option<bool>) -> Value {
    let mut endpoint = json!({"addresses": [address]});
    if let Some(zone) = zone {
        endpoint["zone"] = json!(zone);
    }
    if let Some(ready) = ready {
        endpoint["conditions"] = json!({"ready": ready});
    }
    endpoint
}

/// The small cluster of the live-sync tests, all in namespace `shop`.
pub mod shop {
    use super::*;
    use switchyard_proto::model::CONTROLLER_NAME;

    pub use super::GW;

    /// Our GatewayClass, `switchyard`.
    pub fn gateway_class() -> Value {
        with_generation(super::gateway_class("switchyard", CONTROLLER_NAME), 1)
    }

    /// Another controller's GatewayClass and Gateway (`shop/other`).
    pub fn foreign_gateway() -> Vec<Value> {
        vec![
            with_generation(super::gateway_class("other", OTHER_CONTROLLER), 1),
            with_generation(
                super::gateway(
                    "shop",
                    "other",
                    "other",
                    json!([listener("http", 80, "HTTP")]),
                ),
                1,
            ),
        ]
    }

    /// Gateway `shop/gw` of our class.
    pub fn gateway() -> Value {
        with_generation(
            super::gateway(
                "shop",
                "gw",
                "switchyard",
                json!([listener("http", 80, "HTTP")]),
            ),
            2,
        )
    }

    /// Namespace `shop`.
    pub fn namespace() -> Value {
        with_labels(
            super::namespace("shop"),
            json!({"kubernetes.io/metadata.name": "shop"}),
        )
    }

    /// HTTPRoute `shop/app` to `backend` port 80, on our Gateway and
    /// another controller's.
    pub fn route(backend: &str, generation: i64) -> Value {
        with_generation(
            super::route(
                "shop",
                "app",
                json!({"parentRefs": [{"name": "gw"}, {"name": "other"}],
                       "rules": [{"backendRefs": [{"name": backend, "port": 80}]}]}),
            ),
            generation,
        )
    }

    /// Service `shop/<name>` port 80 to 8080.
    pub fn service(name: &str) -> Value {
        super::service(
            "shop",
            name,
            json!([{"port": 80, "targetPort": 8080, "protocol": "TCP"}]),
        )
    }

    /// EndpointSlice `shop/<name>` of Service `service`: one endpoint on
    /// port 8080.
    pub fn slice(name: &str, service: &str, address: &str, zone: &str, ready: bool) -> Value {
        super::slice(
            "shop",
            name,
            service,
            json!([{"port": 8080, "protocol": "TCP"}]),
            json!([endpoint(address, Some(zone), Some(ready))]),
        )
    }

    /// Everything a served route needs, with `blue` as its backend, plus
    /// what the watchers must leave out: a Service and slice no route
    /// uses, another controller's Gateway.
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shop_objects_are_what_an_api_server_holds() {
        assert_eq!(
            shop::slice("blue-a1", "blue", "10.0.0.1", "zone-a", true),
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                   "metadata": {"name": "blue-a1", "namespace": "shop",
                                "labels": {"kubernetes.io/service-name": "blue"}},
                   "addressType": "IPv4",
                   "ports": [{"port": 8080, "protocol": "TCP"}],
                   "endpoints": [{"addresses": ["10.0.0.1"], "zone": "zone-a",
                                  "conditions": {"ready": true}}]})
        );
        assert_eq!(
            shop::route("blue", 3),
            json!({"apiVersion": GW, "kind": "HTTPRoute",
                   "metadata": {"name": "app", "namespace": "shop", "generation": 3},
                   "spec": {"parentRefs": [{"name": "gw"}, {"name": "other"}],
                            "rules": [{"backendRefs": [{"name": "blue", "port": 80}]}]}})
        );
    }

    #[test]
    fn yaml_is_one_document_per_object() {
        let text = yaml(&[namespace("a"), namespace("b")]);
        let docs: Vec<&str> = text.split("---\n").collect();
        assert_eq!(docs.len(), 2);
        for doc in docs {
            let back: Value = serde_json::from_str(doc).expect("each document is JSON");
            assert_eq!(back["kind"], "Namespace");
        }
    }
}
