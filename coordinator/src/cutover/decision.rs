//! [`Decision`]: what the leader should propose, and the one mapping from a
//! decision to the fenced Raft command that carries it out. The leader loop
//! and the simulation both use [`Decision::command`], so the simulation
//! checks the commands the coordinators really write.

use crate::state::{Command, DecisionBasis};
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
}
