//! Test-only switches of the engine (feature `fault-injection`, used only
//! by the simulation's broken-core tests in their own workspace).

/// Test-only switches that break one decision rule on purpose, so the
/// seeded simulation (`sim/`) can prove each of its invariant
/// checkers catches a broken engine. Compiled only with the
/// `fault-injection` feature; every switch is off by default, and off
/// means the engine behaves exactly as without the feature.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineFaults {
    /// Commit every pending transition, evidence or not (breaks invariant 1).
    pub commit_without_evidence: bool,
    /// Commit nothing while any route's policy is unmet (breaks invariant 6).
    pub global_route_blocking: bool,
    /// Time a transition out from when the leader took office rather than
    /// from when it first saw the transition (breaks invariant 10).
    pub timeout_from_leader_start: bool,
    /// Leave backends whose Service is missing out of what a transition
    /// needs, as before the fix (breaks invariant 1).
    pub missing_backends_ready: bool,
    /// Count evidence of any registration of a proxy id, as before the fix
    /// (breaks invariant 1 after a fast restart).
    pub evidence_across_registrations: bool,
}
