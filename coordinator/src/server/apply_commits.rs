//! The leader's side of an apply that carries its own commits
//! (`crate::cutover` `with_apply`): judge the apply on a copy of the
//! engine, propose the apply and its commits as one entry, then count and
//! log each commit the state machine accepted as the leader loop counts
//! its own, and hand it to the loop for the apply-to-Ready histogram.
//!
//! Owns: [`Coordinator::propose_apply`], the one way an apply is proposed
//! (the admin `Apply` RPC and the binary's in-process writes). Does not
//! own: which commits an apply carries (the engine) or their fence (the
//! state machine). On a follower, or a leader that may not judge yet, the
//! apply goes alone, exactly as before.

use super::{Coordinator, now_ms};
use crate::cutover::{CutoverEngine, Decision};
use crate::raft::ProposeError;
use crate::state::{Command, CommandResponse, Outcome};
use switchyard_proto::model::{ObjectName, Resource};

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
    /// change to the fleet). A follower forwards the apply to the leader.
    pub(crate) async fn propose_apply(
        &self,
        resources: Vec<Resource>,
    ) -> Result<CommandResponse, ProposeError> {
        let apply = self.apply_command(resources);
        let received_ms = now_ms();
        let commits = self.commits_with_apply(&apply, received_ms);
        let response = self.propose(Decision::with_apply(apply, &commits)).await?;
        if let Ok(outcome) = &response.0 {
            self.carried_with_apply(&commits, outcome, received_ms);
        }
        Ok(response)
    }

    /// The commits `apply` can carry: none unless it names routes to
    /// judge and this coordinator leads with a quorum. The engine is then
    /// copied under its lock (O(P)) and the copy judged without it, as
    /// the leader loop does; what the copy learns (the registry brought
    /// up to date) is not kept.
    fn commits_with_apply(&self, apply: &Command, now: u64) -> Vec<Decision> {
        if !CutoverEngine::judges_apply(apply) || !self.leads_with_quorum() {
            return Vec::new();
        }
        let Some(engine) = self.with_engine(|engine| engine.clone()) else {
            return Vec::new();
        };
        let state = self.node.state().borrow().clone();
        engine.commits_with_apply(&state, apply, now)
    }

    /// Counts, logs and hands on each commit the entry carried out (its
    /// answer in `outcome.decisions`, its generation the one the apply
    /// gave the route); one refused leaves its route pending for a pass.
    fn carried_with_apply(&self, commits: &[Decision], outcome: &Outcome, received_ms: u64) {
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
