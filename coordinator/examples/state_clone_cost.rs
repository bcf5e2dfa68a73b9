//! What publishing the replicated state costs per apply batch, at a given
//! store size: a clone of the state (persistent maps, shared structure)
//! next to the deep copy publishing used to make, and what one single-route
//! update writes to sled.
//!
//!     cargo run -p switchyard-coordinator --example state_clone_cost [ROUTES]
//!
//! ROUTES (default 10000) routes, each with its Service and one-endpoint
//! EndpointSlice: 3 × ROUTES objects. Prints one table; timings are of this
//! machine and this build profile.

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, EntryPayload};
use std::collections::BTreeMap;
use std::time::Instant;
use switchyard_coordinator::raft::open;
use switchyard_coordinator::raft::types::{Entry, LogId};
use switchyard_coordinator::state::{Command, ReplicatedState};
use switchyard_proto::model::*;

fn route(i: usize, path: &str) -> Resource {
    Resource::HttpRoute(HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("default", format!("r{i}")),
        parent_refs: vec![],
        hostnames: vec![format!("r{i}.example.com")],
        rules: vec![RouteRule {
            matches: vec![RouteMatch {
                path: Some(PathMatch::PathPrefix(path.into())),
                ..Default::default()
            }],
            backend_refs: vec![BackendRef::service(format!("s{i}"), 80)],
            ..Default::default()
        }],
    })
}

fn objects(i: usize) -> [Resource; 3] {
    let mut slice_meta = ObjectMeta::named("default", format!("s{i}-1"));
    slice_meta
        .labels
        .insert(SERVICE_NAME_LABEL.into(), format!("s{i}"));
    [
        route(i, "/"),
        Resource::Service(Service {
            meta: ObjectMeta::named("default", format!("s{i}")),
            ports: vec![ServicePort {
                name: None,
                port: 80,
                target_port: Some(8080),
                app_protocol: None,
            }],
        }),
        Resource::EndpointSlice(EndpointSlice {
            meta: slice_meta,
            address_type: "IPv4".into(),
            ports: vec![EndpointPort {
                name: None,
                port: 8080,
            }],
            endpoints: vec![Endpoint {
                addresses: vec![format!("10.0.{}.{}", i / 250, i % 250)],
                ready: true,
                serving: true,
                terminating: false,
                zone: None,
            }],
            cluster: None,
        }),
    ]
}

fn entry(index: u64, resources: Vec<Resource>) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(std::sync::Arc::new(Command::Apply {
            resources,
            defaults: CutoverSettings::default(),
            limits: None,
            validation: Some(1),
        })),
    }
}

/// Mean time of `f` over `runs` runs, in microseconds.
fn mean_us(runs: u32, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..runs {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(runs)
}

fn main() -> anyhow::Result<()> {
    let routes: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(10_000);
    let dir = tempfile::tempdir()?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let mut stores = open(dir.path())?;
        let mut index = 1;
        let all: Vec<Resource> = (0..routes).flat_map(objects).collect();
        for chunk in all.chunks(999) {
            stores.state.apply([entry(index, chunk.to_vec())]).await?;
            index += 1;
        }
        let state = ReplicatedState::clone(&stores.state.subscribe().borrow());
        let objects = state.resources.len() + state.routes.len();
        let shared = mean_us(100, || drop(std::hint::black_box(state.clone())));
        let deep = mean_us(5, || {
            let copy: (BTreeMap<_, _>, BTreeMap<_, _>, _) = (
                state.resources.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                state.routes.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                state.endpoint_generations.to_snapshot(),
            );
            drop(std::hint::black_box(copy));
        });
        let generations = mean_us(20, || {
            drop(std::hint::black_box(state.endpoint_generations.to_snapshot()))
        });
        let started = Instant::now();
        stores.state.apply([entry(index, vec![route(7, "/v2")])]).await?;
        let update = started.elapsed().as_secs_f64() * 1e6;
        let written = stores.state.written().last;
        println!("| routes | objects | clone of the state | deep copy (before) | of which endpoint generations | one route update: apply+write | keys written | bytes written |");
        println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
        println!(
            "| {routes} | {objects} | {shared:.1} µs | {deep:.0} µs | {generations:.0} µs | {update:.0} µs | {} | {} |",
            written.keys, written.bytes
        );
        Ok(())
    })
}
