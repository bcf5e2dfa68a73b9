//! How installing a configuration scales with the number of routes, on the
//! real data plane (`DataPlane::install`: route table, backend sync, swap).
//!
//! Builds a snapshot of N HTTPRoutes, each with its own host, Service and
//! one-endpoint EndpointSlice, installs it, then installs three follow-ups
//! and prints how long each took and how many routes it compiled:
//! one route's backend changed, one Service's endpoints moved, nothing
//! changed. For comparison it also times a fresh compile of the whole
//! table (what every install did before routes were reused), and prints
//! the process's resident memory.
//!
//! Run: `cargo run --release -p switchyard-proxy --example install_scale -- 10000`

use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Instant;
use switchyard_proto::model::*;
use switchyard_proxy::router::RouteTable;

use switchyard_proxy::{DataPlane, DataPlaneSettings, ServingConfig};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let _entered = runtime.enter();
    let mut registry = Registry::default();
    let plane = DataPlane::new(DataPlaneSettings::default(), &mut registry);

    let (mut snapshot, mut routes) = world(n);
    println!("| step ({n} routes) | seconds | routes compiled | routes reused |");
    println!("| --- | --- | --- | --- |");
    let mut seen = (0, 0);
    let mut step = |what: &str, snapshot: &ConfigSnapshot, routes: &[HttpRoute]| {
        let config = ServingConfig {
            snapshot: Arc::new(snapshot.clone()),
            routes: routes.to_vec(),
        };
        let started = Instant::now();
        plane.install(config);
        let seconds = started.elapsed().as_secs_f64();
        let now = (
            counter(&registry, "switchyard_proxy_routes_compiled_total"),
            counter(&registry, "switchyard_proxy_routes_reused_total"),
        );
        println!(
            "| {what} | {seconds:.4} | {} | {} |",
            now.0 - seen.0,
            now.1 - seen.1
        );
        seen = now;
    };
    step("first install", &snapshot, &routes);

    routes[n / 2].rules[0].backend_refs = vec![BackendRef::service("s0", 80)];
    snapshot.version += 1;
    step("one route's backend changed", &snapshot, &routes);

    let slice = &mut snapshot.endpoint_slices[n / 3];
    slice.endpoints[0].addresses = vec!["127.0.0.2".into()];
    let service = ObjectName::new("bench", format!("s{}", n / 3));
    snapshot.endpoint_generations.bump(service, 1_000_000);
    snapshot.version += 1;
    step("one Service's endpoints moved", &snapshot, &routes);

    snapshot.version += 1;
    step("nothing changed (version only)", &snapshot, &routes);

    let snapshot = Arc::new(snapshot);
    let started = Instant::now();
    let fresh = RouteTable::compile_after(None, &snapshot, &routes);
    let fresh_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let reused = RouteTable::compile_after(Some(&fresh), &snapshot, &routes);
    let reused_seconds = started.elapsed().as_secs_f64();
    println!();
    println!("| route table alone | seconds | compiled | reused |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| fresh compile of every route | {fresh_seconds:.4} | {} | {} |",
        fresh.compile_stats().compiled,
        fresh.compile_stats().reused
    );
    println!(
        "| compile_after, nothing changed | {reused_seconds:.4} | {} | {} |",
        reused.compile_stats().compiled,
        reused.compile_stats().reused
    );
    println!();
    println!("resident memory: {}", rss());
}

/// N routes on `bench/gw:80`, each with its own host, Service and slice.
fn world(n: usize) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let mut snapshot = ConfigSnapshot {
        version: 1,
        gateway_classes: vec![GatewayClass {
            meta: ObjectMeta::named("", "switchyard"),
            controller_name: CONTROLLER_NAME.into(),
        }],
        gateways: vec![Gateway {
            meta: ObjectMeta::named("bench", "gw"),
            gateway_class_name: "switchyard".into(),
            listeners: vec![Listener {
                name: "http".into(),
                port: 80,
                protocol: ListenerProtocol::Http,
                hostname: None,
                allowed_routes: AllowedRoutes::default(),
                tls: None,
            }],
        }],
        ..Default::default()
    };
    let mut routes = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("s{i}");
        snapshot.services.push(Service {
            meta: ObjectMeta::named("bench", &name),
            ports: vec![ServicePort {
                name: None,
                port: 80,
                target_port: Some(9),
                app_protocol: None,
            }],
        });
        // As a coordinator's state has it: every Service changed once.
        snapshot
            .endpoint_generations
            .bump(ObjectName::new("bench", &name), i as u64 + 1);
        let mut meta = ObjectMeta::named("bench", format!("{name}-1"));
        meta.labels.insert(SERVICE_NAME_LABEL.into(), name.clone());
        snapshot.endpoint_slices.push(EndpointSlice {
            meta,
            address_type: "IPv4".into(),
            ports: Vec::new(),
            endpoints: vec![Endpoint {
                addresses: vec!["127.0.0.1".into()],
                ready: true,
                serving: true,
                terminating: false,
                zone: None,
            }],
            cluster: None,
        });
        routes.push(HttpRoute {
            kind: Default::default(),
            meta: ObjectMeta::named("bench", format!("r{i}")),
            parent_refs: vec![ParentRef {
                group: "gateway.networking.k8s.io".into(),
                kind: "Gateway".into(),
                namespace: None,
                name: "gw".into(),
                section_name: None,
                port: None,
            }],
            hostnames: vec![format!("h{i}.example.com")],
            rules: vec![RouteRule {
                matches: Vec::new(),
                backend_refs: vec![BackendRef::service(name, 80)],
                ..Default::default()
            }],
        });
    }
    (snapshot, routes)
}

/// A counter's value from the registry's text exposition.
fn counter(registry: &Registry, name: &str) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("metrics encode");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

fn rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(|l| l.trim_start_matches("VmRSS:").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}
