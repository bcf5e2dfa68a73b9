//! What one agent holds of the configuration stream, and how one
//! `ConfigUpdate` changes it: the only place that decodes the Watch
//! stream, so a new encoding (deltas, chunks) changes this module alone.
//!
//! Owns: the version held, dropping stale updates, decoding, and applying
//! a delta to the agent's view (all or nothing, in O(change): the agent
//! keeps no snapshot, only the [`Builder`]'s indexes). Does not own: the
//! stream itself (`agent::run_watch`) or what a configuration means to
//! the agent (`view`).
//!
//! # One decode per payload for the whole fleet
//!
//! 200 agents resyncing at once each receive the same full snapshot (14 MB
//! of JSON at 10,000 routes), and then the same deltas (one that commits
//! a bootstrap's 10,000 pending routes is megabytes too). Decoding and
//! indexing a snapshot costs about 0.1 s, so 200 separate decodes of each
//! payload would make the tool, not the coordinators, the bottleneck on a
//! small machine — and starve the agents' own heartbeats. [`Shared`]
//! keeps what the agents decoded last, with its bytes: an agent whose
//! assembled payload is byte for byte the same (compared in full) as one
//! already decoded, at the same version and — for a delta — on the same
//! configuration, takes the resulting builder (an O(1) copy: its maps are
//! persistent) instead of decoding again. "The same configuration" is a
//! lineage: the id of a builder made from a shared snapshot or delta,
//! which an agent keeps while it holds that builder unchanged. Every agent
//! still receives every byte over its own stream and follows every
//! sequence rule itself (`switchyard_proto::watch::step`); only the work
//! of turning identical bytes into identical indexes is shared.

use super::view::Builder;
use switchyard_proto::pb;
use switchyard_proto::watch::{self as rules, Assembler, Encoded, Step};

/// Deltas remembered for agents that are behind the others. Under a
/// stream of single-route changes the slowest agents run thousands of
/// deltas behind the fastest; a delta they no longer find shared they
/// decode themselves and start a lineage of their own, which the agents
/// behind them can then share. Each remembered delta costs its payload
/// and what its builder does not share with its neighbours: O(change).
const SHARED_DELTAS: usize = 4096;

/// Snapshots remembered: a few per coordinator.
const SHARED_SNAPSHOTS: usize = 8;

/// Aliases kept at most (a bound on memory; forgetting them only costs
/// comparisons again).
const MAX_ALIASES: usize = 100_000;

/// One payload some agent decoded, and the builder it led to.
#[derive(Debug)]
struct Decode {
    /// The lineage the payload applied on (0 for a snapshot).
    from: u64,
    /// The configuration it applied on (`None` for a snapshot).
    before: Option<Builder>,
    /// The version it leads to.
    version: u64,
    /// Its payload.
    payload: Encoded,
    /// The lineage of `builder`.
    lineage: u64,
    /// The configuration it led to.
    builder: Builder,
}

/// What the agents decoded last (see the module's header).
#[derive(Debug, Default)]
pub struct Shared {
    /// The last [`SHARED_SNAPSHOTS`] snapshots, oldest first: each
    /// coordinator may serve its own (one encoded at another version,
    /// kept while the deltas after it are small), and agents of the three
    /// streams arrive interleaved.
    snapshots: std::collections::VecDeque<Decode>,
    /// The last [`SHARED_DELTAS`] deltas applied on a shared lineage, by
    /// (version, the lineage they applied on): an agent finds its own in
    /// O(log), however far behind it is.
    deltas: std::collections::BTreeMap<(u64, u64), Decode>,
    /// The keys of `deltas`, oldest first (what to forget first).
    delta_order: std::collections::VecDeque<(u64, u64)>,
    /// Lineages handed out.
    lineages: u64,
    /// Lineages found to hold the same configuration as another: each
    /// then shares that one's decodes without comparing again.
    aliases: std::collections::HashMap<u64, u64>,
    /// Lineages compared whole with every other decode of a payload and
    /// found to differ from all: not compared again.
    apart: std::collections::HashSet<u64>,
    /// Whole comparisons made.
    pub comparisons: u64,
    /// Payloads an agent decoded itself, and payloads an agent took from
    /// another agent's decode instead (each payload an agent received
    /// counts once, in one of the two).
    pub decoded: u64,
    /// See `decoded`.
    pub shared: u64,
}

