//! Multi-Cluster Services objects for the live tests: a `ServiceExport`
//! and a route to the clusterset `ServiceImport`.

use serde_json::{Value, json};
use switchyard_test_support::fixtures;

/// A `ServiceExport` of `shop/<name>`, created at `created` (RFC 3339).
pub fn export(name: &str, created: &str) -> Value {
    json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceExport",
           "metadata": {"name": name, "namespace": "shop", "creationTimestamp": created},
           "spec": {}})
}

/// HTTPRoute `shop/app` on `shop/gw`, to the clusterset import of `blue`
/// port 80 (GEP-1748).
pub fn route_to_import() -> Value {
    fixtures::with_generation(
        fixtures::route(
            "shop",
            "app",
            json!({"parentRefs": [{"name": "gw"}],
                   "rules": [{"backendRefs": [{"group": "multicluster.x-k8s.io",
                                               "kind": "ServiceImport",
                                               "name": "blue", "port": 80}]}]}),
        ),
        1,
    )
}

/// The `shop` cluster of the fixtures with its route sent to the import
/// and `blue` exported at `created`.
pub fn exporting_shop(created: &str) -> Vec<Value> {
    let mut objects = fixtures::shop::cluster();
    objects.retain(|o| o["kind"] != "HTTPRoute");
    objects.push(route_to_import());
    objects.push(export("blue", created));
    objects
}
