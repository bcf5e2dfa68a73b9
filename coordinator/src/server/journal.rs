//! The configuration journal: one task per coordinator follows the
//! published state machine, turns each change into one [`ConfigDelta`],
//! encodes it once and keeps a bounded ring of recent ones, so every watch
//! stream serves the same bytes and none keeps a copy of the state.
//!
//! Owns: computing the delta from the previously journaled state to the
//! new one (a walk of the state's persistent maps — resources, route
//! records, endpoint generations — that skips what the two states share:
//! O(C log R) per change of C objects, done once for all watchers),
//! encoding and chunking it, the ring and its bounds,
//! the full snapshot (encoded at most once per version, lazily, when some
//! watcher needs it, and served with the entries after it while those are
//! small next to it), each payload's
//! compressed form (made at most once, lazily, when a watcher that reads
//! it is sent the payload: [`Encodings`]), and the encoding counters. Does not own: the stream
//! protocol (what each watcher is sent, in `fleet`), nor the state machine
//! (`crate::state`, `crate::raft`).
//!
//! Versions are Raft log indexes. Entries are contiguous: each one's
//! `base` is the previous one's `version`, and the configuration at
//! `version` is the one at `base` plus the entry's delta. A change that
//! moves only the version (a registration, a decision proxies do not see)
//! is an entry without payload: a bare version. The state channel may skip
//! intermediate states; an entry then spans them, and a watcher that
//! names a version inside such a span gets a full snapshot.

use super::metrics::CoordinatorMetrics;
use crate::state::ReplicatedState;
use bytes::Bytes;
use imbl::ordmap::DiffItem;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use switchyard_proto::compressed;
use switchyard_proto::model::{ConfigDelta, Kind, ResourceKey};
use tokio::sync::watch;

/// Largest chunk of an encoded payload: well under 1 MiB, so no message
/// of the watch stream comes near gRPC's 4 MiB default limit whatever the
/// size of the store. A coordinator configured with a smaller message
/// limit uses a quarter of that limit instead ([`chunk_bytes`]).
pub(crate) const CHUNK_BYTES: usize = 256 * 1024;

/// The chunk size for a coordinator whose gRPC messages may be at most
/// `max_message_bytes`: [`CHUNK_BYTES`], or a quarter of the limit when
/// that is smaller (room for framing and the update's other fields).
pub(crate) fn chunk_bytes(max_message_bytes: usize) -> usize {
    (max_message_bytes / 4).clamp(1, CHUNK_BYTES)
}

/// The ring keeps at most this many entries...
pub(crate) const RING_ENTRIES: usize = 4096;

/// ...and at most this many payload bytes of JSON. A watcher further
/// behind than the ring reaches gets a full snapshot. The ring's memory is
/// bounded by `RING_BYTES`, the compressed forms made of them (smaller
/// than their JSON, which would at most double it), plus `RING_ENTRIES`
/// small headers; one entry larger than the byte bound (a bulk import) is
/// kept alone until the next one arrives.
pub(crate) const RING_BYTES: usize = 64 * 1024 * 1024;

/// One payload, encoded once for every watcher: its JSON in chunks, and
/// its compressed form in chunks, made the first time a watcher that reads
/// it is sent the payload (a fleet of older proxies never pays for it).
#[derive(Debug)]
pub(crate) struct Encodings {
    /// The JSON.
    pub json: Bytes,
    /// `json` in chunks of at most `chunk_bytes` (slices, not copies).
    pub chunks: Vec<Bytes>,
    /// The compressed form in chunks, once made.
    compressed: OnceLock<Vec<Bytes>>,
    chunk_bytes: usize,
}

impl Encodings {
    fn new(json: Bytes, chunk_bytes: usize) -> Encodings {
        Encodings {
            chunks: chunked(json.clone(), chunk_bytes),
            json,
            compressed: OnceLock::new(),
            chunk_bytes,
        }
    }

    /// No payload (a bare version).
    fn none() -> Encodings {
        Encodings::new(Bytes::new(), 1)
    }

