//! Each invariant checker catches a deliberately broken core: flip one rule
//! in the real cutover engine or apply guard through its test-only switch
//! (the `fault-injection` feature) and the simulation must report that
//! invariant's violation, with its seed, within a bounded number of seeds.
//!
//! Seeds honour `SWITCHYARD_SIM_SEED` / `SWITCHYARD_SIM_SEEDS`, so a
//! printed reproduce line reruns exactly the seed that caught the fault.

use switchyard_coordinator::cutover::{CutoverEngine, EngineFaults};
use switchyard_coordinator::state::faults::{self, StateFaults};
use switchyard_proxy::control::guard::{ApplyGuard, GuardFaults};
use switchyard_sim::{Failure, SimConfig, run_seeds, seeds_from_env};

/// Seeds tried before declaring the checker blind to the fault.
const MAX_SEEDS: u64 = 200;

/// Runs the simulation with a broken core and returns the first failure,
/// which must be a violation of `invariant`.
fn caught(config: SimConfig, test: &str, invariant: &str) -> Failure {
    let seeds = seeds_from_env(MAX_SEEDS);
    let summary = run_seeds(&config, &seeds, &format!("sim_catches_broken_cores {test}"));
    let failure = summary.failure.unwrap_or_else(|| {
        panic!(
            "{} seeds ran with a broken core and no checker noticed: {:?}",
            seeds.len(),
            summary.stats
        )
    });
    eprintln!("caught, as it must be:\n{failure}");
    assert!(
        failure.invariant.starts_with(invariant),
        "expected a violation of {invariant:?}, got:\n{failure}"
    );
    failure
}

#[test]
fn invariant_1_catches_an_engine_that_commits_without_evidence() {
    let mut config = SimConfig::default_profile();
    config.engine_hook = Some(|e: &mut CutoverEngine| {
        e.set_faults(EngineFaults {
            commit_without_evidence: true,
            ..Default::default()
        })
    });
    caught(
        config,
        "invariant_1_catches_an_engine_that_commits_without_evidence",
        "invariant 1",
    );
}

#[test]
fn invariant_3_catches_a_guard_that_ignores_warmth() {
    let mut config = SimConfig::default_profile();
    config.guard_hook = Some(|g: &mut ApplyGuard| {
        g.set_faults(GuardFaults {
            ignores_warmth: true,
            ..Default::default()
        })
    });
    caught(
        config,
        "invariant_3_catches_a_guard_that_ignores_warmth",
        "invariant 3",
    );
}

#[test]
fn invariant_4_catches_a_guard_that_goes_back() {
    let mut config = SimConfig::default_profile();
    config.guard_hook = Some(|g: &mut ApplyGuard| {
        g.set_faults(GuardFaults {
            allows_regression: true,
            ..Default::default()
        })
    });
    caught(
        config,
        "invariant_4_catches_a_guard_that_goes_back",
        "invariant 4",
    );
}

#[test]
fn invariant_6_catches_an_engine_that_blocks_every_route_on_a_stuck_one() {
    let mut config = SimConfig::default_profile();
    config.engine_hook = Some(|e: &mut CutoverEngine| {
        e.set_faults(EngineFaults {
            global_route_blocking: true,
            ..Default::default()
        })
    });
    caught(
        config,
        "invariant_6_catches_an_engine_that_blocks_every_route_on_a_stuck_one",
        "invariant 6",
    );
}

#[test]
fn invariant_1_catches_an_engine_that_counts_a_missing_service_as_ready() {
    let mut config = SimConfig::default_profile();
    config.engine_hook = Some(|e: &mut CutoverEngine| {
        e.set_faults(EngineFaults {
            missing_backends_ready: true,
            ..Default::default()
        })
    });
    caught(
        config,
        "invariant_1_catches_an_engine_that_counts_a_missing_service_as_ready",
        "invariant 1",
    );
}

#[test]
fn invariant_1_catches_an_engine_that_keeps_evidence_across_registrations() {
    let mut config = SimConfig::default_profile();
    config.engine_hook = Some(|e: &mut CutoverEngine| {
        e.set_faults(EngineFaults {
            evidence_across_registrations: true,
            ..Default::default()
        })
    });
    caught(
        config,
        "invariant_1_catches_an_engine_that_keeps_evidence_across_registrations",
        "invariant 1",
    );
}

#[test]
fn invariant_1_catches_endpoint_generations_that_go_down() {
    let mut config = SimConfig::default_profile();
    config.state_hook = Some(|| {
        faults::set(StateFaults {
            endpoint_generation_from_revisions: true,
            ..Default::default()
        })
    });
    caught(
        config,
        "invariant_1_catches_endpoint_generations_that_go_down",
        "invariant 1",
    );
}

#[test]
fn invariant_8_catches_a_state_machine_that_hands_out_a_generation_twice() {
    let mut config = SimConfig::default_profile();
    config.state_hook = Some(|| {
        faults::set(StateFaults {
            reuse_generations: true,
            ..Default::default()
        })
    });
    caught(
        config,
        "invariant_8_catches_a_state_machine_that_hands_out_a_generation_twice",
        "invariant 8",
    );
}

#[test]
fn invariant_9_catches_a_state_machine_that_ignores_the_deciding_term() {
    let mut config = SimConfig::default_profile();
    config.state_hook = Some(|| {
        faults::set(StateFaults {
            ignore_decision_term: true,
            ..Default::default()
        })
    });
    caught(
        config,
        "invariant_9_catches_a_state_machine_that_ignores_the_deciding_term",
        "invariant 9",
    );
}

#[test]
fn invariant_10_catches_an_engine_that_times_out_on_the_wrong_clock_reading() {
    let mut config = SimConfig::default_profile();
    config.engine_hook = Some(|e: &mut CutoverEngine| {
        e.set_faults(EngineFaults {
            timeout_from_leader_start: true,
            ..Default::default()
        })
    });
    caught(
        config,
        "invariant_10_catches_an_engine_that_times_out_on_the_wrong_clock_reading",
        "invariant 10",
    );
}
