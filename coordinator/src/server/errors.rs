//! The one mapping from the coordinator's errors to gRPC statuses, for
//! every service it serves to proxies and operators (`FleetService`,
//! `AdminService`): which code, and when a follower names the leader in
//! `x-switchyard-leader` so the caller can go there.
//!
//! Raft's own service (`RaftService`, between coordinators) answers its
//! peers in `crate::raft` and is not mapped here.

use crate::raft::{Node, ProposeError};
use crate::state::CommandError;
use switchyard_proto::LEADER_HEADER;
use tonic::Status;
use tonic::metadata::MetadataValue;

impl From<ProposeError> for Status {
    fn from(error: ProposeError) -> Self {
        let message = error.to_string();
        let mut status = match &error {
            e if e.is_retryable() => Status::unavailable(message),
            ProposeError::Membership { .. } | ProposeError::ClusterMismatch { .. } => {
                Status::failed_precondition(message)
            }
            _ => Status::internal(message),
        };
        if let Some((_, addr)) = error.leader().filter(|_| error.is_retryable())
            && let Ok(value) = MetadataValue::try_from(addr)
        {
            status.metadata_mut().insert(LEADER_HEADER, value);
        }
        status
    }
}

/// A state machine's refusal: the request's fault (`INVALID_ARGUMENT`),
/// except what may succeed later without changing it.
impl From<CommandError> for Status {
    fn from(e: CommandError) -> Self {
        match e {
            CommandError::NotPending { .. }
            | CommandError::StaleDecision { .. }
            | CommandError::EvidenceOutdated { .. }
            | CommandError::StaleRegistration { .. }
            // The same apply succeeds once the other route is deleted.
            | CommandError::RouteNameTaken { .. } => Status::failed_precondition(e.to_string()),
            // Not a malformed request: the same apply succeeds once
            // something is deleted or the limit raised.
            CommandError::OverLimit { .. } | CommandError::ObjectTooLarge { .. } => {
                Status::resource_exhausted(e.to_string())
            }
            // A conflict with another client's apply of the same entry
            // (the leader never groups such applies): the same apply
            // succeeds when sent again.
            CommandError::NamedEarlierInEntry { .. } => Status::aborted(e.to_string()),
            CommandError::Invalid(_)
            | CommandError::Duplicate { .. }
            | CommandError::Empty
            | CommandError::InvalidProxy(_)
            | CommandError::NotADecision { .. }
            | CommandError::NotAnApply { .. } => Status::invalid_argument(e.to_string()),
        }
    }
}

/// This coordinator does not lead: `UNAVAILABLE`, naming the leader when
/// it knows one.
pub(crate) fn not_leader(node: &Node) -> Status {
    ProposeError::NotLeader {
        node_id: node.id(),
        leader: node.leader(),
    }
    .into()
}

/// This coordinator follows but has not heard from a leader lately (a
/// failover under way): `UNAVAILABLE` with no hint, so the caller tries
/// again rather than going to a leader that may be dead.
pub(crate) fn no_live_leader() -> Status {
    Status::unavailable(
        "this coordinator knows no live leader yet (an election may be under way); ask again",
    )
}

/// This coordinator leads in name only (no quorum): `UNAVAILABLE` with no
/// hint, so the caller tries the others and finds the majority's leader.
pub(crate) fn without_quorum() -> Status {
    Status::unavailable("this coordinator has lost contact with a quorum; ask another")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_errors_become_unavailable_with_the_leader() {
        let status = Status::from(ProposeError::NotLeader {
            node_id: 2,
            leader: Some((1, "127.0.0.1:7001".to_owned())),
        });
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(
            status
                .metadata()
                .get(LEADER_HEADER)
                .and_then(|v| v.to_str().ok()),
            Some("127.0.0.1:7001")
        );
        let status = Status::from(ProposeError::Membership {
            node_id: 1,
            reason: "x".to_owned(),
        });
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert!(status.metadata().get(LEADER_HEADER).is_none());
    }
}
