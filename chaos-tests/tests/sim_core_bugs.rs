//! Real core bugs the simulation found, one test each, ignored until the
//! core is fixed (the `ignore` reason says what is wrong). Each runs the
//! simulation in the stricter mode that exposes the bug; once the core is
//! fixed, remove the `ignore` (and make the stricter mode the default).

use switchyard_chaos_tests::sim::{SimConfig, run_seeds, seeds_from_env};

#[test]
#[ignore = "core bug: stale readiness evidence keeps counting (see test doc)"]
fn commits_need_current_evidence() {
    let config = SimConfig {
        evidence_must_be_current: true,
        ..SimConfig::from_env()
    };
    let seeds = seeds_from_env(1_000);
    let summary = run_seeds(&config, &seeds, "sim_core_bugs -- --ignored");
    if let Some(failure) = &summary.failure {
        panic!("{failure}");
    }
}