/// A whole payload the sequence rules let through, still encoded (and
/// compressed, if it came so: agents compare the bytes as they came, so
/// one decompression serves the fleet too).
#[derive(Debug)]
pub struct Pending {
    version: u64,
    /// The version a delta applies on; `None` for a snapshot.
    delta_base: Option<u64>,
    payload: Encoded,
}

impl Pending {
    /// Its size in bytes, as it came.
    fn size(&self) -> usize {
        self.payload.bytes.len()
    }
}

/// What [`Held::prepare`] made of an update.
#[derive(Debug)]
pub enum Prepared {
    /// Nothing to decode: this is what the update did.
    Done(Outcome),
    /// A payload to decode, or to take from another agent's decode.
    Payload(Pending),
}

impl Shared {
    /// What an agent holding `current` on lineage `lineage` gets from
    /// `pending`, if some agent decoded exactly those bytes at that
    /// version on the same configuration: its own lineage, or — with
    /// `compare_whole`, at the cost of one comparison of the whole
    /// configuration — another lineage whose configuration before the
    /// delta equals the agent's, which the agent's lineage then joins for
    /// good (an alias). A lineage found to differ from every candidate is
    /// remembered apart and not compared again ([`Shared::may_compare`]).
    fn find(
        &mut self,
        pending: &Pending,
        lineage: u64,
        current: Option<&Builder>,
        compare_whole: bool,
    ) -> Option<(u64, Builder)> {
        let same_bytes = |d: &&Decode| d.version == pending.version && d.payload == pending.payload;
        let lineage = self.aliases.get(&lineage).copied().unwrap_or(lineage);
        let found = match pending.delta_base {
            None => self.snapshots.iter().rev().find(same_bytes),
            Some(_) => {
                let own = (lineage != 0)
                    .then(|| self.deltas.get(&(pending.version, lineage)))
                    .flatten()
                    .filter(same_bytes);
                own.or_else(|| {
                    if !compare_whole {
                        return None;
                    }
                    let current = current?;
                    let mut candidates = self
                        .deltas
                        .range((pending.version, 0)..=(pending.version, u64::MAX))
                        .map(|(_, d)| d)
                        .filter(same_bytes)
                        .peekable();
                    candidates.peek()?;
                    self.comparisons += 1;
                    let Some(equal) = candidates.find(|d| d.before.as_ref() == Some(current))
                    else {
                        if self.apart.len() >= MAX_ALIASES {
                            self.apart.clear();
                        }
                        self.apart.insert(lineage);
                        return None;
                    };
                    if lineage != 0 {
                        if self.aliases.len() >= MAX_ALIASES {
                            self.aliases.clear();
                        }
                        self.aliases.insert(lineage, equal.from);
                    }
                    Some(equal)
                })
            }
        };
        found.map(|d| (d.lineage, d.builder.clone()))
    }

    /// Whether an agent on `lineage` may compare its whole configuration
    /// with other lineages' (see [`Shared::find`]): until it has once
    /// found it differs from all. One comparison (O(state)) merges a
    /// lineage for good, where otherwise each of its agents would decode
    /// every later delta on its own: agents that moved to another
    /// coordinator's stream, or took a snapshot of another version, each
    /// used to stay on a lineage of their own (a run of 128 clients' updates
    /// decoded 25,047 payloads and shared 18,553).
    fn may_compare(&self, lineage: u64) -> bool {
        let lineage = self.aliases.get(&lineage).copied().unwrap_or(lineage);
        !self.apart.contains(&lineage)
    }

