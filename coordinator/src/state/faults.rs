//! Test-only switches that break one rule of the state machine on purpose,
//! so the seeded simulation (`sim/`) can prove its invariant
//! checkers catch a broken core. Compiled only with the `fault-injection`
//! feature. They live in a thread-local rather than in
//! [`super::ReplicatedState`] (which is replicated data): the simulation
//! runs each seed on one thread and sets them at its start.

use std::cell::Cell;

/// The switches; every one is off by default, and off means the state
/// machine behaves exactly as without the feature.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateFaults {
    /// Hand out `newest + 1` as a route's next generation, as before the
    /// fix (breaks invariant 8 after a withdraw, abandon or re-create).
    pub reuse_generations: bool,
    /// Carry out a decision whatever term its entry has (breaks
    /// invariant 9 when a deposed leader's decision is re-proposed).
    pub ignore_decision_term: bool,
    /// Judge evidence by the newest revision among a Service and its
    /// remaining slices, as before the fix: deleting a slice takes the
    /// generation down (breaks invariant 1).
    pub endpoint_generation_from_revisions: bool,
}

thread_local! {
    static FAULTS: Cell<StateFaults> = const { Cell::new(StateFaults {
        reuse_generations: false,
        ignore_decision_term: false,
        endpoint_generation_from_revisions: false,
    }) };
}

/// Sets this thread's switches.
pub fn set(faults: StateFaults) {
    FAULTS.with(|f| f.set(faults));
}

/// This thread's switches.
pub(super) fn get() -> StateFaults {
    FAULTS.with(Cell::get)
}
