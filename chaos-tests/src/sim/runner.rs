//! Running many seeds: which seeds (from the environment), running them in
//! order, and summing what they exercised.
//!
//! `SWITCHYARD_SIM_SEED=<n>` runs exactly seed `n`; `SWITCHYARD_SIM_SEEDS`
//! sets how many seeds (0, 1, 2, …); otherwise the caller's default count.

use super::config::SimConfig;
use super::run::{SimStats, run_seed};
use super::trace::Failure;
use std::time::{Duration, Instant};

/// The seeds to run: the one in `SWITCHYARD_SIM_SEED`, or the first
/// `SWITCHYARD_SIM_SEEDS` (else `default_count`) seeds.
pub fn seeds_from_env(default_count: u64) -> Vec<u64> {
    if let Some(seed) = env_u64("SWITCHYARD_SIM_SEED") {
        return vec![seed];
    }
    let count = env_u64("SWITCHYARD_SIM_SEEDS").unwrap_or(default_count);
    (0..count).collect()
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={value:?} is not a whole number"),
    }
}

/// What a batch of seeds did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Counts summed over the seeds that passed.
    pub stats: SimStats,
    /// The first failure, if any (running stops there).
    pub failure: Option<Failure>,
    /// Wall time taken.
    pub elapsed: Duration,
}

/// Runs `seeds` in order under `config`, stopping at the first failure.
/// `test` names the test binary for the reproduce line.
pub fn run_seeds(config: &SimConfig, seeds: &[u64], test: &str) -> Summary {
    let started = Instant::now();
    let mut summary = Summary::default();
    for &seed in seeds {
        match run_seed(seed, config, test) {
            Ok(stats) => summary.stats.add(&stats),
            Err(failure) => {
                summary.failure = Some(*failure);
                break;
            }
        }
    }
    summary.elapsed = started.elapsed();
    summary
}