    /// Remembers that `pending` made `builder` out of `before` (on
    /// `lineage`, 0 for a snapshot); returns the new builder's lineage.
    fn remember(
        &mut self,
        pending: &Pending,
        lineage: u64,
        before: Option<&Builder>,
        builder: &Builder,
    ) -> u64 {
        self.lineages += 1;
        // A delta on a lineage apart from the others leads to one apart too.
        if pending.delta_base.is_some() && self.apart.contains(&lineage) {
            self.apart.insert(self.lineages);
        }
        let decode = Decode {
            from: lineage,
            before: before.cloned(),
            version: pending.version,
            payload: pending.payload.clone(),
            lineage: self.lineages,
            builder: builder.clone(),
        };
        if pending.delta_base.is_none() {
            self.snapshots.push_back(decode);
            if self.snapshots.len() > SHARED_SNAPSHOTS {
                self.snapshots.pop_front();
            }
        } else {
            let key = (decode.version, decode.from);
            if self.deltas.insert(key, decode).is_none() {
                self.delta_order.push_back(key);
            }
            while self.delta_order.len() > SHARED_DELTAS {
                if let Some(oldest) = self.delta_order.pop_front() {
                    self.deltas.remove(&oldest);
                }
            }
        }
        self.lineages
    }
}

/// The configuration one agent holds.
#[derive(Debug, Default)]
pub struct Held {
    /// Newest version shown, on any stream.
    pub version: u64,
    /// The configuration at `version`, as the agent's view and its
    /// indexes (`None` before the first one).
    pub config: Option<Builder>,
    /// Set after a refused update: the next stream asks for a full
    /// snapshot (as a real proxy does).
    pub resync: bool,
    /// Chunks of the current stream received so far.
    assembler: Assembler,
    /// The lineage of `config` (see the module's header), 0 when it is
    /// nobody else's.
    lineage: u64,
}

/// What one update did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not newer than what is held, or a chunk of a payload still
    /// incomplete: nothing changed.
    Stale,
    /// Only the version moved; the configuration held is current at it.
    Version,
    /// A new configuration is held.
    Changed,
}

/// Why an update could not be taken.
#[derive(Debug)]
pub struct DecodeError {
    /// The update's version.
    pub version: u64,
    /// The decoder's reason.
    pub reason: String,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "configuration {} does not decode: {}",
            self.version, self.reason
        )
    }
}

impl Held {
    /// The Watch request for a new stream: deltas and chunks accepted,
    /// from the version held (0 after a refusal: a full snapshot). What a
    /// broken stream left half-received is dropped.
    pub fn request(&mut self, proxy_id: &str) -> pb::WatchRequest {
        self.assembler = Assembler::default();
        pb::WatchRequest {
            proxy_id: proxy_id.to_owned(),
            known_version: if self.resync { 0 } else { self.version },
            accepts_deltas: true,
            accepts_lz4: true,
        }
    }

    /// Takes one message of the stream, by the proxies' own receiving
    /// rules ([`switchyard_proto::watch`]). A refusal changes nothing held
    /// and asks the next stream for a full snapshot.
    pub fn receive(&mut self, update: pb::ConfigUpdate) -> Result<Outcome, DecodeError> {
        self.receive_sharing(update, &mut Shared::default())
    }

    /// [`Held::receive`], taking what a whole payload leads to from
    /// `shared` when some agent decoded the same bytes on the same
    /// configuration, and leaving what it decodes there for the others.
    pub fn receive_sharing(
        &mut self,
        update: pb::ConfigUpdate,
        shared: &mut Shared,
    ) -> Result<Outcome, DecodeError> {
        let pending = match self.prepare(update)? {
            Prepared::Done(outcome) => return Ok(outcome),
            Prepared::Payload(pending) => pending,
        };
        if let Some(outcome) = self.reuse(&pending, shared, true) {
            return Ok(outcome);
        }
        let builder = self.build(&pending)?;
        Ok(self.keep(&pending, builder, shared))
    }

