//! BackendTLSPolicy objects for the live tests: a ConfigMap holding a CA
//! (generated with rcgen by `listener_tls::TestCa`), policies on `shop`'s
//! Services, and reading our `status.ancestors` entries back.

use serde_json::{Value, json};
use switchyard_proto::model::CONTROLLER_NAME;
use switchyard_test_support::fixtures::{GW, shop, with_generation};
use switchyard_test_support::listener_tls::TestCa;

/// ConfigMap `shop/<name>` with `ca.crt` a freshly generated CA
/// certificate.
pub fn ca_config_map(name: &str) -> Value {
    let ca = TestCa::new("backend-ca");
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "shop"},
           "data": {"ca.crt": ca.cert_pem}})
}

/// BackendTLSPolicy `shop/<name>` (generation 4, created at `created`)
/// on every port of Service `service`, trusting ConfigMap `ca`.
pub fn policy(name: &str, service: &str, ca: &str, created: &str) -> Value {
    with_generation(
        json!({"apiVersion": GW, "kind": "BackendTLSPolicy",
               "metadata": {"name": name, "namespace": "shop", "creationTimestamp": created},
               "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": service}],
                        "validation": {
                            "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca}],
                            "hostname": format!("{service}.shop.svc")}}}),
        4,
    )
}

/// shop's cluster (route `app` to `blue` on our Gateway `gw` and another
/// controller's `other`) plus `more`.
pub fn shop_with(more: Vec<Value>) -> Vec<Value> {
    let mut objects = shop::cluster();
    objects.extend(more);
    objects
}

/// Our entries of a stored policy's `status.ancestors`.
pub fn our_ancestors(policy: &Value) -> Vec<Value> {
    policy["status"]["ancestors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["controllerName"] == CONTROLLER_NAME)
        .cloned()
        .collect()
}

/// `(status, reason, observedGeneration)` of condition `type_` of an
/// ancestor entry.
pub fn condition(entry: &Value, type_: &str) -> (String, String, i64) {
    let c = entry["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} in {entry}"));
    (
        c["status"].as_str().unwrap_or_default().to_string(),
        c["reason"].as_str().unwrap_or_default().to_string(),
        c["observedGeneration"].as_i64().unwrap_or(-1),
    )
}
