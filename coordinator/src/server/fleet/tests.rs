//! The watch stream's protocol over a journal fed by hand: what a watcher
//! that falls behind the ring while connected is sent.

use super::*;
use crate::server::journal::{CHUNK_BYTES, RING_ENTRIES};
use crate::server::metrics::CoordinatorMetrics;
use crate::state::ReplicatedState;
use prometheus_client::registry::Registry;
use switchyard_proto::model::{ObjectMeta, Resource, Service};

fn with_service(previous: &ReplicatedState, name: &str) -> ReplicatedState {
    let mut state = previous.clone();
    state.last_index += 1;
    let service = Resource::Service(Service {
        meta: ObjectMeta::named("demo", name),
        ports: Vec::new(),
    });
    state.resources.insert(service.key(), service);
    state
}

#[tokio::test]
async fn a_watcher_that_falls_behind_the_ring_gets_a_full_snapshot_then_deltas() {
    let metrics = CoordinatorMetrics::register(&mut Registry::default());
    let start = Arc::new(ReplicatedState {
        last_index: 1,
        ..Default::default()
    });
    let journal = Arc::new(Journal::new(start.clone(), CHUNK_BYTES, metrics.clone()));
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    let stream_journal = journal.clone();
    let stream = tokio::spawn(async move {
        let mut out = Out {
            tx,
            // No leader news: its sender is gone.
            leader: tokio::sync::watch::channel(None).1,
            coordinator_id: 1,
            accepts_lz4: false,
        };
        stream_deltas(&stream_journal, &mut out, 1).await;
    });
    // It holds the newest version: one bare version says the stream is
    // live.
    let live = rx.recv().await.unwrap().unwrap();
    assert_eq!((live.version, live.base_version), (1, 1));
    assert!(live.snapshot_json.is_empty() && live.delta_json.is_empty());
    // More changes than the ring keeps, before the stream task runs again
    // (this runtime has one thread and the loop does not yield).
    let mut state = Arc::new(with_service(&start, "first"));
    journal.record(state.clone());
    for _ in 0..RING_ENTRIES {
        let mut next = (*state).clone();
        next.last_index += 1;
        state = Arc::new(next);
        journal.record(state.clone());
    }
    let head = state.last_index;
    let full = rx.recv().await.unwrap().unwrap();
    assert_eq!(full.version, head, "a full snapshot of the newest version");
    assert!(!full.snapshot_json.is_empty() && full.delta_json.is_empty());
    assert_eq!(full.chunk_count, 1);
    assert_eq!(metrics.config_encodings("full"), 1);
    // Then deltas again, based on it.
    let changed = Arc::new(with_service(&state, "second"));
    journal.record(changed.clone());
    let delta = rx.recv().await.unwrap().unwrap();
    assert_eq!((delta.base_version, delta.version), (head, head + 1));
    assert!(!delta.delta_json.is_empty() && delta.snapshot_json.is_empty());
    drop(rx);
    stream.await.unwrap();
}
