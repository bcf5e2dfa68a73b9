//! Fuzz target: one request, decoded from the input, routed through a
//! table compiled from every Gateway, HTTPRoute and ReferenceGrant of the
//! Gateway API conformance files (`tests/data/gateway-api` of
//! the repository). Property, as in `proxy/tests/prop_router.rs`: no
//! panic; forwards go to `backends()` (mirrors too); direct answers are
//! 3xx/4xx/5xx.
//!
//! Input layout: 8 bytes of the random number, 1 byte choosing the
//! listener key, then lines: method, URI, Host (empty line: none), and
//! `name:value` headers. Requests `http` refuses are skipped.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::LazyLock;
use switchyard_proto::model::*;
use switchyard_proxy::router::{Decision, ListenerKey, RouteTable};

struct World {
    table: RouteTable,
    backends: BTreeSet<BackendKey>,
    keys: Vec<ListenerKey>,
}

static WORLD: LazyLock<World> = LazyLock::new(|| {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/gateway-api");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("conformance data beside the repository")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut snapshot = ConfigSnapshot::default();
    let mut routes = BTreeMap::new();
    let mut gateways = BTreeMap::new();
    let mut services: BTreeMap<(String, String), BTreeSet<u16>> = BTreeMap::new();
    for path in &files {
        let data: Value =
            yaml_serde::from_str(&std::fs::read_to_string(path).expect("readable")).expect("YAML");
        let mut index = 0;
        for list in ["gateways", "routes", "reference_grants"] {
            for object in data[list].as_array().into_iter().flatten() {
                let source = path.display().to_string();
                let r = switchyard_kubeconfig::parse_object(&source, index, object.clone())
                    .expect("conformance objects parse");
                index += 1;
                let name = r.meta().object_name();
                match r {
                    Resource::Gateway(g) => {
                        gateways.entry(name).or_insert(g);
                    }
                    Resource::HttpRoute(r) => {
                        routes.entry(name).or_insert(r);
                    }
                    Resource::ReferenceGrant(g) => snapshot.reference_grants.push(g),
                    _ => {}
                }
            }
        }
        for b in data["backends"].as_array().into_iter().flatten() {
            if let Some(key) = b["service"].as_str().and_then(BackendKey::parse) {
                services
                    .entry((key.service.namespace, key.service.name))
                    .or_default()
                    .insert(key.port);
            }
        }
    }
    let gateways: Vec<Gateway> = gateways.into_values().collect();
    let classes: BTreeSet<String> = gateways
        .iter()
        .map(|g| g.gateway_class_name.clone())
        .collect();
    snapshot.gateway_classes = classes
        .into_iter()
        .map(|c| GatewayClass {
            meta: ObjectMeta::named("", c),
            controller_name: CONTROLLER_NAME.into(),
        })
        .collect();
    let mut keys = BTreeSet::new();
    for g in &gateways {
        for l in &g.listeners {
            keys.insert(ListenerKey {
                gateway: Some(g.meta.object_name()),
                port: l.port,
            });
            keys.insert(ListenerKey {
                gateway: None,
                port: l.port,
            });
        }
    }
    snapshot.gateways = gateways;
    snapshot.services = services
        .into_iter()
        .map(|((ns, name), ports)| Service {
            meta: ObjectMeta::named(ns, name),
            ports: ports
                .into_iter()
                .map(|port| ServicePort {
                    name: None,
                    port,
                    target_port: None,
                    app_protocol: None,
                })
                .collect(),
        })
        .collect();
    let routes: Vec<HttpRoute> = routes.into_values().collect();
    let table = RouteTable::compile(&snapshot, &routes);
    World {
        backends: table.backends(),
        table,
        keys: keys.into_iter().collect(),
    }
});

fuzz_target!(|data: &[u8]| {
    let world = &*WORLD;
    if data.len() < 9 {
        return;
    }
    let random = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    let key = &world.keys[usize::from(data[8]) % world.keys.len()];
    let mut lines = data[9..].split(|&b| b == b'\n');
    let method = lines.next().unwrap_or_default();
    let uri = lines.next().unwrap_or_default();
    let host = lines.next().unwrap_or_default();
    let mut builder = http::Request::builder().method(method).uri(uri);
    if !host.is_empty() {
        builder = builder.header(http::header::HOST, host);
    }
    for line in lines {
        if let Some(colon) = line.iter().position(|&b| b == b':') {
            builder = builder.header(&line[..colon], &line[colon + 1..]);
        }
    }
    let Ok(request) = builder.body(()) else {
        return;
    };
    let parts = request.into_parts().0;
    match world.table.route(key, &parts, random) {
        Decision::Forward(plan) => {
            assert!(world.backends.contains(&plan.backend), "{}", plan.backend);
            for m in &plan.mirrors {
                assert!(world.backends.contains(m), "mirror {m}");
            }
            let mut headers = parts.headers.clone();
            plan.request_headers.apply(&mut headers);
        }
        Decision::Respond(r) => {
            assert!(
                (300..600).contains(&r.status.as_u16()),
                "{} {}",
                r.status,
                r.reason
            );
        }
    }
});
