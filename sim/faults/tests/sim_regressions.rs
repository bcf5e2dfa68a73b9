//! The seeds that reproduced each cutover-safety bug, kept: with the bug
//! switched back on in the real core (its test-only `fault-injection`
//! switch) the seed must break exactly that invariant, and on the code as
//! it is it must pass — every invariant, and the heal phase.
//!
//! The seeds are the first ones `sim_catches_broken_cores` reported for
//! each switch. A change to the simulation's schedule moves them; rerun
//! that test and copy the seeds it prints.

use switchyard_coordinator::cutover::{CutoverEngine, EngineFaults};
use switchyard_coordinator::state::faults::{self, StateFaults};
use switchyard_sim::{SimConfig, run_seed};

/// Runs `seed` with `broken` applied to a default config (must fail with
/// `invariant`) and without (must pass).
fn regression(seed: u64, invariant: &str, broken: impl Fn(&mut SimConfig)) {
    let mut config = SimConfig::default_profile();
    broken(&mut config);
    let failure = run_seed(seed, &config, "sim_regressions")
        .expect_err("the seed must reproduce the bug when it is switched back on");
    assert!(
        failure.invariant.starts_with(invariant),
        "expected {invariant}, got:\n{failure}"
    );
    faults::set(StateFaults::default());
    if let Err(failure) = run_seed(seed, &SimConfig::default_profile(), "sim_regressions") {
        panic!("the fixed code fails the seed that reproduced the bug:\n{failure}");
    }
}

/// Installs one state-machine switch for the seed's thread (hooks are
/// plain `fn()`s, so one small function per switch).
fn reuse_generations() {
    faults::set(StateFaults {
        reuse_generations: true,
        ..Default::default()
    })
}

fn ignore_decision_term() {
    faults::set(StateFaults {
        ignore_decision_term: true,
        ..Default::default()
    })
}

fn endpoint_generation_from_revisions() {
    faults::set(StateFaults {
        endpoint_generation_from_revisions: true,
        ..Default::default()
    })
}

#[test]
fn seed_0_a_generation_handed_out_twice() {
    regression(0, "invariant 8", |config| {
        config.state_hook = Some(reuse_generations)
    });
}

#[test]
fn seed_19_a_deposed_leaders_decision_carried_out_in_a_later_term() {
    regression(19, "invariant 9", |config| {
        config.state_hook = Some(ignore_decision_term)
    });
}

#[test]
fn seed_12_an_endpoint_generation_that_went_down_after_a_slice_deletion() {
    regression(12, "invariant 1", |config| {
        config.state_hook = Some(endpoint_generation_from_revisions)
    });
}

#[test]
fn seed_6_a_route_committed_before_its_service_existed() {
    regression(6, "invariant 1", |config| {
        config.engine_hook = Some(|e: &mut CutoverEngine| {
            e.set_faults(EngineFaults {
                missing_backends_ready: true,
                ..Default::default()
            })
        })
    });
}

#[test]
fn seed_62_evidence_of_a_proxys_previous_run() {
    regression(62, "invariant 1", |config| {
        config.engine_hook = Some(|e: &mut CutoverEngine| {
            e.set_faults(EngineFaults {
                evidence_across_registrations: true,
                ..Default::default()
            })
        })
    });
}

#[test]
fn seed_0_a_timeout_measured_from_the_wrong_reading() {
    regression(0, "invariant 10", |config| {
        config.engine_hook = Some(|e: &mut CutoverEngine| {
            e.set_faults(EngineFaults {
                timeout_from_leader_start: true,
                ..Default::default()
            })
        })
    });
}
