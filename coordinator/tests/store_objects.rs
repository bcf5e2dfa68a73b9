//! The state machine on sled is kept one key per object, and its write cost
//! follows the change: an apply writes the keys it touched (counted by
//! [`StateStore::written`]), whatever else the store holds; reopening gives
//! exactly the state in memory; a data directory of the old layout (the
//! whole state as one JSON value) opens and is migrated; a snapshot built
//! on one store installs on another, replacing what it held.
//!
//! [`StateStore::written`]: switchyard_coordinator::raft::StateStore::written

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, EntryPayload, RaftSnapshotBuilder};
use std::time::Duration;
use switchyard_coordinator::raft::types::{Entry, LogId, SnapshotMeta};
use switchyard_coordinator::raft::{StateStore, Stores, open};
use switchyard_coordinator::state::{Command, LogPosition, ReplicatedState};
use switchyard_proto::model::*;
use switchyard_test_support::eventually_blocking;
use tokio::io::AsyncReadExt;

const TERM: u64 = 1;

fn entry(index: u64, command: Command) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(TERM, 1), index),
        payload: EntryPayload::Normal(std::sync::Arc::new(command)),
    }
}

fn route(name: &str, backend: &str, path: &str) -> Resource {
    Resource::HttpRoute(HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("default", name),
        parent_refs: vec![],
        hostnames: vec![],
        rules: vec![RouteRule {
            matches: vec![RouteMatch {
                path: Some(PathMatch::PathPrefix(path.into())),
                ..Default::default()
            }],
            backend_refs: vec![BackendRef::service(backend, 80)],
            ..Default::default()
        }],
    })
}

