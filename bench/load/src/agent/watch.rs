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
//! # One decode per snapshot for the whole fleet
//!
//! 200 agents resyncing at once each receive the same full snapshot (14 MB
//! of JSON at 10,000 routes). Decoding and indexing it costs about 0.1 s,
//! so 200 separate decodes would make the tool, not the coordinators, the
//! bottleneck of the resync figure on a small machine. [`SharedSnapshots`]
//! keeps the last snapshot decoded with its bytes: an agent whose
//! assembled snapshot has the same version and byte for byte the same
//! payload (compared in full) starts from that builder — an O(1) copy,
//! its maps being persistent — instead of decoding again. Every agent
//! still receives every byte over its own stream; only the work of
//! turning identical bytes into identical indexes is shared.

use super::view::Builder;
use bytes::Bytes;
use switchyard_proto::pb;
use switchyard_proto::watch::{self as rules, Assembler, Decoded, Payload};

/// The last whole snapshot some agent decoded: its version, its payload
/// and the builder made of it.
#[derive(Debug, Default)]
pub struct SharedSnapshots {
    last: Option<(u64, Bytes, Builder)>,
    /// Snapshots decoded, and snapshots taken from here instead.
    pub decoded: u64,
    /// See `decoded`.
    pub shared: u64,
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
        }
    }

    /// Takes one message of the stream, by the proxies' own receiving
    /// rules ([`switchyard_proto::watch`]). A refusal changes nothing held
    /// and asks the next stream for a full snapshot.
    pub fn receive(&mut self, update: pb::ConfigUpdate) -> Result<Outcome, DecodeError> {
        self.receive_sharing(update, &mut SharedSnapshots::default())
    }

    /// [`Held::receive`], taking a whole snapshot from `shared` when it
    /// holds the same bytes at the same version, and leaving the one it
    /// decodes there for the next agent.
    pub fn receive_sharing(
        &mut self,
        update: pb::ConfigUpdate,
        shared: &mut SharedSnapshots,
    ) -> Result<Outcome, DecodeError> {
        let version = update.version;
        let refused = |held: &mut Held, reason: String| {
            held.resync = true;
            DecodeError { version, reason }
        };
        let whole = match self.assembler.push(update) {
            Ok(Some(whole)) => whole,
            Ok(None) => return Ok(Outcome::Stale),
            Err(reason) => return Err(refused(self, reason)),
        };
        let snapshot_bytes = match &whole.payload {
            Some((Payload::Snapshot, bytes))
                if !rules::snapshot_is_stale(self.version, self.resync, whole.version) =>
            {
                if let Some((v, b, builder)) = &shared.last
                    && *v == whole.version
                    && b == bytes
                {
                    shared.shared += 1;
                    self.version = whole.version;
                    self.config = Some(builder.clone());
                    self.resync = false;
                    return Ok(Outcome::Changed);
                }
                Some(bytes.clone())
            }
            _ => None,
        };
        let holding = self.config.is_some();
        match rules::decode(self.version, holding, self.resync, whole) {
            Ok(Decoded::Stale) => Ok(Outcome::Stale),
            Ok(Decoded::Version(v)) => {
                self.version = v;
                Ok(Outcome::Version)
            }
            Ok(Decoded::Snapshot(v, snapshot)) => {
                let builder = Builder::of(&snapshot);
                if let Some(bytes) = snapshot_bytes {
                    shared.decoded += 1;
                    shared.last = Some((v, bytes, builder.clone()));
                }
                self.version = v;
                self.config = Some(builder);
                self.resync = false;
                Ok(Outcome::Changed)
            }
            Ok(Decoded::Delta(v, delta)) => {
                let applied = match self.config.as_mut() {
                    Some(config) => config.apply(&delta).map_err(|e| e.to_string()),
                    None => Err("a delta came before any snapshot".into()),
                };
                match applied {
                    Ok(()) => {
                        self.version = v;
                        Ok(Outcome::Changed)
                    }
                    Err(reason) => Err(refused(self, reason)),
                }
            }
            Err(rules::Refused::OutOfSequence(reason)) => Err(refused(self, reason)),
            Err(rules::Refused::Decode(e)) => Err(refused(self, e.to_string())),
        }
    }

    /// Whether a complete configuration at `version` or newer is held.
    pub fn complete_at(&self, version: u64) -> bool {
        self.config.is_some() && self.version >= version
    }
}

/// Bytes the update carried (for the fleet's counters).
pub fn update_bytes(update: &pb::ConfigUpdate) -> u64 {
    (update.snapshot_json.len() + update.delta_json.len()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    use switchyard_proto::model::ConfigSnapshot;

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
        let mut shared = SharedSnapshots::default();
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
}
