//! The seeded simulation over many seeds: every invariant checked after
//! every step, then a heal phase that must converge.
//!
//! Invariant 1 demands current evidence: this is how the simulation found
//! the cutover engine counting stale readiness reports (fixed in 09f6611).
//!
//! `SWITCHYARD_SIM_SEED=<n>` reruns one seed, `SWITCHYARD_SIM_SEEDS=<k>`
//! runs the first `k`, `SWITCHYARD_CHAOS_PROFILE=long` runs 20,000 seeds
//! with longer schedules; `SWITCHYARD_SIM_THREADS` sets the thread count.

use switchyard_chaos_tests::sim::{SimConfig, run_seeds, seeds_from_env};

/// Seeds per profile when the environment does not say.
fn default_seeds(config: &SimConfig) -> u64 {
    if config.profile == "long" {
        20_000
    } else {
        1_000
    }
}

#[test]
fn invariants_hold_and_the_system_converges_for_every_seed() {
    let config = SimConfig::from_env();
    let seeds = seeds_from_env(default_seeds(&config));
    let summary = run_seeds(&config, &seeds, "sim_default");
    if let Some(failure) = &summary.failure {
        panic!("{failure}");
    }
    let s = &summary.stats;
    eprintln!(
        "{} seeds ({} profile) in {:.1?}: {:?}",
        s.seeds, config.profile, summary.elapsed, s
    );
    // The schedule must actually exercise what the checkers guard; a run
    // of one seed may legitimately miss some of it.
    if seeds.len() >= 100 {
        assert!(
            s.commits > 0 && s.forced_commits > 0 && s.abandons > 0,
            "{s:?}"
        );
        assert!(s.guard_applies > 0 && s.guard_forced > 0, "{s:?}");
        assert!(
            s.proxy_crashes > 0 && s.coordinator_crashes > 0 && s.expiries > 0,
            "{s:?}"
        );
    }
}
