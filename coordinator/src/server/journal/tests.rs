//! The journal alone, fed states by hand: entries, positions, the ring's
//! bounds, and the encodings it counts.

use super::*;
use prometheus_client::registry::Registry;
use switchyard_proto::model::{ConfigSnapshot, ObjectMeta, Resource, Service};

/// A journal started at the empty state (version 0), fed states by hand.
struct Fixture {
    journal: Journal,
    /// The metrics it counts encodings in.
    metrics: CoordinatorMetrics,
    /// The last state recorded (the empty state at first).
    state: Arc<ReplicatedState>,
}

impl Fixture {
    /// A journal at the empty state cutting payloads into chunks of at
    /// most `chunk_bytes`.
    fn new(chunk_bytes: usize) -> Fixture {
        let metrics = CoordinatorMetrics::register(&mut Registry::default());
        let state = Arc::new(ReplicatedState::default());
        let journal = Journal::new(state.clone(), chunk_bytes, metrics.clone());
        Fixture {
            journal,
            metrics,
            state,
        }
    }

    /// Records the last state moved to `index`, with Service `demo/<name>`
    /// stored (its label `v` set to `label`) when `name` is given; returns
    /// the new state.
    fn record(&mut self, index: u64, name: Option<(&str, &str)>) -> Arc<ReplicatedState> {
        let mut state = ReplicatedState::clone(&self.state);
        state.last_index = index;
        if let Some((name, label)) = name {
            let mut meta = ObjectMeta::named("demo", name);
            meta.labels.insert("v".into(), label.into());
            let service = Resource::Service(Service {
                meta,
                ports: Vec::new(),
            });
            state.resources.insert(service.key(), service);
        }
        self.state = Arc::new(state);
        self.journal.record(self.state.clone());
        self.state.clone()
    }

    /// Stores Services `demo/s1` .. `demo/s<n>`, one per version 1..=n.
    fn store_services(&mut self, n: u64) {
        for i in 1..=n {
            self.record(i, Some((&format!("s{i}"), "1")));
        }
    }

    /// Records a bare version at each of `indexes`; returns the last state.
    fn record_bare(&mut self, indexes: std::ops::Range<u64>) -> Arc<ReplicatedState> {
        for index in indexes {
            self.record(index, None);
        }
        self.state.clone()
    }
}

fn decode(chunks: &[Bytes]) -> ConfigDelta {
    let json: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
    serde_json::from_slice(&json).expect("a journaled delta decodes")
}

#[test]
fn each_change_is_one_entry_and_a_version_only_change_is_bare() {
    let mut f = Fixture::new(CHUNK_BYTES);
    let s0 = f.state.clone();
    f.record(1, Some(("a", "1")));
    f.record(2, None);
    let s3 = f.record(3, Some(("a", "2")));
    assert_eq!(
        f.metrics.config_encodings("delta"),
        2,
        "the bare version is not encoded"
    );
    let Position::Behind(entries) = f.journal.position(0) else {
        panic!("version 0 is the first entry's base");
    };
    let spans: Vec<_> = entries
        .iter()
        .map(|e| (e.base, e.version, e.is_bare()))
        .collect();
    assert_eq!(spans, [(0, 1, false), (1, 2, true), (2, 3, false)]);
    // The deltas, applied in order on the base's snapshot, give the head's.
    let mut held = s0.config_snapshot();
    for entry in entries.iter().filter(|e| !e.is_bare()) {
        held.version = entry.base;
        held.apply_delta(&decode(&entry.payload.chunks))
            .expect("the delta applies");
    }
    assert_eq!(held, s3.config_snapshot());
    assert!(matches!(f.journal.position(3), Position::Current));
    assert!(matches!(f.journal.position(7), Position::Ahead));
    let Position::Behind(after_two) = f.journal.position(2) else {
        panic!("version 2 is journaled");
    };
    assert_eq!(after_two.len(), 1);
}

#[test]
fn a_version_inside_a_skipped_span_or_evicted_needs_a_full_snapshot() {
    let mut f = Fixture::new(CHUNK_BYTES);
    // The state channel skipped 1..4: one entry spans 0→5.
    f.record(5, Some(("a", "1")));
    assert!(matches!(f.journal.position(3), Position::Lost));
    f.record_bare(6..RING_ENTRIES as u64 + 7);
    assert!(
        matches!(f.journal.position(0), Position::Lost),
        "the oldest entry is gone once the ring holds RING_ENTRIES"
    );
    assert!(matches!(f.journal.position(6), Position::Behind(_)));
}

#[test]
fn a_large_delta_is_cut_into_chunks_that_reassemble() {
    let mut f = Fixture::new(1000);
    let label = "x".repeat(5000);
    let s1 = f.record(1, Some(("big", &label)));
    let Position::Behind(entries) = f.journal.position(0) else {
        panic!("version 0 is journaled");
    };
    let chunks = &entries[0].payload.chunks;
    assert!(chunks.len() >= 5, "{} chunks", chunks.len());
    assert!(chunks.iter().all(|c| c.len() <= 1000 && !c.is_empty()));
    let mut held = ConfigSnapshot::default();
    held.apply_delta(&decode(chunks))
        .expect("the delta applies");
    assert_eq!(held, s1.config_snapshot());
}