    /// The chunks to send a watcher, and whether they are the compressed
    /// form: compressed when the watcher reads it and the payload is
    /// large enough to gain from it ([`compressed::worth_compressing`]).
    /// The first such call compresses (counted as an encoding of `kind`
    /// with `-lz4`); concurrent ones wait for it and share it.
    fn for_watcher(
        &self,
        accepts_lz4: bool,
        kind: &'static str,
        metrics: &CoordinatorMetrics,
    ) -> (bool, &[Bytes]) {
        if !accepts_lz4 || !compressed::worth_compressing(self.json.len()) {
            return (false, &self.chunks);
        }
        let chunks = self.compressed.get_or_init(|| {
            metrics.config_encoded(&format!("{kind}-lz4"));
            let started = std::time::Instant::now();
            let compressed = compressed::compress(&self.json);
            tracing::debug!(
                kind,
                bytes = self.json.len(),
                compressed = compressed.len(),
                ms = started.elapsed().as_millis() as u64,
                "compressed a configuration payload"
            );
            chunked(Bytes::from(compressed), self.chunk_bytes)
        });
        (true, chunks)
    }
}

/// One journaled change.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The version it applies on.
    pub base: u64,
    /// The version it leads to.
    pub version: u64,
    /// The encoded `ConfigDelta`, in chunks of at most [`chunk_bytes`];
    /// empty for a bare version.
    pub payload: Encodings,
}

impl Entry {
    /// Whether it changes nothing proxies see.
    pub fn is_bare(&self) -> bool {
        self.payload.json.is_empty()
    }

    fn bytes(&self) -> usize {
        self.payload.json.len()
    }
}

/// The encoded full snapshot of one version.
#[derive(Debug)]
pub(crate) struct Full {
    /// Its version.
    pub version: u64,
    /// The whole `ConfigSnapshot` (its JSON whole for watchers that do not
    /// take chunks).
    pub payload: Encodings,
}

/// Where a watcher holding some version stands.
#[derive(Debug)]
pub(crate) enum Position {
    /// It holds the newest journaled version.
    Current,
    /// It holds a version this coordinator has not journaled yet (it heard
    /// of it elsewhere): wait.
    Ahead,
    /// The entries after its version, in order.
    Behind(Vec<Arc<Entry>>),
    /// Its version is not in the ring (too old, or inside a span): it
    /// needs a full snapshot.
    Lost,
}

struct Ring {
    /// The state at `head`, the newest journaled version.
    state: Arc<ReplicatedState>,
    entries: VecDeque<Arc<Entry>>,
    bytes: usize,
    /// The last full snapshot some watcher asked for, kept while the
    /// ring leads from its version to the head with few bytes of deltas
    /// ([`KEEP_FULL_WHILE_DELTAS_UNDER`]).
    full: Option<Arc<Full>>,
    /// Payload bytes journaled since `full`'s version.
    since_full: usize,
}

/// A full snapshot is served, followed by the deltas since its version,
/// while those deltas add up to less than this fraction (1/N) of its
/// size; past it the next watcher that needs one gets it encoded anew.
/// A fleet resyncing together while the store moves (their own
/// registrations, small changes) then shares one O(state) encoding
/// instead of one per change; a large change (thousands of routes
/// committed) has the next watcher's snapshot encoded anew rather than
/// sent after an old one. No watcher is sent more than a sixteenth of
/// the snapshot's size again in deltas.
const KEEP_FULL_WHILE_DELTAS_UNDER: usize = 16;

impl Ring {
    fn head(&self) -> u64 {
        self.state.last_index
    }

    /// Keeps `full` for the next watchers if the ring leads from its
    /// version to the head with few bytes of deltas. The head moves while
    /// a large store encodes (a fleet registering, say): an encoding kept
    /// only when still at the head would be thrown away and made again by
    /// every watcher asking meanwhile.
    fn keep_full(&mut self, full: Arc<Full>) {
        let since = if self.head() == full.version {
            Some(0)
        } else {
            self.entries
                .binary_search_by_key(&full.version, |e| e.base)
                .ok()
                .map(|i| self.entries.range(i..).map(|e| e.bytes()).sum())
        };
        if let Some(since) = since
            && since * KEEP_FULL_WHILE_DELTAS_UNDER < full.payload.json.len()
        {
            self.full = Some(full);
            self.since_full = since;
        }
    }
}