    /// [`Held::receive_sharing`] for an agent among others in one
    /// process. The fleet's lock is held while a payload is decoded: the
    /// agents queued on it behind the decoder then find its result instead
    /// of all decoding the same bytes. (Decoding a small payload with the
    /// lock let go made a herd of it: the lock is fair, so every agent
    /// already queued got it before the decoder could leave its result,
    /// and a run of 128 clients' updates decoded 17,222 payloads and
    /// shared 7,378.) A large payload is decoded off the async workers'
    /// queue (`block_in_place`), so the agents' heartbeats go on meanwhile.
    /// A delta decoded on another lineage is taken after comparing the
    /// whole configuration, once per lineage (see `Shared::find`).
    pub async fn receive_in_fleet(
        &mut self,
        update: pb::ConfigUpdate,
        shared: &tokio::sync::Mutex<Shared>,
        large: usize,
    ) -> Result<Outcome, DecodeError> {
        let pending = match self.prepare(update)? {
            Prepared::Done(outcome) => return Ok(outcome),
            Prepared::Payload(pending) => pending,
        };
        let large = pending.size() > large;
        let mut guard = shared.lock().await;
        let compare = large || guard.may_compare(self.lineage);
        if let Some(outcome) = self.reuse(&pending, &mut guard, compare) {
            return Ok(outcome);
        }
        let builder = if large {
            tokio::task::block_in_place(|| self.build(&pending))?
        } else {
            self.build(&pending)?
        };
        Ok(self.keep(&pending, builder, &mut guard))
    }

    /// Holds what another agent's decode of `pending` led to, if `shared`
    /// has one on this agent's configuration (counted as shared).
    fn reuse(
        &mut self,
        pending: &Pending,
        shared: &mut Shared,
        compare_whole: bool,
    ) -> Option<Outcome> {
        let (lineage, builder) =
            shared.find(pending, self.lineage, self.config.as_ref(), compare_whole)?;
        shared.shared += 1;
        Some(self.install(pending.version, lineage, builder))
    }

    /// Holds `builder`, this agent's own decode of `pending` (counted as
    /// decoded), and leaves it in `shared` for the others.
    fn keep(&mut self, pending: &Pending, builder: Builder, shared: &mut Shared) -> Outcome {
        shared.decoded += 1;
        let lineage = shared.remember(pending, self.lineage, self.config.as_ref(), &builder);
        self.install(pending.version, lineage, builder)
    }

    /// Takes one message of the stream as far as the sequence rules go:
    /// what it did, or the whole payload it completed, still encoded. A
    /// refusal changes nothing held and asks for a full snapshot.
    pub fn prepare(&mut self, update: pb::ConfigUpdate) -> Result<Prepared, DecodeError> {
        let version = update.version;
        let whole = match self.assembler.push(update) {
            Ok(Some(whole)) => whole,
            Ok(None) => return Ok(Prepared::Done(Outcome::Stale)),
            Err(reason) => return Err(self.refused(version, reason)),
        };
        let holding = self.config.is_some();
        let step = match rules::step(self.version, holding, self.resync, whole) {
            Ok(step) => step,
            Err(e) => return Err(self.refused(version, refusal(e))),
        };
        Ok(match step {
            Step::Stale => Prepared::Done(Outcome::Stale),
            Step::Version(v) => {
                self.version = v;
                Prepared::Done(Outcome::Version)
            }
            Step::Snapshot(version, payload) => Prepared::Payload(Pending {
                version,
                delta_base: None,
                payload,
            }),
            Step::Delta {
                version,
                base,
                payload,
            } => Prepared::Payload(Pending {
                version,
                delta_base: Some(base),
                payload,
            }),
        })
    }

    /// Decodes `pending` into the configuration it leads to (a refusal
    /// changes nothing held and asks for a full snapshot).
    fn build(&mut self, pending: &Pending) -> Result<Builder, DecodeError> {
        let built =
            pending
                .payload
                .to_json()
                .map_err(refusal)
                .and_then(|json| match pending.delta_base {
                    None => serde_json::from_slice(&json)
                        .map(|snapshot| Builder::of(&snapshot))
                        .map_err(|e| e.to_string()),
                    Some(base) => self.apply_delta(pending.version, base, &json),
                });
        built.map_err(|reason| self.refused(pending.version, reason))
    }

    /// Holds `builder`, of `lineage`, at `version`.
    fn install(&mut self, version: u64, lineage: u64, builder: Builder) -> Outcome {
        self.version = version;
        self.config = Some(builder);
        self.lineage = lineage;
        self.resync = false;
        Outcome::Changed
    }