#[tokio::test]
async fn the_full_snapshot_is_encoded_once_per_version() {
    let mut f = Fixture::new(100);
    let s1 = f.record(1, Some(("a", "1")));
    let first = f.journal.full(true).await.expect("encodes");
    let second = f.journal.full(true).await.expect("encodes");
    assert_eq!(f.metrics.config_encodings("full"), 1);
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(first.version, 1);
    let joined: Vec<u8> = first
        .payload
        .chunks
        .iter()
        .flat_map(|c| c.iter().copied())
        .collect();
    assert_eq!(joined, first.payload.json.to_vec());
    let snapshot: ConfigSnapshot = serde_json::from_slice(&first.payload.json).expect("decodes");
    assert_eq!(snapshot, s1.config_snapshot());
    f.record(2, Some(("a", "2")));
    assert_eq!(f.journal.full(true).await.expect("encodes").version, 2);
    assert_eq!(f.metrics.config_encodings("full"), 2);
}

#[tokio::test]
async fn bare_versions_keep_the_full_snapshot_while_the_ring_leads_from_it() {
    let mut f = Fixture::new(CHUNK_BYTES);
    f.record(1, Some(("a", "1")));
    assert_eq!(f.journal.full(true).await.expect("encodes").version, 1);
    // Registrations, say: versions proxies see nothing of.
    f.record_bare(2..4);
    let full = f.journal.full(true).await.expect("encodes");
    assert_eq!(full.version, 1, "the earlier encoding serves");
    assert_eq!(f.metrics.config_encodings("full"), 1);
    let Position::Behind(after) = f.journal.position(full.version) else {
        panic!("the ring leads from the snapshot's version to the head");
    };
    assert!(after.iter().all(|e| e.is_bare()));
    assert_eq!(after.last().map(|e| e.version), Some(3));
    // A change proxies see: encoded afresh at the head.
    f.record(4, Some(("a", "2")));
    assert_eq!(f.journal.full(true).await.expect("encodes").version, 4);
    assert_eq!(f.metrics.config_encodings("full"), 2);
}

#[tokio::test]
async fn a_kept_snapshot_the_ring_no_longer_leads_from_is_encoded_again() {
    let mut f = Fixture::new(CHUNK_BYTES);
    f.record(1, Some(("a", "1")));
    assert_eq!(f.journal.full(true).await.expect("encodes").version, 1);
    // More bare versions than the ring keeps: the entry based on 1 is gone.
    let state = f.record_bare(2..(RING_ENTRIES as u64 + 3));
    assert!(matches!(f.journal.position(1), Position::Lost));
    let full = f.journal.full(true).await.expect("encodes");
    assert_eq!(full.version, state.last_index, "encoded at the head");
    assert_eq!(f.metrics.config_encodings("full"), 2);
}

#[tokio::test]
async fn small_changes_keep_the_full_snapshot_until_they_add_up_to_a_share_of_it() {
    let mut f = Fixture::new(CHUNK_BYTES);
    // A store of 40 Services, the full snapshot encoded at version 40.
    f.store_services(40);
    let first = f.journal.full(true).await.expect("encodes");
    assert_eq!(first.version, 40);
    let full_bytes = first.payload.json.len();
    // One Service changes: the earlier encoding serves, followed by that
    // change (a fleet resyncing while the store moves shares one encoding).
    f.record(41, Some(("s1", "2")));
    let full = f.journal.full(true).await.expect("encodes");
    assert!(Arc::ptr_eq(&full, &first), "the earlier encoding serves");
    let Position::Behind(after) = f.journal.position(full.version) else {
        panic!("the ring leads from the snapshot's version to the head");
    };
    assert_eq!(after.len(), 1);
    assert!(!after[0].is_bare());
    // Changes up to the kept share of the snapshot's size: encoded afresh
    // at the head.
    let mut index = 41;
    let mut deltas = after[0].bytes();
    while deltas * KEEP_FULL_WHILE_DELTAS_UNDER < full_bytes {
        index += 1;
        f.record(index, Some(("s1", &index.to_string())));
        deltas += f.journal.ring().entries.back().expect("an entry").bytes();
    }
    let again = f.journal.full(true).await.expect("encodes");
    assert_eq!(again.version, index, "encoded at the head");
    assert_eq!(f.metrics.config_encodings("full"), 2);
}

#[tokio::test]
async fn a_watcher_without_deltas_gets_the_kept_snapshot_only_through_bare_versions() {
    let mut f = Fixture::new(CHUNK_BYTES);
    f.store_services(40);
    let kept = f.journal.full(false).await.expect("encodes");
    f.record_bare(41..43);
    assert!(Arc::ptr_eq(
        &f.journal.full(false).await.expect("encodes"),
        &kept
    ));
    // A small change: kept for watchers that take it as a delta, encoded
    // at the head for one that takes whole snapshots only.
    f.record(43, Some(("s1", "2")));
    assert!(Arc::ptr_eq(
        &f.journal.full(true).await.expect("encodes"),
        &kept
    ));
    assert_eq!(f.journal.full(false).await.expect("encodes").version, 43);
    assert_eq!(f.metrics.config_encodings("full"), 2);
}

#[tokio::test]
async fn a_snapshot_encoded_while_the_head_moved_on_is_kept_for_the_next_watcher() {
    let mut f = Fixture::new(CHUNK_BYTES);
    f.store_services(40);
    // A watcher's encoding of version 40 finishes after a registration and
    // a small change moved the head on.
    let json = Bytes::from(f.state.config_snapshot_json().expect("encodes"));
    f.record_bare(41..42);
    f.record(42, Some(("s1", "2")));
    let at_40 = Arc::new(Full {
        version: 40,
        payload: Encodings::new(json, CHUNK_BYTES),
    });
    f.journal.ring().keep_full(at_40.clone());
    let next = f.journal.full(true).await.expect("encodes");
    assert!(Arc::ptr_eq(&next, &at_40), "kept, not encoded again");
    assert_eq!(f.metrics.config_encodings("full"), 0);
    // Not for a watcher that takes no deltas: a change came after it.
    assert_eq!(f.journal.full(false).await.expect("encodes").version, 42);
}
