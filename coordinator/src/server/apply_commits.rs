//! The leader's side of an apply that carries its own commits
//! (`crate::cutover` `with_apply`): judge the applies of a group on a copy
//! of the engine (the group, one entry, is `apply_group`'s), then count
//! and log each commit the state machine accepted as the leader loop
//! counts its own, and hand it to the loop for the apply-to-Ready
//! histogram.
//!
//! Owns: [`Coordinator::propose_apply`], the one way an apply is proposed
//! (the admin `Apply` RPC and the binary's in-process writes). Does not
//! own: which commits an apply carries (the engine) or their fence (the
//! state machine). On a follower, or a leader that may not judge yet, the
//! applies go without commits.

use super::apply_group::QueuedApply;
use super::{Coordinator, now_ms};
use crate::cutover::{CutoverEngine, Decision};
use crate::raft::ProposeError;
use crate::state::{Command, CommandResponse, Outcome};
use switchyard_proto::model::{ObjectName, Resource};
use tokio::sync::{mpsc, oneshot};

/// A commit carried by its apply, for the leader loop's apply-to-Ready
/// histogram.
#[derive(Debug)]
pub(super) struct CommittedWithApply {
    /// The route.
    pub route: ObjectName,
    /// The generation committed.
    pub generation: u64,
    /// When this leader received the apply, by its own clock.
    pub received_ms: u64,
}

impl Coordinator {
    /// Proposes `resources` as one apply, with this coordinator's cutover
    /// defaults and store limits; on the leader, with the commit of every
    /// route of the apply the fleet is already ready for (one entry, one
    /// change to the fleet). Goes through the group commit
    /// (`apply_group`): in an entry of its own, or with the applies of
    /// other callers that arrived while the previous group was in flight.
    /// A follower forwards the apply (or the group) to the leader.
    pub(crate) async fn propose_apply(
        &self,
        resources: Vec<Resource>,
    ) -> Result<CommandResponse, ProposeError> {
        let (reply, answer) = oneshot::channel();
        let queued = QueuedApply {
            apply: self.apply_command(resources),
            received_ms: now_ms(),
            reply,
        };
        if let Err(mpsc::error::SendError(queued)) = self.applies.send(queued) {
            // No group task (the coordinator is stopping): alone, here.
            self.propose_group(vec![queued]).await;
        }
        answer.await.unwrap_or_else(|_| {
            Err(ProposeError::Fatal {
                node_id: self.node.id(),
                reason: "the coordinator stopped before the apply was answered".into(),
            })
        })
    }

    /// The commits each of `applies` (to go in one entry, in this order)
    /// can carry: none unless one names routes to judge and this
    /// coordinator leads with a quorum. The engine is then copied under
    /// its lock (O(P)) and the copy judged without it, as the leader loop
    /// does; what the copy learns (the registry brought up to date) is not
    /// kept.
    pub(super) fn commits_with_applies(&self, applies: &[Command], now: u64) -> Vec<Vec<Decision>> {
        let none = || vec![Vec::new(); applies.len()];
        if !applies.iter().any(CutoverEngine::judges_apply) || !self.leads_with_quorum() {
            return none();
        }
        let Some(engine) = self.with_engine(|engine| engine.clone()) else {
            return none();
        };
        let state = self.node.state().borrow().clone();
        engine.commits_with_applies(&state, applies, now)
    }

    /// Counts, logs and hands on each commit the entry carried out (its
    /// answer in `outcome.decisions`, its generation the one the apply
    /// gave the route); one refused leaves its route pending for a pass.
    pub(super) fn carried_with_apply(
        &self,
        commits: &[Decision],
        outcome: &Outcome,
        received_ms: u64,
    ) {
        for (decision, answer) in commits.iter().zip(&outcome.decisions) {
            let Decision::Commit { route, summary, .. } = decision else {
                continue;
            };
            let Some(&(_, generation)) = outcome.routes.iter().find(|(name, _)| name == route)
            else {
                continue;
            };
            if let Err(e) = answer {
                tracing::debug!(route = %route, error = %e, "commit with the apply refused; the route stays pending for the leader loop");
                continue;
            }
            tracing::info!(route = %route, generation, evidence = %summary, "cutover committed with its apply");
            let m = &self.metrics;
            m.commits.inc();
            m.apply_to_commit
                .observe(now_ms().saturating_sub(received_ms) as f64 / 1000.0);
            self.committed_with_apply
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(CommittedWithApply {
                    route: route.clone(),
                    generation,
                    received_ms,
                });
        }
    }

    /// The commits carried by applies since the last call, for the leader
    /// loop.
    pub(super) fn take_committed_with_apply(&self) -> Vec<CommittedWithApply> {
        std::mem::take(
            &mut *self
                .committed_with_apply
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }
}