fn service(name: &str, port: u16) -> Resource {
    Resource::Service(Service {
        meta: ObjectMeta::named("default", name),
        ports: vec![ServicePort {
            name: None,
            port,
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

/// `n` routes, each with its own Service.
fn fleet(n: usize) -> Vec<Resource> {
    (0..n)
        .flat_map(|i| {
            [
                route(&format!("r{i}"), &format!("s{i}"), "/"),
                service(&format!("s{i}"), 80),
            ]
        })
        .collect()
}

/// Drops the stores and waits until sled has released the directory (its
/// drop finishes on another thread), so it can be opened again.
fn close(stores: Stores) -> anyhow::Result<()> {
    let liveness = stores.liveness.clone();
    drop(stores);
    eventually_blocking("the store closed", Duration::from_secs(10), || {
        !liveness.is_open()
    })?;
    Ok(())
}

/// Opens `dir` once sled, used directly by a test, has let go of it.
fn reopen(dir: &std::path::Path) -> anyhow::Result<Stores> {
    Ok(eventually_blocking(
        "the directory opens",
        Duration::from_secs(10),
        || open(dir),
    )?)
}

fn state_of(store: &StateStore) -> ReplicatedState {
    ReplicatedState::clone(&store.subscribe().borrow())
}

/// Applies `commands` at indexes from `first` on, one batch each; checks
/// that each was accepted.
async fn apply_all(
    store: &mut StateStore,
    first: u64,
    commands: Vec<Command>,
) -> anyhow::Result<u64> {
    let mut index = first;
    for command in commands {
        let responses = store.apply([entry(index, command)]).await?;
        for response in responses {
            anyhow::ensure!(response.0.is_ok(), "entry {index} refused: {response:?}");
        }
        index += 1;
    }
    Ok(index)
}

#[tokio::test]
async fn an_apply_writes_only_the_keys_it_touched() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut stores = open(dir.path())?;
    let state = &mut stores.state;
    let next = apply_all(state, 1, vec![apply(fleet(200))]).await?;
    // 200 routes, 200 Services, 200 endpoint generations.
    assert_eq!(state.written().last.keys, 600);

    // One route update: the route's record alone, however big the store.
    let next = apply_all(state, next, vec![apply(vec![route("r7", "s8", "/v2")])]).await?;
    let one_route = state.written().last;
    assert_eq!(one_route.keys, 1, "{one_route:?}");
    assert!(
        one_route.bytes < 2_000,
        "one route update wrote {} bytes",
        one_route.bytes
    );

    // A Service change moves its endpoint generation too: two keys.
    let next = apply_all(state, next, vec![apply(vec![service("s3", 81)])]).await?;
    assert_eq!(state.written().last.keys, 2);

    // Re-applying what is stored changes nothing and writes no object.
    let next = apply_all(state, next, vec![apply(vec![service("s3", 81)])]).await?;
    assert_eq!(state.written().last.keys, 0);

    // Proxies, deletes and decisions: their keys only.
    let register = Command::RegisterProxy {
        id: "p/1".into(),
        zone: "a".into(),
        admin_address: "127.0.0.1:1".into(),
    };
    let next = apply_all(state, next, vec![register]).await?;
    assert_eq!(state.written().last.keys, 1);
    let delete = Command::Delete {
        keys: vec![ResourceKey {
            kind: Kind::HTTPRoute,
            name: ObjectName::new("default", "r9"),
        }],
    };
    let next = apply_all(state, next, vec![delete]).await?;
    assert_eq!(state.written().last.keys, 1);
    let pending = state_of(state).routes[&ObjectName::new("default", "r7")]
        .pending
        .as_ref()
        .map(|p| p.target.generation)
        .ok_or_else(|| anyhow::anyhow!("r7 has nothing pending"))?;
    let commit = Command::CommitTransition {
        route: ObjectName::new("default", "r7"),
        generation: pending,
        forced: true,
        basis: None,
    };
    apply_all(state, next, vec![commit]).await?;
    assert_eq!(state.written().last.keys, 1);

    // What was written per key rebuilds exactly the state in memory.
    let before = state_of(&stores.state);
    close(stores)?;
    let reopened = open(dir.path())?;
    assert_eq!(state_of(&reopened.state), before);
    assert_eq!(
        reopened.state.subscribe().borrow().last_index,
        before.last_index
    );
    Ok(())
}

/// The old layout, written by hand as the previous version did: tree `sm`
/// with `applied`, `membership` and the whole state as JSON under `state`.
#[tokio::test]
async fn a_directory_of_the_old_layout_opens_and_is_migrated() -> anyhow::Result<()> {
    let mut expected = ReplicatedState::default();
    let mut index = 1;
    for command in [
        apply(fleet(20)),
        apply(vec![route("r1", "s2", "/x")]),
        Command::RegisterProxy {
            id: "p1".into(),
            zone: "a".into(),
            admin_address: "127.0.0.1:1".into(),
        },
    ] {
        assert!(
            expected
                .apply(LogPosition::new(index, TERM), &command)
                .0
                .is_ok()
        );
        index += 1;
    }
    let applied = Some(LogId::new(CommittedLeaderId::new(TERM, 1), index - 1));
    let old_snapshot = SnapshotMeta {
        last_log_id: applied,
        last_membership: Default::default(),
        snapshot_id: "1-1-3-7".into(),
    };
    let dir = tempfile::tempdir()?;
    {
        let db = sled::Config::new().path(dir.path()).open()?;
        let sm = db.open_tree("sm")?;
        sm.insert("applied", serde_json::to_vec(&applied)?)?;
        sm.insert(
            "membership",
            serde_json::to_vec(&openraft::StoredMembership::<u64, openraft::BasicNode>::default())?,
        )?;
        sm.insert("state", serde_json::to_vec(&expected)?)?;
        // And a snapshot, its data inside sled as the old layout kept it.
        sm.insert("snapshot_meta", serde_json::to_vec(&old_snapshot)?)?;
        sm.insert("snapshot_data", serde_json::to_vec(&expected)?)?;
        db.flush()?;
    }
    let mut stores = reopen(dir.path())?;
    assert_eq!(state_of(&stores.state), expected);
    assert_eq!(stores.state.applied_state().await?.0, applied);
    // Migrated: one key per object (20 routes, 20 Services, 20 endpoint
    // generations, 1 proxy).
    assert_eq!(stores.state.written().last.keys, 61);
    close(stores)?;

    // The old values are gone, and the objects alone rebuild the state.
    {
        let db = sled::Config::new().path(dir.path()).open()?;
        let sm = db.open_tree("sm")?;
        assert!(sm.get("state")?.is_none());
        assert!(sm.get("snapshot_data")?.is_none());
    }
    let mut stores = reopen(dir.path())?;
    assert_eq!(state_of(&stores.state), expected);
    assert_eq!(stores.state.written().batches, 0, "migrated twice");
    // The snapshot moved to its file, unchanged.
    let mut snapshot = stores
        .state
        .get_current_snapshot()
        .await?
        .ok_or_else(|| anyhow::anyhow!("the old snapshot was lost"))?;
    assert_eq!(snapshot.meta, old_snapshot);
    let mut data = Vec::new();
    snapshot.snapshot.read_to_end(&mut data).await?;
    assert_eq!(serde_json::from_slice::<ReplicatedState>(&data)?, expected);
    // And it goes on applying per object.
    apply_all(
        &mut stores.state,
        index,
        vec![apply(vec![service("s1", 90)])],
    )
    .await?;
    assert_eq!(stores.state.written().last.keys, 2);
    Ok(())
}

#[tokio::test]
async fn a_snapshot_installs_on_another_store_replacing_what_it_held() -> anyhow::Result<()> {
    let source_dir = tempfile::tempdir()?;
    let mut source = open(source_dir.path())?;
    apply_all(
        &mut source.state,
        1,
        vec![apply(fleet(30)), apply(vec![route("r2", "s3", "/y")])],
    )
    .await?;
    let snapshot = source
        .state
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await?;

    // The receiver holds objects of its own that the snapshot does not.
    let target_dir = tempfile::tempdir()?;
    let mut target = open(target_dir.path())?;
    apply_all(
        &mut target.state,
        1,
        vec![apply(vec![route("stale", "gone", "/")])],
    )
    .await?;
    let mut receiving = target.state.begin_receiving_snapshot().await?;
    let mut sent = snapshot.snapshot;
    let bytes = tokio::io::copy(&mut *sent, &mut *receiving).await?;
    assert!(bytes > 0);
    target
        .state
        .install_snapshot(&snapshot.meta, receiving)
        .await?;

    let expected = state_of(&source.state);
    assert_eq!(state_of(&target.state), expected);
    assert_eq!(
        target.state.applied_state().await?.0,
        snapshot.meta.last_log_id
    );
    close(target)?;
    let mut target = open(target_dir.path())?;
    assert_eq!(state_of(&target.state), expected, "stale objects survived");
    let mut current = target
        .state
        .get_current_snapshot()
        .await?
        .ok_or_else(|| anyhow::anyhow!("no current snapshot after an install"))?;
    assert_eq!(current.meta, snapshot.meta);
    let mut data = Vec::new();
    current.snapshot.read_to_end(&mut data).await?;
    assert_eq!(serde_json::from_slice::<ReplicatedState>(&data)?, expected);
    // One snapshot file: the receiving file and the replaced ones are gone.
    let files = std::fs::read_dir(target_dir.path().join("snapshots"))?.count();
    assert_eq!(files, 1);
    Ok(())
}

/// Publishing after an apply does not copy the state: the published value
/// shares every map the batch did not change with the one published before
/// (the maps are persistent), so a batch costs what it changed.
#[tokio::test]
async fn a_publish_shares_what_the_batch_did_not_change() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut stores = open(dir.path())?;
    let next = apply_all(&mut stores.state, 1, vec![apply(fleet(500))]).await?;
    let before = state_of(&stores.state);
    apply_all(
        &mut stores.state,
        next,
        vec![apply(vec![route("r1", "s2", "/z")])],
    )
    .await?;
    let after = state_of(&stores.state);
    assert!(after.resources.ptr_eq(&before.resources));
    assert!(
        after
            .endpoint_generations
            .0
            .ptr_eq(&before.endpoint_generations.0)
    );
    assert!(!after.routes.ptr_eq(&before.routes));
    assert_eq!(after.routes.len(), 500);
    Ok(())
}