/// The journal. One per coordinator, shared by every watch stream.
pub struct Journal {
    ring: Mutex<Ring>,
    /// The newest journaled version; watchers wait on it.
    head: watch::Sender<u64>,
    /// One full encoding at a time, so watchers asking together share it.
    encoding_full: tokio::sync::Mutex<()>,
    /// Chunk size ([`chunk_bytes`]).
    chunk_bytes: usize,
    metrics: CoordinatorMetrics,
}

impl Journal {
    /// A journal starting at `state`, with no entries yet, cutting payloads
    /// into chunks of at most `chunk_bytes`.
    pub(crate) fn new(
        state: Arc<ReplicatedState>,
        chunk_bytes: usize,
        metrics: CoordinatorMetrics,
    ) -> Journal {
        let head = watch::Sender::new(state.last_index);
        Journal {
            ring: Mutex::new(Ring {
                state,
                entries: VecDeque::new(),
                bytes: 0,
                full: None,
                since_full: 0,
            }),
            head,
            encoding_full: tokio::sync::Mutex::new(()),
            chunk_bytes: chunk_bytes.max(1),
            metrics,
        }
    }

    /// The chunks of `payload` to send a watcher, and whether they are
    /// the compressed form ([`Encodings::for_watcher`], counted here).
    pub(crate) fn chunks_for<'p>(
        &self,
        payload: &'p Encodings,
        accepts_lz4: bool,
        kind: &'static str,
    ) -> (bool, &'p [Bytes]) {
        payload.for_watcher(accepts_lz4, kind, &self.metrics)
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The newest journaled version, changing as entries arrive.
    pub(crate) fn head(&self) -> watch::Receiver<u64> {
        self.head.subscribe()
    }

    /// Journals `state` if it is newer than the head: one delta computed
    /// and encoded, whatever the number of watchers.
    pub(crate) fn record(&self, state: Arc<ReplicatedState>) {
        let previous = self.ring().state.clone();
        let version = state.last_index;
        if version <= previous.last_index {
            if version < previous.last_index {
                // The state went back (never in a healthy node): start over,
                // every watcher then gets a full snapshot.
                self.reset(state);
            }
            return;
        }
        let delta = delta_between(&previous, &state);
        let payload = if delta.is_empty() {
            Encodings::none()
        } else {
            match serde_json::to_vec(&delta) {
                Ok(json) => {
                    self.metrics.config_encoded("delta");
                    Encodings::new(Bytes::from(json), self.chunk_bytes)
                }
                Err(e) => {
                    // Nothing in the model fails to encode; if it ever did,
                    // watchers must not get a hole: they resync in full.
                    tracing::error!(version, error = %e, "configuration delta does not encode");
                    self.reset(state);
                    return;
                }
            }
        };
        let entry = Arc::new(Entry {
            base: previous.last_index,
            version,
            payload,
        });
        {
            let mut ring = self.ring();
            ring.bytes += entry.bytes();
            ring.since_full += entry.bytes();
            ring.entries.push_back(entry);
            while ring.entries.len() > RING_ENTRIES
                || (ring.bytes > RING_BYTES && ring.entries.len() > 1)
            {
                if let Some(old) = ring.entries.pop_front() {
                    ring.bytes -= old.bytes();
                }
            }
            ring.state = state;
            // The full snapshot of an earlier version plus the entries
            // after it is the configuration at the head: the encoding
            // stays while those are small next to it (bare versions cost
            // nothing; a fleet registering one proxy at a time would
            // otherwise have the whole store encoded again per
            // registration).
            let outgrown = ring.full.as_ref().is_some_and(|full| {
                ring.since_full * KEEP_FULL_WHILE_DELTAS_UNDER >= full.payload.json.len()
            });
            if outgrown {
                ring.full = None;
            }
        }
        self.head.send_replace(version);
    }

    fn reset(&self, state: Arc<ReplicatedState>) {
        let version = state.last_index;
        {
            let mut ring = self.ring();
            ring.entries.clear();
            ring.bytes = 0;
            ring.state = state;
            ring.full = None;
            ring.since_full = 0;
        }
        self.head.send_replace(version);
    }

    /// Where a watcher holding `held` stands.
    pub(crate) fn position(&self, held: u64) -> Position {
        let ring = self.ring();
        let head = ring.head();
        if held == head {
            return Position::Current;
        }
        if held > head {
            return Position::Ahead;
        }
        match ring.entries.binary_search_by_key(&held, |e| e.base) {
            Ok(i) => Position::Behind(ring.entries.range(i..).cloned().collect()),
            Err(_) => Position::Lost,
        }
    }

    /// A full snapshot from which the ring leads to the newest journaled
    /// version: the one encoded last if it is still kept (see `record`)
    /// and, for a watcher that takes deltas (`with_deltas`), whatever came
    /// since, or for one that does not, only bare versions; else that of
    /// the newest version, encoded now.
    pub(crate) async fn full(&self, with_deltas: bool) -> Result<Arc<Full>, serde_json::Error> {
        let _one_at_a_time = self.encoding_full.lock().await;
        let state = {
            let ring = self.ring();
            if let Some(full) = &ring.full {
                let usable = full.version == ring.head()
                    || ring
                        .entries
                        .binary_search_by_key(&full.version, |e| e.base)
                        .is_ok_and(|i| with_deltas || ring.entries.range(i..).all(|e| e.is_bare()));
                if usable {
                    return Ok(full.clone());
                }
            }
            ring.state.clone()
        };
        let version = state.last_index;
        let started = std::time::Instant::now();
        let whole = Bytes::from(state.config_snapshot_json()?);
        // Rare (a watcher holding nothing, or too far behind) and O(state):
        // worth a line when a resync is slow.
        tracing::info!(
            version,
            bytes = whole.len(),
            ms = started.elapsed().as_millis() as u64,
            "encoded the whole configuration for watchers"
        );
        self.metrics.config_encoded("full");
        let full = Arc::new(Full {
            version,
            payload: Encodings::new(whole, self.chunk_bytes),
        });
        self.ring().keep_full(full.clone());
        Ok(full)
    }
}

