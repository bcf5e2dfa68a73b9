//! Errors of the Raft layer's public API, and their one conversion to gRPC
//! status.
//!
//! Owns: [`NodeError`] (starting a node), [`ProposeError`] (writes and
//! membership changes; retryable kinds apart from fatal ones, each carrying
//! the leader when known), the wire form of a forwarded proposal's failure
//! ([`ForwardError`]), and `impl From<ProposeError> for tonic::Status`.
//! Does not own: openraft's internal errors, which are mapped where they
//! occur, nor a command's own rejection — that is a valid
//! `CommandResponse`, not an error.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::db::StoreError;
use super::types::NodeId;

/// Why [`super::node::Node::start`] failed. All are fatal to the process.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// `--peers` was given but does not contain this node's id.
    #[error("--peers [{peers}] does not name this coordinator's id {id}")]
    NotInPeers {
        /// This node's id.
        id: NodeId,
        /// The peer list as given.
        peers: String,
    },
    /// The timing settings are inconsistent.
    #[error("invalid Raft settings for coordinator {id}: {reason}")]
    Settings {
        /// This node's id.
        id: NodeId,
        /// openraft's complaint.
        reason: String,
    },
    /// The store could not be opened (including: locked by another process).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// openraft refused to start on this store.
    #[error("coordinator {id}: cannot start Raft: {reason}")]
    Raft {
        /// This node's id.
        id: NodeId,
        /// openraft's error.
        reason: String,
    },
    /// Forming the cluster from `--peers` failed.
    #[error("coordinator {id}: cannot initialize the cluster with peers [{peers}]: {reason}")]
    Initialize {
        /// This node's id.
        id: NodeId,
        /// The peer list.
        peers: String,
        /// openraft's error.
        reason: String,
    },
}

/// A leader as clients need it: its Raft id and gRPC address.
pub type LeaderHint = Option<(NodeId, String)>;

/// Why a proposal or membership change did not produce a response.
///
/// Retryable kinds (see [`ProposeError::is_retryable`]) carry the leader
/// when it is known, so a client can retry there directly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// No leader is known, even after waiting. Nothing was proposed.
    #[error("coordinator {node_id} knows no Raft leader after waiting {waited:?} (it is {state})")]
    NoLeader {
        /// The node that waited.
        node_id: NodeId,
        /// Its Raft state (Follower, Candidate, Learner, ...).
        state: String,
        /// How long it waited.
        waited: Duration,
    },
    /// The node asked is not the leader (a forward reached a stale leader, or
    /// a membership change was sent to a follower). Nothing was proposed.
    #[error("coordinator {node_id} is not the leader{}", hint_text(.leader))]
    NotLeader {
        /// The node that refused.
        node_id: NodeId,
        /// The leader it knows of.
        leader: LeaderHint,
    },
    /// The leader could not be reached, or did not answer in time. The
    /// proposal may or may not have been applied.
    #[error("leader {leader_id} at {leader_addr} did not answer coordinator {node_id}: {reason}")]
    LeaderUnreachable {
        /// The forwarding node.
        node_id: NodeId,
        /// The leader it tried.
        leader_id: NodeId,
        /// The address it tried.
        leader_addr: String,
        /// Transport error or status.
        reason: String,
    },
    /// The leader accepted the write but it was not applied within the
    /// bound (for example the leader lost its quorum). It may still be
    /// applied later.
    #[error("coordinator {node_id}: {what} not applied within {waited:?}")]
    Timeout {
        /// The node that waited.
        node_id: NodeId,
        /// What was waited for.
        what: String,
        /// The bound.
        waited: Duration,
        /// The leader, when known.
        leader: LeaderHint,
    },
    /// Another membership change is still in progress. Nothing changed.
    #[error("coordinator {node_id} is busy: {reason}")]
    Busy {
        /// The leader that refused.
        node_id: NodeId,
        /// openraft's description of the change in progress.
        reason: String,
    },
    /// A membership change that cannot succeed as asked.
    #[error("membership change refused by coordinator {node_id}: {reason}")]
    Membership {
        /// The node that refused.
        node_id: NodeId,
        /// Why.
        reason: String,
    },
    /// The peer belongs to a different cluster (fingerprint mismatch).
    #[error("coordinator {node_id}: {reason}")]
    ClusterMismatch {
        /// The refusing or refused node.
        node_id: NodeId,
        /// The refusal, naming both peer lists.
        reason: String,
    },
    /// Raft on this node stopped (shutdown or storage failure), or a reply
    /// could not be decoded.
    #[error("coordinator {node_id}: {reason}")]
    Fatal {
        /// The node.
        node_id: NodeId,
        /// What failed.
        reason: String,
    },
}

fn hint_text(leader: &LeaderHint) -> String {
    match leader {
        Some((id, addr)) => format!("; leader is {id} at {addr}"),
        None => "; no leader known".to_owned(),
    }
}

impl ProposeError {
    /// True when retrying (here or at [`Self::leader`]) may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ProposeError::NoLeader { .. }
                | ProposeError::NotLeader { .. }
                | ProposeError::LeaderUnreachable { .. }
                | ProposeError::Timeout { .. }
                | ProposeError::Busy { .. }
        )
    }

    /// The leader to retry at, when known.
    pub fn leader(&self) -> Option<(NodeId, &str)> {
        match self {
            ProposeError::NotLeader { leader, .. } | ProposeError::Timeout { leader, .. } => {
                leader.as_ref().map(|(id, addr)| (*id, addr.as_str()))
            }
            ProposeError::LeaderUnreachable {
                leader_id,
                leader_addr,
                ..
            } => Some((*leader_id, leader_addr.as_str())),
            _ => None,
        }
    }
}

/// Why the leader side of `RaftService.Propose` produced no response; the
/// reply payload is the JSON of `Result<CommandResponse, ForwardError>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForwardError {
    /// The receiver is not the leader (it never forwards again, so a stale
    /// view cannot make a request loop).
    NotLeader {
        /// The leader it knows of.
        leader: LeaderHint,
    },
    /// The receiver is the leader but could not apply the command in time.
    Timeout {
        /// What the leader reported.
        reason: String,
    },
    /// Raft on the receiver stopped.
    Fatal {
        /// What the leader reported.
        reason: String,
    },
}
