//! The fence on the leader's decisions: a commit, abandon or expiry is
//! carried out only in the term of the leader that made it, and a commit on
//! evidence only while the endpoints it rests on are still the current
//! ones.
//!
//! Why in the state machine and not (only) in the leader: openraft answers a
//! proposal whose entry was truncated after a step-down with "forward to
//! the leader"; a decision re-proposed that way lands in the *new* leader's
//! term, possibly inside its grace period or after endpoints changed. The
//! entry's log position is known at apply time on every replica, so the
//! fence is as deterministic as the rest of `apply`, and no path that
//! carries a decision into the log — forwarded, retried or replayed — can
//! get around it.
//!
//! A batch of decisions (`Command::Decisions`, one entry per leader pass)
//! goes through the same fence decision by decision: each is answered on
//! its own, and one refused leaves the others standing. So do the commits
//! an apply carries (`Command::ApplyAndCommit`), after the apply.

use super::command::{Command, CommandError, DecisionBasis, Outcome};
use super::{LogPosition, ReplicatedState};
use std::collections::BTreeMap;
use switchyard_proto::model::ObjectName;

/// Refuses a decision that reached the log in another term than its own.
pub(super) fn check_term(basis: &DecisionBasis, at: LogPosition) -> Result<(), CommandError> {
    // Test-only fault: carry decisions out in any term.
    #[cfg(feature = "fault-injection")]
    if super::faults::get().ignore_decision_term {
        return Ok(());
    }
    if basis.term != at.term {
        return Err(CommandError::StaleDecision {
            decided_term: basis.term,
            entry_term: at.term,
        });
    }
    Ok(())
}

impl ReplicatedState {
    /// Refuses a commit on evidence when the backends its pending spec needs
    /// now are not exactly those the evidence covered, at the same endpoint
    /// generations: a Service appeared or vanished, or endpoints moved on
    /// between the decision and this entry. The caller has checked that
    /// `generation` is pending.
    pub(super) fn check_evidence_basis(
        &self,
        route: &ObjectName,
        generation: u64,
        basis: &DecisionBasis,
    ) -> Result<(), CommandError> {
        let outdated = |detail: String| CommandError::EvidenceOutdated {
            route: route.to_string(),
            generation,
            detail,
        };
        let Some(pending) = self.routes.get(route).and_then(|r| r.pending.as_ref()) else {
            return Ok(());
        };
        let needed = self.required_backends(&pending.target.spec);
        if needed.len() != basis.endpoints.len() {
            return Err(outdated(format!(
                "it needs {} backends now, the evidence covered {}",
                needed.len(),
                basis.endpoints.len()
            )));
        }
        for (backend, covered) in &basis.endpoints {
            match needed.get(backend) {
                Some(Some(now)) if now == covered => {}
                Some(Some(now)) => {
                    return Err(outdated(format!(
                        "{backend} is at endpoint generation {now}, the evidence covered {covered}"
                    )));
                }
                Some(None) => {
                    return Err(outdated(format!("{backend} no longer exists")));
                }
                None => {
                    return Err(outdated(format!("{backend} is no longer needed")));
                }
            }
        }
        Ok(())
    }

    /// Each decision of a batch on its own: fenced and answered as if it
    /// had its own entry at `at`. The batch's outcome gathers the accepted
    /// ones' changes and routes; each answer is in `decisions`.
    pub(super) fn carry_out_decisions(
        &mut self,
        at: LogPosition,
        decisions: &[Command],
    ) -> Result<Outcome, CommandError> {
        if decisions.is_empty() {
            return Err(CommandError::Empty);
        }
        let mut batch = Outcome::default();
        for decision in decisions {
            let answer = if decision.is_decision() {
                self.carry_out(at, decision)
            } else {
                Err(CommandError::NotADecision {
                    command: decision.kind_name().into(),
                })
            };
            if let Ok(outcome) = &answer {
                batch.changes.extend(outcome.changes.iter().cloned());
                batch.routes.extend(outcome.routes.iter().cloned());
            }
            batch.decisions.push(answer);
        }
        Ok(batch)
    }

    /// An apply, then each commit its leader decided with it, fenced and
    /// answered on its own as [`Command::CommitTransition`] for the
    /// generation this apply gave the route (the one its answer names):
    /// a route the apply left unchanged, withdrew or did not name is not
    /// committed. A refused apply refuses the whole entry; a refused
    /// commit leaves its route pending and the apply standing.
    pub(super) fn carry_out_apply_and_commits(
        &mut self,
        at: LogPosition,
        apply: &Command,
        commits: &[(ObjectName, DecisionBasis)],
    ) -> Result<Outcome, CommandError> {
        if !matches!(apply, Command::Apply { .. }) {
            return Err(CommandError::NotAnApply {
                command: apply.kind_name().into(),
            });
        }
        let mut outcome = self.carry_out(at, apply)?;
        let given: BTreeMap<&ObjectName, u64> =
            outcome.routes.iter().map(|(name, g)| (name, *g)).collect();
        let mut answers = Vec::with_capacity(commits.len());
        for (route, basis) in commits {
            let answer = match given.get(route) {
                Some(&generation) => {
                    self.commit_transition(at, route, generation, false, Some(basis))
                }
                None => Err(CommandError::NotPending {
                    route: route.to_string(),
                    generation: 0,
                    current: "the apply did not name it".into(),
                }),
            };
            answers.push(answer);
        }
        for answer in answers.iter().flatten() {
            outcome.changes.extend(answer.changes.iter().cloned());
        }
        outcome.decisions = answers;
        Ok(outcome)
    }
}
