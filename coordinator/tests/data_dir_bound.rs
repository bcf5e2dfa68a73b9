//! The data directory stays bounded: after thousands of single-route
//! updates through a real (single-member) Raft node, snapshots and log
//! purging keep the directory within a small multiple of the live state,
//! and sled reclaims the space of what was overwritten or purged.
//!
//! The live state's size is the JSON of the replicated state (what a
//! snapshot holds). The bound asserted is [`BOUND`] times that; the
//! figures are printed for the report (`--nocapture`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, ensure};
use switchyard_coordinator::raft::{Node, NodeConfig, RaftSettings};
use switchyard_coordinator::state::{Command, ReplicatedState};
use switchyard_proto::model::*;
use switchyard_test_support::eventually;

const ROUTES: usize = 1000;
const UPDATES: usize = 4000;
/// A snapshot every this many entries (production: 5000).
const SNAPSHOT_AFTER: u64 = 500;
/// The data directory may hold at most this many times the live state.
const BOUND: u64 = 10;

fn route(i: usize, version: usize) -> Resource {
    Resource::HttpRoute(HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("default", format!("r{i}")),
        parent_refs: vec![],
        hostnames: vec![format!("r{i}.example.com")],
        rules: vec![RouteRule {
            matches: vec![RouteMatch {
                path: Some(PathMatch::PathPrefix(format!("/v{version}"))),
                ..Default::default()
            }],
            backend_refs: vec![BackendRef::service(format!("s{i}"), 80)],
            ..Default::default()
        }],
    })
}

fn service(i: usize) -> Resource {
    Resource::Service(Service {
        meta: ObjectMeta::named("default", format!("s{i}")),
        ports: vec![ServicePort {
            name: None,
            port: 80,
            target_port: Some(8080),
            app_protocol: None,
        }],
    })
}

fn apply(resources: Vec<Resource>) -> Command {
    Command::Apply {
        resources,
        defaults: CutoverSettings::default(),
        limits: None,
        validation: Some(1),
    }
}

fn dir_size(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

fn dir_size_or_len(path: &Path) -> anyhow::Result<u64> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        dir_size(path)
    } else {
        Ok(meta.len())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_directory_stays_within_a_small_multiple_of_the_live_state() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let settings = RaftSettings {
        // Production's ratio of compaction to updates, scaled down: a
        // snapshot every 500 entries, 100 kept after it.
        snapshot_after_logs: SNAPSHOT_AFTER,
        keep_logs_after_snapshot: 100,
        heartbeat_interval: Duration::from_millis(50),
        election_timeout_min: Duration::from_millis(150),
        election_timeout_max: Duration::from_millis(300),
        ..RaftSettings::default()
    };
    let node = Node::start(NodeConfig {
        id: 1,
        peers: BTreeMap::from([(1, "127.0.0.1:1".to_owned())]),
        advertise_addr: "127.0.0.1:1".to_owned(),
        data_dir: dir.path().to_path_buf(),
        raft: settings,
        source_ip: None,
        security: switchyard_tls::Security::Insecure,
    })
    .await?;
    eventually(
        "node 1 leads",
        Duration::from_secs(30),
        async || match node.leader() {
            Some((1, _)) => Ok(()),
            other => Err(format!("leader {other:?}")),
        },
    )
    .await?;
    let all: Vec<Resource> = (0..ROUTES)
        .flat_map(|i| [route(i, 0), service(i)])
        .collect();
    for chunk in all.chunks(500) {
        ensure!(node.propose(apply(chunk.to_vec())).await?.0.is_ok());
    }
    for update in 1..=UPDATES {
        let response = node
            .propose(apply(vec![route(update % ROUTES, update)]))
            .await?;
        ensure!(response.0.is_ok(), "update {update}: {response:?}");
    }
    let state: ReplicatedState = ReplicatedState::clone(&node.state().borrow());
    ensure!(state.routes.len() == ROUTES);
    let live = serde_json::to_vec(&state)?.len() as u64;
    // Snapshots are built in the background: wait until the policy has
    // caught up with what was applied.
    let metrics = node.metrics();
    eventually(
        "a snapshot within one interval of the log",
        Duration::from_secs(30),
        async || {
            let m = metrics.borrow().clone();
            let applied = m.last_applied.map_or(0, |l| l.index);
            let snapshot = m.snapshot.map_or(0, |l| l.index);
            if snapshot + SNAPSHOT_AFTER > applied && m.purged.is_some() {
                Ok(())
            } else {
                Err(format!(
                    "applied {applied}, snapshot {snapshot}, purged {:?}",
                    m.purged
                ))
            }
        },
    )
    .await?;
    let snapshot = metrics.borrow().snapshot;
    let purged = metrics.borrow().purged;
    node.shutdown().await;
    let size = dir_size(dir.path())?;
    for entry in std::fs::read_dir(dir.path())? {
        let entry = entry?;
        println!(
            "  {:?} {} bytes",
            entry.file_name(),
            dir_size_or_len(&entry.path())?
        );
    }
    println!(
        "{UPDATES} single-route updates over {ROUTES} routes: data directory {size} bytes, \
         live state {live} bytes ({:.1}x); snapshot at {snapshot:?}, log purged to {purged:?}",
        size as f64 / live as f64
    );
    ensure!(
        size < BOUND * live,
        "data directory {size} bytes is over {BOUND}x the live state ({live} bytes)"
    );
    Ok(())
}