/// Follows `states` into `journal` until the channel closes.
pub(crate) async fn follow(
    journal: Arc<Journal>,
    mut states: watch::Receiver<Arc<ReplicatedState>>,
) {
    loop {
        let state = states.borrow_and_update().clone();
        journal.record(state);
        if states.changed().await.is_err() {
            return;
        }
    }
}

/// `bytes` in slices of at most `size` bytes (no copies).
fn chunked(bytes: Bytes, size: usize) -> Vec<Bytes> {
    let mut chunks = Vec::with_capacity(bytes.len().div_ceil(size));
    let mut start = 0;
    while start < bytes.len() {
        let end = (start + size).min(bytes.len());
        chunks.push(bytes.slice(start..end));
        start = end;
    }
    chunks
}

/// What proxies see change from `old` to `new`: a walk of the state's
/// three persistent maps that skips every subtree the two states share
/// (`imbl`'s diff), so it costs O(C log R) for C changed objects among R —
/// the new state is the old one with C updates — not a walk of the store.
pub(crate) fn delta_between(old: &ReplicatedState, new: &ReplicatedState) -> ConfigDelta {
    let mut delta = ConfigDelta {
        base_version: old.last_index,
        version: new.last_index,
        ..Default::default()
    };
    for item in old.resources.diff(&new.resources) {
        match item {
            DiffItem::Add(_, resource)
            | DiffItem::Update {
                new: (_, resource), ..
            } => {
                delta.upserted.push(resource.clone());
            }
            DiffItem::Remove(key, _) => delta.removed.push(key.clone()),
        }
    }
    for item in old.routes.diff(&new.routes) {
        match item {
            DiffItem::Add(_, record)
            | DiffItem::Update {
                new: (_, record), ..
            } => {
                delta
                    .routes
                    .push(switchyard_proto::model::RouteRecord::clone(record));
            }
            DiffItem::Remove(name, _) => delta.removed.push(ResourceKey {
                kind: Kind::HTTPRoute,
                name: name.clone(),
            }),
        }
    }
    for item in old.endpoint_generations.0.diff(&new.endpoint_generations.0) {
        match item {
            DiffItem::Add(name, generation)
            | DiffItem::Update {
                new: (name, generation),
                ..
            } => {
                delta.endpoint_generations.insert(name.clone(), *generation);
            }
            DiffItem::Remove(name, _) => delta.endpoint_generations_removed.push(name.clone()),
        }
    }
    delta
}

#[cfg(test)]
mod tests;
