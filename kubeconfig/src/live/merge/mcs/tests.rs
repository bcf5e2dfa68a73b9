use super::super::tests::{read, slices};
use super::super::{ClusterObjects, merge_clusters};
use super::*;
use crate::parse_documents;
use serde_json::{Value, json};
use switchyard_proto::model::{CONTROLLER_NAME, ObjectMeta, validate_resource};
use switchyard_test_support::fixtures::{self, endpoint, listener};

/// Our class, a Gateway and a route to the ServiceImport `shop/blue`.
fn config() -> Vec<Value> {
    vec![
        fixtures::gateway_class("ours", CONTROLLER_NAME),
        fixtures::gateway("shop", "gw", "ours", json!([listener("http", 80, "HTTP")])),
        fixtures::route(
            "shop",
            "app",
            json!({"parentRefs": [{"name": "gw"}],
                   "rules": [{"backendRefs": [{"group": "multicluster.x-k8s.io",
                                               "kind": "ServiceImport",
                                               "name": "blue", "port": 80}]}]}),
        ),
    ]
}

/// Service `shop/blue` with one port of `name`, and one slice `slice`
/// with one endpoint at `address`, on 8080 under that port name.
fn backend(slice: &str, port_name: Option<&str>, address: &str) -> Vec<Value> {
    let mut port = json!({"port": 80, "targetPort": 8080});
    let mut slice_port = json!({"port": 8080});
    if let Some(name) = port_name {
        port["name"] = json!(name);
        slice_port["name"] = json!(name);
    }
    vec![
        fixtures::service("shop", "blue", json!([port])),
        fixtures::slice(
            "shop",
            slice,
            "blue",
            json!([slice_port]),
            json!([endpoint(address, None, None)]),
        ),
    ]
}

fn cluster(name: &str, objects: Vec<Value>, exported_at: Option<i64>) -> ClusterObjects {
    let mut c = read(
        name,
        parse_documents(name, &fixtures::yaml(&objects)).unwrap(),
    );
    if let Some(ms) = exported_at {
        c.exports = vec![ObjectMeta {
            creation_timestamp_ms: Some(ms),
            ..ObjectMeta::named("shop", "blue")
        }];
    }
    c
}

fn import(merged: &super::super::Merged) -> Option<&Service> {
    merged.resources.iter().find_map(|r| match r {
        Resource::Service(s) if s.meta.name == "blue.clusterset" => Some(s),
        _ => None,
    })
}

#[test]
fn exports_of_two_clusters_form_one_service_import_a_route_can_use() {
    let mut east = config();
    east.extend(backend("blue-1", Some("http"), "10.0.0.1"));
    let merged = merge_clusters(
        &[
            cluster("east", east, Some(2_000)),
            cluster(
                "west",
                backend("blue-1", Some("http"), "10.1.0.1"),
                Some(1_000),
            ),
        ],
        CONTROLLER_NAME,
    );
    assert!(merged.conflicts.is_empty(), "{:?}", merged.conflicts);
    let import = import(&merged).expect("the import is served");
    assert_eq!(import.ports[0].name.as_deref(), Some("http"));
    assert_eq!(
        import.meta.origin.as_deref(),
        Some("west"),
        "the oldest export"
    );
    assert_eq!(
        slices(&merged),
        [
            ("blue-1.east.clusterset", "east", "10.0.0.1"),
            ("blue-1.west.clusterset", "west", "10.1.0.1"),
        ],
        "the import's slices; the Service itself is not referenced"
    );
    assert_eq!(merged.contributed["west"], ["shop/blue.clusterset"]);
    for r in &merged.resources {
        validate_resource(r).unwrap();
    }
}

#[test]
fn a_conflicting_export_is_left_out_and_the_oldest_wins() {
    let mut east = config();
    east.extend(backend("blue-1", Some("http"), "10.0.0.1"));
    let merged = merge_clusters(
        &[
            // East exported later, with port 80 named "http"; west's
            // older export leaves it unnamed: east is left out whole.
            cluster("east", east, Some(5_000)),
            cluster("west", backend("blue-1", None, "10.1.0.1"), Some(1_000)),
            // South exports without a Service.
            cluster("south", vec![], Some(500)),
        ],
        CONTROLLER_NAME,
    );
    assert_eq!(
        slices(&merged),
        [("blue-1.west.clusterset", "west", "10.1.0.1")]
    );
    let reasons: Vec<(&str, &str)> = merged
        .conflicts
        .iter()
        .map(|c| (c.cluster.as_str(), c.reason))
        .collect();
    assert_eq!(reasons, [("south", "NoService"), ("east", "PortConflict")]);
    let message = &merged.conflicts[1].message;
    assert!(
        message.contains("port 80") && message.contains("west"),
        "{message}"
    );
    assert_eq!(import(&merged).unwrap().ports[0].name, None);
}

#[test]
fn without_exports_there_is_no_import_and_the_ref_resolves_nowhere() {
    let mut east = config();
    east.extend(backend("blue-1", Some("http"), "10.0.0.1"));
    let merged = merge_clusters(&[cluster("east", east, None)], CONTROLLER_NAME);
    assert!(import(&merged).is_none());
    assert!(slices(&merged).is_empty(), "east's Service is not exported");
}

#[test]
fn ports_clash_by_number_or_by_name() {
    let port = |name: Option<&str>, port: u16| ServicePort {
        name: name.map(Into::into),
        port,
        target_port: None,
        app_protocol: None,
    };
    let ours = [port(Some("http"), 80)];
    assert_eq!(
        clash(&ours, &[port(Some("http"), 80), port(Some("m"), 9090)]),
        None
    );
    assert!(clash(&ours, &[port(Some("web"), 80)]).is_some());
    assert!(clash(&ours, &[port(Some("http"), 8080)]).is_some());
    assert!(clash(&ours, &[port(None, 80)]).is_some());
}
