//! Settings of a Raft node: what the CLI (or a test) decides.
//!
//! Owns: [`RaftSettings`] (timings and log compaction) with production
//! defaults, [`NodeConfig`] (identity, peers, data dir), and their
//! translation to `openraft::Config`. Does not own: flag parsing (the
//! binary's) or validation beyond what openraft checks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use openraft::SnapshotPolicy;

use super::types::NodeId;

/// Raft timings and compaction. Tests shrink the timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftSettings {
    /// How often the leader sends heartbeats.
    pub heartbeat_interval: Duration,
    /// Lower bound of the randomized election timeout.
    pub election_timeout_min: Duration,
    /// Upper bound of the randomized election timeout.
    pub election_timeout_max: Duration,
    /// Deadline of each Raft RPC (vote, append, one snapshot chunk, a
    /// forwarded proposal) and of each TCP connect.
    pub rpc_timeout: Duration,
    /// Build a snapshot (and allow purging the log) after this many applied
    /// entries since the last one.
    pub snapshot_after_logs: u64,
    /// Entries already in a snapshot that are kept anyway, so a briefly
    /// lagging follower catches up from the log instead of a snapshot.
    pub keep_logs_after_snapshot: u64,
    /// How long a proposal waits for a leader to be known.
    pub leader_wait: Duration,
    /// How long a proposal (or membership change, or a new coordinator's
    /// catch-up) waits to be applied.
    pub propose_timeout: Duration,
    /// Most entries one AppendEntries carries (openraft reads and decodes
    /// that many from the log before sending any).
    pub max_entries_per_append: u64,
    /// Most bytes of entries one AppendEntries carries (JSON); the first
    /// entry goes whatever its size. Keeps each request quick to send and
    /// decode, far inside the RPC deadline and the message limit, however
    /// large the entries a follower lacks.
    pub append_budget_bytes: usize,
}

impl Default for RaftSettings {
    fn default() -> Self {
        RaftSettings {
            heartbeat_interval: Duration::from_millis(100),
            election_timeout_min: Duration::from_millis(400),
            election_timeout_max: Duration::from_millis(800),
            rpc_timeout: Duration::from_secs(1),
            snapshot_after_logs: 5000,
            keep_logs_after_snapshot: 1000,
            leader_wait: Duration::from_secs(3),
            propose_timeout: Duration::from_secs(10),
            // Reading 64 entries is milliseconds even when each is a group
            // of 64 applies (tens of KiB); the byte budget cuts what goes
            // when they are larger (a bulk import's thousand objects).
            max_entries_per_append: 64,
            append_budget_bytes: 2 * 1024 * 1024,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl RaftSettings {
    /// The openraft configuration these settings describe, validated.
    pub fn to_openraft(&self) -> Result<openraft::Config, Box<openraft::ConfigError>> {
        openraft::Config {
            cluster_name: "switchyard".to_owned(),
            heartbeat_interval: millis(self.heartbeat_interval),
            election_timeout_min: millis(self.election_timeout_min),
            election_timeout_max: millis(self.election_timeout_max),
            install_snapshot_timeout: millis(self.rpc_timeout),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_after_logs),
            max_in_snapshot_log_to_keep: self.keep_logs_after_snapshot,
            max_payload_entries: self.max_entries_per_append,
            // Chunks travel as JSON (about 4x their size); keep them well
            // under the gRPC message limit and quick to send.
            snapshot_max_chunk_size: 1024 * 1024,
            ..Default::default()
        }
        .validate()
        .map_err(Box::new)
    }
}

/// Everything needed to start a [`super::node::Node`].
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This coordinator's Raft id.
    pub id: NodeId,
    /// The initial membership, `id -> HOST:PORT`, identical on every
    /// coordinator at formation. Empty: join mode (the node waits to be
    /// added with `AddCoordinator`).
    pub peers: BTreeMap<NodeId, String>,
    /// The gRPC address other coordinators reach this one at.
    pub advertise_addr: String,
    /// Where the sled store lives.
    pub data_dir: PathBuf,
    /// Timings and compaction.
    pub raft: RaftSettings,
    /// Address outgoing Raft connections leave from (`None`: the
    /// system's choice).
    pub source_ip: Option<std::net::IpAddr>,
    /// How Raft connections to peers are secured.
    pub security: switchyard_tls::Security,
}
