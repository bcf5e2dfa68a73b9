//! The openraft type configuration, declared in exactly one place.
//!
//! Owns: which concrete types openraft is instantiated with (node ids, node
//! descriptors, log payloads, responses, snapshot data, runtime) and short
//! aliases for the generic openraft types every other raft module names.
//! Does not own: any behaviour — the store, network and node modules do.

use std::sync::Arc;

use crate::state::{Command, CommandResponse};

/// Raft node id of a coordinator (the `--id` flag).
pub type NodeId = u64;

/// What the cluster knows about a member: its gRPC address, `HOST:PORT`.
pub type Node = openraft::BasicNode;

openraft::declare_raft_types!(
    /// switchyard's openraft type configuration: log entries carry a
    /// state-machine [`Command`] (shared: an entry read back from the
    /// newest entries kept decoded is a count, not a copy; its JSON is the
    /// command's own), applying one yields a [`CommandResponse`],
    /// snapshots are files holding the JSON of the replicated state (read
    /// and written as streams, sent in chunks).
    pub TypeConfig:
        D = Arc<Command>,
        R = CommandResponse,
        NodeId = NodeId,
        Node = Node,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The Raft handle for this configuration.
pub type Raft = openraft::Raft<TypeConfig>;
/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id (leader term and node, index).
pub type LogId = openraft::LogId<NodeId>;
/// A persisted vote.
pub type Vote = openraft::Vote<NodeId>;
/// A membership config together with the log id that introduced it.
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
/// Metadata of a state-machine snapshot.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
/// A snapshot: metadata plus readable data.
pub type Snapshot = openraft::storage::Snapshot<TypeConfig>;
/// A storage error as openraft expects it.
pub type StorageError = openraft::StorageError<NodeId>;
/// Raft metrics for this configuration.
pub type RaftMetrics = openraft::RaftMetrics<NodeId, Node>;
/// Log state (last purged and last present log id).
pub type LogState = openraft::storage::LogState<TypeConfig>;