    /// The configuration held with the delta from `base` to `version`
    /// applied (all or nothing: on a copy, O(1) to make).
    fn apply_delta(&self, version: u64, base: u64, json: &[u8]) -> Result<Builder, String> {
        let delta = rules::decode_delta(version, base, json).map_err(refusal)?;
        let mut next = self
            .config
            .clone()
            .ok_or_else(|| "a delta came before any snapshot".to_string())?;
        next.apply(&delta).map_err(|e| e.to_string())?;
        Ok(next)
    }

    /// Refuses the update at `version`: nothing held changes, and the
    /// next stream asks for a full snapshot.
    fn refused(&mut self, version: u64, reason: String) -> DecodeError {
        self.resync = true;
        DecodeError { version, reason }
    }

    /// Whether a complete configuration at `version` or newer is held.
    pub fn complete_at(&self, version: u64) -> bool {
        self.config.is_some() && self.version >= version
    }
}

/// Why the rules refused an update, in words.
fn refusal(refused: rules::Refused) -> String {
    match refused {
        rules::Refused::OutOfSequence(reason) => reason,
        rules::Refused::Decode(e) => e.to_string(),
        rules::Refused::Encoding(reason) => reason,
    }
}

/// Bytes the update carried (for the fleet's counters).
pub fn update_bytes(update: &pb::ConfigUpdate) -> u64 {
    (update.snapshot_json.len() + update.delta_json.len()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Poll;

    use switchyard_proto::model::{ConfigDelta, ConfigSnapshot, ObjectName};

    fn delta(base: u64, version: u64, service: &str) -> pb::ConfigUpdate {
        let mut d = ConfigDelta {
            base_version: base,
            version,
            ..Default::default()
        };
        d.endpoint_generations
            .insert(ObjectName::new("ns", service), version);
        pb::ConfigUpdate {
            version,
            base_version: base,
            delta_json: serde_json::to_vec(&d).unwrap().into(),
            coordinator_id: 1,
            ..Default::default()
        }
    }

    fn update(version: u64, snapshot: Option<&ConfigSnapshot>) -> pb::ConfigUpdate {
        pb::ConfigUpdate {
            version,
            snapshot_json: snapshot
                .map_or_else(Vec::new, |s| serde_json::to_vec(s).unwrap())
                .into(),
            coordinator_id: 1,
            ..Default::default()
        }
    }

    #[test]
    fn newer_snapshots_replace_older_ones_and_stale_ones_are_dropped() {
        let mut held = Held::default();
        let s = ConfigSnapshot {
            version: 5,
            ..Default::default()
        };
        assert_eq!(held.receive(update(3, None)).unwrap(), Outcome::Version);
        assert!(!held.complete_at(3), "a bare version is no configuration");
        assert_eq!(held.receive(update(5, Some(&s))).unwrap(), Outcome::Changed);
        assert!(held.complete_at(5));
        assert_eq!(held.receive(update(4, Some(&s))).unwrap(), Outcome::Stale);
        assert_eq!(held.receive(update(6, None)).unwrap(), Outcome::Version);
        assert!(held.complete_at(6) && !held.complete_at(7));
        let mut bad = update(7, None);
        bad.snapshot_json = b"{".to_vec().into();
        assert!(held.receive(bad).is_err());
        assert_eq!(held.version, 6, "a bad update changes nothing");
        assert_eq!(
            held.request("a").known_version,
            0,
            "after a refusal the next stream asks for a full snapshot"
        );
    }

    #[test]
    fn agents_receiving_the_same_snapshot_share_one_decode_and_others_decode_their_own() {
        let s = ConfigSnapshot {
            version: 5,
            ..Default::default()
        };
        let mut shared = Shared::default();
        let (mut a, mut b, mut c) = (Held::default(), Held::default(), Held::default());
        assert_eq!(
            a.receive_sharing(update(5, Some(&s)), &mut shared).unwrap(),
            Outcome::Changed
        );
        assert_eq!(
            b.receive_sharing(update(5, Some(&s)), &mut shared).unwrap(),
            Outcome::Changed
        );
        assert!(b.complete_at(5));
        assert_eq!((shared.decoded, shared.shared), (1, 1));
        // Same version, other bytes: decoded, never taken from another.
        let mut other = update(5, Some(&s));
        let mut text = serde_json::to_string(&s).unwrap();
        text.push(' ');
        other.snapshot_json = text.into_bytes().into();
        assert_eq!(
            c.receive_sharing(other, &mut shared).unwrap(),
            Outcome::Changed
        );
        assert_eq!((shared.decoded, shared.shared), (2, 1));
        // The staleness rule comes first: what is held is not replaced.
        assert_eq!(
            b.receive_sharing(update(5, Some(&s)), &mut shared).unwrap(),
            Outcome::Stale
        );
        assert_eq!((shared.decoded, shared.shared), (2, 1));
        // Bytes that do not decode are refused even when a snapshot of
        // that version is shared.
        let mut bad = update(6, None);
        bad.snapshot_json = b"{".to_vec().into();
        assert!(a.receive_sharing(bad, &mut shared).is_err());
    }

    #[test]
    fn agents_receiving_two_snapshots_in_turn_share_a_decode_of_each() {
        let (five, six) = (
            ConfigSnapshot {
                version: 5,
                ..Default::default()
            },
            ConfigSnapshot {
                version: 6,
                ..Default::default()
            },
        );
        let mut shared = Shared::default();
        // Two coordinators' snapshots, their agents interleaved.
        for _ in 0..3 {
            for s in [&five, &six] {
                let mut held = Held::default();
                held.receive_sharing(update(s.version, Some(s)), &mut shared)
                    .unwrap();
                assert!(held.complete_at(s.version));
            }
        }
        assert_eq!((shared.decoded, shared.shared), (2, 4));
    }

    #[test]
    fn a_delta_is_shared_only_by_agents_on_the_same_configuration() {
        let s = ConfigSnapshot {
            version: 5,
            ..Default::default()
        };
        let mut shared = Shared::default();
        let (mut a, mut b, mut c) = (Held::default(), Held::default(), Held::default());
        a.receive_sharing(update(5, Some(&s)), &mut shared).unwrap();
        b.receive_sharing(update(5, Some(&s)), &mut shared).unwrap();
        // c holds the same version from other bytes: its own lineage.
        let mut other = update(5, Some(&s));
        other.snapshot_json = [serde_json::to_vec(&s).unwrap(), b" ".to_vec()]
            .concat()
            .into();
        c.receive_sharing(other, &mut shared).unwrap();
        assert_eq!((shared.decoded, shared.shared), (2, 1));

        for held in [&mut a, &mut b, &mut c] {
            assert_eq!(
                held.receive_sharing(delta(5, 6, "x"), &mut shared).unwrap(),
                Outcome::Changed
            );
            assert!(held.complete_at(6));
        }
        // a decoded it; b, on a's lineage, took it; c, on another lineage
        // but holding an equal configuration, took it after comparing.
        assert_eq!((shared.decoded, shared.shared), (3, 3));
        assert_eq!(a.config, b.config);
        assert_eq!(a.config, c.config);

        // d holds another configuration at version 5: the same delta bytes
        // are decoded again, on d's own configuration.
        let mut t = s.clone();
        t.endpoint_generations
            .0
            .insert(ObjectName::new("ns", "other"), 3);
        let mut d = Held::default();
        d.receive_sharing(update(5, Some(&t)), &mut shared).unwrap();
        let before = shared.decoded;
        d.receive_sharing(delta(5, 6, "x"), &mut shared).unwrap();
        assert_eq!(
            shared.decoded,
            before + 1,
            "decoded on its own configuration"
        );
        assert_ne!(a.config, d.config);

        // A delta on the wrong base is refused whatever is shared, and
        // changes nothing held.
        let refused = b.receive_sharing(delta(5, 6, "x"), &mut shared);
        assert!(matches!(refused, Ok(Outcome::Stale)), "{refused:?}");
        assert!(b.receive_sharing(delta(4, 7, "y"), &mut shared).is_err());
        assert_eq!(b.version, 6);
        assert!(b.resync, "a refusal asks for a full snapshot");
        // Bytes that say another base than their update are refused too.
        let mut lying = delta(6, 7, "y");
        lying.base_version = 6;
        lying.version = 8;
        assert!(a.receive_sharing(lying, &mut shared).is_err());
    }

    /// Polls `f` once, as an executor woken for it would.
    fn poll_once<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    }

    #[test]
    fn agents_queued_behind_a_decoder_take_its_result() {
        let s = ConfigSnapshot {
            version: 5,
            ..Default::default()
        };
        let shared = tokio::sync::Mutex::new(Shared::default());
        let (mut a, mut b) = (Held::default(), Held::default());
        {
            // Small payloads, both agents queued on the lock.
            let mut a_gets =
                std::pin::pin!(a.receive_in_fleet(update(5, Some(&s)), &shared, usize::MAX));
            let mut b_gets =
                std::pin::pin!(b.receive_in_fleet(update(5, Some(&s)), &shared, usize::MAX));
            let held = shared.try_lock().unwrap();
            assert!(poll_once(a_gets.as_mut()).is_pending());
            assert!(poll_once(b_gets.as_mut()).is_pending());
            drop(held);
            // a decodes holding the lock; b, next in the queue, finds a's
            // result there.
            let a_got = poll_once(a_gets.as_mut());
            assert!(
                matches!(a_got, Poll::Ready(Ok(Outcome::Changed))),
                "{a_got:?}"
            );
            let b_got = poll_once(b_gets.as_mut());
            assert!(
                matches!(b_got, Poll::Ready(Ok(Outcome::Changed))),
                "{b_got:?}"
            );
        }
        let shared = shared.try_lock().unwrap();
        assert_eq!((shared.decoded, shared.shared), (1, 1));
        assert_eq!(a.lineage, b.lineage);
        assert_eq!(a.config, b.config);
    }

    /// Runs `f` to its end, for futures that never wait (no other holder
    /// of the lock).
    fn ready<F: std::future::Future>(f: F) -> F::Output {
        match poll_once(std::pin::pin!(f)) {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("waited with nobody else holding the lock"),
        }
    }

    #[test]
    fn in_the_fleet_a_lineage_is_compared_whole_once_and_joins_an_equal_one() {
        let s = ConfigSnapshot {
            version: 5,
            ..Default::default()
        };
        let mut t = s.clone();
        t.endpoint_generations
            .0
            .insert(ObjectName::new("ns", "other"), 3);
        let shared = tokio::sync::Mutex::new(Shared::default());
        let [mut a, mut b, mut c, mut d] = std::array::from_fn(|_| Held::default());
        let small = 1 << 20;
        for held in [&mut a, &mut b] {
            ready(held.receive_in_fleet(update(5, Some(&s)), &shared, small)).unwrap();
        }
        // c holds an equal configuration from other bytes: its own lineage.
        let mut other = update(5, Some(&s));
        other.snapshot_json = [serde_json::to_vec(&s).unwrap(), b" ".to_vec()]
            .concat()
            .into();
        ready(c.receive_in_fleet(other, &shared, small)).unwrap();
        // d holds another configuration at the same version.
        ready(d.receive_in_fleet(update(5, Some(&t)), &shared, small)).unwrap();
        let counts = |shared: &tokio::sync::Mutex<Shared>| {
            let shared = shared.try_lock().unwrap();
            (shared.decoded, shared.shared, shared.comparisons)
        };
        assert_eq!(counts(&shared), (3, 1, 0));

        for held in [&mut a, &mut b, &mut c, &mut d] {
            let got = ready(held.receive_in_fleet(delta(5, 6, "x"), &shared, small)).unwrap();
            assert_eq!(got, Outcome::Changed);
        }
        // a decoded; b (a's lineage) shared; c compared, found a's
        // configuration equal and shared; d compared, found it differs and
        // decoded on its own.
        assert_eq!(counts(&shared), (5, 3, 2));
        assert_eq!(a.config, c.config);
        assert_eq!(a.lineage, c.lineage, "c joined a's lineage");
        assert_ne!(a.config, d.config);

        for held in [&mut a, &mut b, &mut c, &mut d] {
            ready(held.receive_in_fleet(delta(6, 7, "y"), &shared, small)).unwrap();
        }
        // The next delta: b and c share a's decode without comparing; d,
        // known apart, decodes without comparing again.
        assert_eq!(counts(&shared), (7, 5, 2));
        assert_eq!(a.config, c.config);
        assert!(d.complete_at(7));
    }
}
