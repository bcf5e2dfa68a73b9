//! Membership changes of the Raft group: adding and removing coordinators.
//!
//! Owns: the leader-only flow of `AddCoordinator` / `RemoveCoordinator` —
//! learner first, bounded wait for catch-up (by log or snapshot), then
//! promotion — and mapping openraft's membership errors. Does not own: the
//! gRPC surface (the admin service calls these) or forwarding: a follower
//! answers "not leader" with the leader's address and the client retries
//! there, because a membership change is not a state-machine command that
//! `RaftService.Propose` could carry.

use std::collections::{BTreeMap, BTreeSet};

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::raft::ClientWriteResponse;
use openraft::{ChangeMembers, Membership};
use tokio::time::Instant;

use super::error::ProposeError;
use super::node::Node;
use super::service::leader_hint;
use super::types::{Node as PeerNode, NodeId, RaftMetrics, TypeConfig};

impl Node {
    /// Fails with a leader hint unless this node is the leader. Membership
    /// changes run on the leader only; the caller retries at the hint.
    async fn require_leader(&self) -> Result<(), ProposeError> {
        let deadline = Instant::now() + self.inner.settings.leader_wait;
        let (leader_id, leader_addr) = self.wait_for_leader(deadline, false).await?;
        if leader_id == self.inner.id {
            Ok(())
        } else {
            Err(ProposeError::NotLeader {
                node_id: self.inner.id,
                leader: Some((leader_id, leader_addr)),
            })
        }
    }

    /// Adds coordinator `id` at `addr` as a voter: first as a learner, waits
    /// (bounded) for it to catch up — by log or snapshot — then promotes it.
    /// Leader only: a follower answers [`ProposeError::NotLeader`] with the
    /// leader's address. Idempotent. Returns the voters afterwards.
    pub async fn add_coordinator(
        &self,
        id: NodeId,
        addr: String,
    ) -> Result<BTreeMap<NodeId, String>, ProposeError> {
        self.require_leader().await?;
        let me = self.inner.id;
        let timeout = self.inner.settings.propose_timeout;
        {
            let metrics = self.inner.raft.metrics();
            let metrics = metrics.borrow();
            let membership = metrics.membership_config.membership();
            if let Some(existing) = membership.get_node(&id)
                && existing.addr != addr
            {
                return Err(ProposeError::Membership {
                    node_id: me,
                    reason: format!(
                        "coordinator {id} is already a member at {}, not {addr}; remove it first",
                        existing.addr
                    ),
                });
            }
            if membership.voter_ids().any(|voter| voter == id) {
                return Ok(voters_of(&metrics));
            }
        }
        tracing::info!(node_id = me, new_id = id, %addr, "adding coordinator as learner");
        let added = self
            .membership_write(
                self.inner
                    .raft
                    .add_learner(id, PeerNode::new(addr.clone()), false),
                "add learner",
            )
            .await?;
        let wait = self
            .inner
            .raft
            .wait(Some(timeout))
            .metrics(
                |m| {
                    m.replication
                        .as_ref()
                        .and_then(|r| r.get(&id))
                        .and_then(|matched| matched.as_ref())
                        .is_some_and(|matched| matched.index >= added.log_id.index)
                },
                "new coordinator caught up",
            )
            .await;
        if wait.is_err() {
            return Err(ProposeError::Timeout {
                node_id: me,
                what: format!(
                    "catch-up of new coordinator {id} at {addr} (it stays a learner; retry to promote)"
                ),
                waited: timeout,
                leader: Some((me, self.advertised_addr())),
            });
        }
        tracing::info!(
            node_id = me,
            new_id = id,
            "promoting caught-up coordinator to voter"
        );
        let promoted = self
            .membership_write(
                self.inner
                    .raft
                    .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false),
                "promote to voter",
            )
            .await?;
        Ok(self.voters_after(&promoted))
    }

    /// Removes coordinator `id` from the group (voter or learner). Leader
    /// only, like [`Node::add_coordinator`]. Idempotent. Returns the voters
    /// afterwards.
    pub async fn remove_coordinator(
        &self,
        id: NodeId,
    ) -> Result<BTreeMap<NodeId, String>, ProposeError> {
        self.require_leader().await?;
        let (is_voter, is_node) = {
            let metrics = self.inner.raft.metrics();
            let metrics = metrics.borrow();
            let membership = metrics.membership_config.membership();
            (
                membership.voter_ids().any(|voter| voter == id),
                membership.get_node(&id).is_some(),
            )
        };
        tracing::info!(
            node_id = self.inner.id,
            removed_id = id,
            is_voter,
            "removing coordinator"
        );
        let change = if is_voter {
            // retain = false also drops it from the node list.
            ChangeMembers::RemoveVoters(BTreeSet::from([id]))
        } else if is_node {
            ChangeMembers::RemoveNodes(BTreeSet::from([id]))
        } else {
            return Ok(self.voters());
        };
        let removed = self
            .membership_write(
                self.inner.raft.change_membership(change, false),
                "remove coordinator",
            )
            .await?;
        Ok(self.voters_after(&removed))
    }

    /// The voters a membership write produced. Taken from the write's own
    /// response because the metrics may not show the change yet.
    fn voters_after(&self, response: &ClientWriteResponse<TypeConfig>) -> BTreeMap<NodeId, String> {
        match &response.membership {
            Some(membership) => voters_in(membership),
            None => self.voters(),
        }
    }

    /// Runs one membership write with the proposal bound, mapping errors.
    async fn membership_write<F>(
        &self,
        write: F,
        what: &'static str,
    ) -> Result<ClientWriteResponse<TypeConfig>, ProposeError>
    where
        F: std::future::Future<
                Output = Result<
                    ClientWriteResponse<TypeConfig>,
                    RaftError<NodeId, ClientWriteError<NodeId, PeerNode>>,
                >,
            >,
    {
        let me = self.inner.id;
        let timeout = self.inner.settings.propose_timeout;
        match tokio::time::timeout(timeout, write).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
                Err(ProposeError::NotLeader {
                    node_id: me,
                    leader: match (forward.leader_id, forward.leader_node) {
                        (Some(id), Some(node)) => Some((id, node.addr)),
                        (id, _) => leader_hint(&self.inner.raft, id),
                    },
                })
            }
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::InProgress(e),
            )))) => Err(ProposeError::Busy {
                node_id: me,
                reason: format!("{what}: {e}"),
            }),
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e)))) => {
                Err(ProposeError::Membership {
                    node_id: me,
                    reason: format!("{what}: {e}"),
                })
            }
            Ok(Err(RaftError::Fatal(fatal))) => Err(ProposeError::Fatal {
                node_id: me,
                reason: format!("{what}: Raft stopped: {fatal}"),
            }),
            Err(_elapsed) => Err(ProposeError::Timeout {
                node_id: me,
                what: what.to_owned(),
                waited: timeout,
                leader: self.leader(),
            }),
        }
    }

    fn advertised_addr(&self) -> String {
        self.voters().remove(&self.inner.id).unwrap_or_default()
    }
}

/// Voters of the membership in `metrics`, `id -> address`.
pub(super) fn voters_of(metrics: &RaftMetrics) -> BTreeMap<NodeId, String> {
    voters_in(metrics.membership_config.membership())
}

/// Voters of `membership`, `id -> address`.
fn voters_in(membership: &Membership<NodeId, PeerNode>) -> BTreeMap<NodeId, String> {
    membership
        .voter_ids()
        .map(|id| {
            let addr = membership
                .get_node(&id)
                .map(|n| n.addr.clone())
                .unwrap_or_default();
            (id, addr)
        })
        .collect()
}
