//! Running many seeds: which seeds (from the environment), running them in
//! order, and summing what they exercised.
//!
//! `SWITCHYARD_SIM_SEED=<n>` runs exactly seed `n`; `SWITCHYARD_SIM_SEEDS`
//! sets how many seeds (0, 1, 2, …); otherwise the caller's default count.
//! Seeds run on `SWITCHYARD_SIM_THREADS` threads (default: the machine's
//! parallelism); each seed is independent, and the failure reported is
//! always the smallest failing seed, whatever the thread count.

use super::config::SimConfig;
use super::run::{SimStats, run_seed};
use super::trace::Failure;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    /// Counts summed over the seeds that passed (with several threads,
    /// seeds after a failure may or may not have run).
    pub stats: SimStats,
    /// The smallest failing seed's failure, if any.
    pub failure: Option<Failure>,
    /// Wall time taken.
    pub elapsed: Duration,
}

/// Runs `seeds` under `config` and reports the smallest failing seed (if
/// any). `test` names the test binary for the reproduce line.
pub fn run_seeds(config: &SimConfig, seeds: &[u64], test: &str) -> Summary {
    let started = Instant::now();
    let threads = env_u64("SWITCHYARD_SIM_THREADS")
        .map(|n| n.max(1) as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(seeds.len().max(1));
    // Once a seed fails, seeds after it need not run: only a smaller one
    // could still change the answer.
    let first_failure = AtomicUsize::new(usize::MAX);
    let results: Vec<(SimStats, Option<(usize, Failure)>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let first_failure = &first_failure;
                scope.spawn(move || {
                    let mut stats = SimStats::default();
                    for i in (t..seeds.len()).step_by(threads) {
                        if i > first_failure.load(Ordering::Relaxed) {
                            break;
                        }
                        match run_seed(seeds[i], config, test) {
                            Ok(s) => stats.add(&s),
                            Err(failure) => {
                                first_failure.fetch_min(i, Ordering::Relaxed);
                                return (stats, Some((i, *failure)));
                            }
                        }
                    }
                    (stats, None)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| match w.join() {
                Ok(result) => result,
                // A panic escaping `run_seed` is a bug of the runner itself.
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    let mut summary = Summary::default();
    let mut smallest: Option<(usize, Failure)> = None;
    for (stats, failure) in results {
        summary.stats.add(&stats);
        if let Some((i, failure)) = failure
            && smallest.as_ref().is_none_or(|(j, _)| i < *j)
        {
            smallest = Some((i, failure));
        }
    }
    summary.failure = smallest.map(|(_, failure)| failure);
    summary.elapsed = started.elapsed();
    summary
}
