//! The invariant checkers, one per file, each named after the invariant of
//! the design it checks. Each is fed by the run at the moments that matter
//! (a leader decision, a guard run, a log entry applied) and answers with a
//! [`Violation`] the moment its invariant breaks, so a failing seed stops
//! at the step that broke it.
//!
//! Convergence after the faults stop is checked by the heal phase, not
//! here.

pub mod decision_in_its_term;
pub mod generation_names_one_spec;
pub mod monotonic_generations;
pub mod no_commit_without_evidence;
pub mod no_unready_serving;
pub mod one_clock_per_decision;
pub mod per_route_isolation;

pub use decision_in_its_term::DecisionInItsTerm;
pub use generation_names_one_spec::GenerationNamesOneSpec;
pub use monotonic_generations::MonotonicGenerations;
pub use no_commit_without_evidence::NoCommitWithoutEvidence;
pub use no_unready_serving::NoUnreadyServing;
pub use one_clock_per_decision::OneClockPerDecision;
pub use per_route_isolation::PerRouteIsolation;

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The checker's name.
    pub invariant: &'static str,
    /// What exactly broke, with the values that show it.
    pub detail: String,
}

/// What every checker hook returns.
pub type Check = Result<(), Violation>;

/// All checkers of one run.
#[derive(Debug, Default)]
pub struct Checkers {
    /// Invariant 1.
    pub evidence: NoCommitWithoutEvidence,
    /// Invariant 3.
    pub serving: NoUnreadyServing,
    /// Invariant 4.
    pub monotonic: MonotonicGenerations,
    /// Invariant 6.
    pub isolation: PerRouteIsolation,
    /// Invariant 8.
    pub one_spec: GenerationNamesOneSpec,
    /// Invariant 9.
    pub decision_term: DecisionInItsTerm,
    /// Invariant 10.
    pub one_clock: OneClockPerDecision,
}

impl Checkers {
    /// Proxy `n` restarted: per-incarnation bookkeeping starts over.
    pub fn proxy_restarted(&mut self, n: usize) {
        self.serving.proxy_restarted(n);
        self.monotonic.proxy_restarted(n);
    }
}
