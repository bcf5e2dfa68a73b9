//! What one agent holds of the configuration stream, and how one
//! `ConfigUpdate` changes it: the only place that decodes the Watch
//! stream, so a new encoding (deltas, chunks) changes this module alone.
//!
//! Owns: the version and snapshot held, dropping stale updates, decoding.
//! Does not own: the stream itself (`agent::run_watch`) or what the
//! snapshot means to the agent (`view`).

use switchyard_proto::model::ConfigSnapshot;
use switchyard_proto::pb;

/// The configuration one agent holds.
#[derive(Debug, Default)]
pub struct Held {
    /// Newest version shown, on any stream.
    pub version: u64,
    /// The configuration at `version` (`None` before the first one).
    pub snapshot: Option<ConfigSnapshot>,
}

/// What one update did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not newer than what is held: dropped.
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
    /// Takes one update. A bare version before any configuration is
    /// held is kept as the version only; the next full one replaces it.
    pub fn receive(&mut self, update: &pb::ConfigUpdate) -> Result<Outcome, DecodeError> {
        if update.version <= self.version {
            return Ok(Outcome::Stale);
        }
        if update.snapshot_json.is_empty() {
            self.version = update.version;
            return Ok(Outcome::Version);
        }
        let snapshot: ConfigSnapshot =
            serde_json::from_slice(&update.snapshot_json).map_err(|e| DecodeError {
                version: update.version,
                reason: e.to_string(),
            })?;
        self.version = update.version;
        self.snapshot = Some(snapshot);
        Ok(Outcome::Changed)
    }

    /// Whether a complete configuration at `version` or newer is held.
    pub fn complete_at(&self, version: u64) -> bool {
        self.snapshot.is_some() && self.version >= version
    }
}

/// Bytes the update carried (for the fleet's counters).
pub fn update_bytes(update: &pb::ConfigUpdate) -> u64 {
    update.snapshot_json.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(version: u64, snapshot: Option<&ConfigSnapshot>) -> pb::ConfigUpdate {
        pb::ConfigUpdate {
            version,
            snapshot_json: snapshot.map_or_else(Vec::new, |s| serde_json::to_vec(s).unwrap()),
            coordinator_id: 1,
        }
    }

    #[test]
    fn newer_snapshots_replace_older_ones_and_stale_ones_are_dropped() {
        let mut held = Held::default();
        let s = ConfigSnapshot {
            version: 5,
            ..Default::default()
        };
        assert_eq!(held.receive(&update(3, None)).unwrap(), Outcome::Version);
        assert!(!held.complete_at(3), "a bare version is no configuration");
        assert_eq!(
            held.receive(&update(5, Some(&s))).unwrap(),
            Outcome::Changed
        );
        assert!(held.complete_at(5));
        assert_eq!(held.receive(&update(4, Some(&s))).unwrap(), Outcome::Stale);
        assert_eq!(held.receive(&update(6, None)).unwrap(), Outcome::Version);
        assert!(held.complete_at(6) && !held.complete_at(7));
        let mut bad = update(7, None);
        bad.snapshot_json = b"{".to_vec();
        assert!(held.receive(&bad).is_err());
        assert_eq!(held.version, 6, "a bad update changes nothing");
    }
}
