//! The seeded simulation over many seeds: every invariant checked after
//! every step, then a heal phase that must converge.
//!
//! Invariant 1 demands current evidence: this is how the simulation found
//! the cutover engine counting stale readiness reports (fixed in 09f6611).
//!
//! Seeds: 1,000 by default, 10,000 in CI (`CI` set, as `.ci/run` runs),
//! 20,000 longer ones with `SWITCHYARD_CHAOS_PROFILE=long`.
//! `SWITCHYARD_SIM_SEED=<n>` reruns one seed, `SWITCHYARD_SIM_SEEDS=<k>`
//! runs the first `k`; `SWITCHYARD_SIM_THREADS` sets the thread count.

use switchyard_sim::{SimConfig, run_seeds, seeds_from_env};

/// Seeds per profile when the environment does not say.
fn default_seeds(config: &SimConfig) -> u64 {
    if config.profile == "long" {
        20_000
    } else if std::env::var_os("CI").is_some() {
        10_000
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
        "{} seeds ({} profile) in {:.1?} ({:.0} seeds/s): {:?}",
        s.seeds,
        config.profile,
        summary.elapsed,
        s.seeds as f64 / summary.elapsed.as_secs_f64().max(1e-9),
        s
    );
    // The schedule must actually exercise what the checkers guard; a run
    // of one seed may legitimately miss some of it.
    if seeds.len() >= 100 {
        assert!(
            s.commits > 0 && s.forced_commits > 0 && s.abandons > 0 && s.commits_with_apply > 0,
            "{s:?}"
        );
        assert!(s.guard_applies > 0 && s.guard_forced > 0, "{s:?}");
        assert!(
            s.proxy_crashes > 0 && s.coordinator_crashes > 0 && s.expiries > 0,
            "{s:?}"
        );
        // The new world: deposed leaders' decisions re-proposed in later
        // terms, routes deleted and re-created, slices deleted, Services
        // arriving after their routes.
        assert!(
            s.depositions > 0
                && s.reproposals > 0
                && s.route_deletes > 0
                && s.slice_deletes > 0
                && s.late_services > 0,
            "{s:?}"
        );
        // Users' applies grouped in one entry, as the leader's group
        // commit makes them.
        assert!(s.grouped_applies > 0, "{s:?}");
    }
}
