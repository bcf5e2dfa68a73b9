//! [`Decision`]: what the leader should propose, and the one mapping from a
//! decision to the fenced Raft command that carries it out. The leader loop
//! and the simulation both use [`Decision::command`], so the simulation
//! checks the commands the coordinators really write.

use crate::state::{Command, CommandError, CommandResponse, DecisionBasis, Outcome};
use switchyard_proto::model::ObjectName;

/// What the leader should propose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The pending generation met its policy (or timed out with `force`).
    Commit {
        /// The route.
        route: ObjectName,
        /// The pending generation.
        generation: u64,
        /// True when forced by the on-timeout action.
        forced: bool,
        /// The evidence summary at the time, for logs.
        summary: String,
        /// The deciding term and, for a commit on evidence, the endpoint
        /// generations the evidence covered.
        basis: DecisionBasis,
    },
    /// The pending generation timed out with `keep-old`.
    Abandon {
        /// The route.
        route: ObjectName,
        /// The pending generation.
        generation: u64,
        /// Why (shown in status).
        reason: String,
        /// The deciding leader's term.
        term: u64,
    },
    /// A proxy's lease expired.
    ExpireProxy {
        /// The proxy id.
        id: String,
        /// The registration whose lease expired.
        registration: u64,
        /// The deciding leader's term.
        term: u64,
    },
}

impl Decision {
    /// The Raft command that carries this decision out — only in the
    /// deciding leader's term, and (for a commit on evidence) only while
    /// the endpoints it covered are current.
    pub fn command(&self) -> Command {
        match self {
            Decision::Commit {
                route,
                generation,
                forced,
                basis,
                ..
            } => Command::CommitTransition {
                route: route.clone(),
                generation: *generation,
                forced: *forced,
                basis: Some(basis.clone()),
            },
            Decision::Abandon {
                route,
                generation,
                reason,
                term,
            } => Command::AbandonTransition {
                route: route.clone(),
                generation: *generation,
                reason: reason.clone(),
                basis: Some(DecisionBasis {
                    term: *term,
                    endpoints: Vec::new(),
                }),
            },
            Decision::ExpireProxy {
                id,
                registration,
                term,
            } => Command::ExpireProxy {
                id: id.clone(),
                registration: *registration,
                basis: DecisionBasis {
                    term: *term,
                    endpoints: Vec::new(),
                },
            },
        }
    }

    /// The one Raft command that carries out every decision of a pass:
    /// the decision's own command when there is one (the form every
    /// coordinator version reads), a [`Command::Decisions`] batch when
    /// there are more; `None` when there is nothing to do.
    pub fn batch(decisions: &[Decision]) -> Option<Command> {
        match decisions {
            [] => None,
            [one] => Some(one.command()),
            many => Some(Command::Decisions {
                decisions: many.iter().map(Decision::command).collect(),
            }),
        }
    }

    /// Each decision's own answer from the answer to
    /// [`Decision::batch`]`(decisions)`, in order.
    pub fn answers(
        decisions: &[Decision],
        response: CommandResponse,
    ) -> Vec<Result<Outcome, CommandError>> {
        match (decisions, response.0) {
            ([_], single) => vec![single],
            (_, Ok(batch)) if batch.decisions.len() == decisions.len() => batch.decisions,
            // The batch as a whole refused (it is never, for a batch the
            // engine built): every decision shares the answer.
            (_, Ok(_)) => decisions
                .iter()
                .map(|_| {
                    Err(CommandError::NotADecision {
                        command: "an answer without one result per decision".into(),
                    })
                })
                .collect(),
            (_, Err(e)) => decisions.iter().map(|_| Err(e.clone())).collect(),
        }
    }
}
