//! How long to wait before trying a coordinator again: exponential
//! back-off with full jitter.
//!
//! Owns: the policy ([`BackoffPolicy`], pure: failures and a random unit in,
//! a pause out) and the per-task state ([`Backoff`]: counts failures, draws
//! the randomness, resets after a success). Does not own: what counts as a
//! failure or a success (the watch and membership tasks say), nor the pause
//! between heartbeats (the leader sets that).
//!
//! Why full jitter: with a fixed pause every proxy whose coordinator went
//! away reconnects at the same instant, and again at the same instant if
//! that fails — a whole fleet in lockstep against the coordinators that are
//! left. Drawing each pause uniformly from zero to an exponentially growing
//! ceiling spreads the fleet over the whole window and makes the load per
//! coordinator fall as failures continue (the "full jitter" of the AWS
//! architecture note on back-off, which linkerd2-proxy's reconnects also
//! use).
//!
//! Why not a crate: `backon` (small, maintained) only adds a random part of
//! the delay on top of it — pauses from `d` to `2d`, so still clustered, and
//! twice its own maximum — and the other small crates jitter by a factor
//! around the delay too. The policy is a dozen lines on top of `rand`,
//! which the proxy already uses.

use std::time::Duration;

/// The ceiling a failing coordinator's pauses grow to (unless the initial
/// ceiling is larger): long enough that a fleet waiting out a coordinator
/// outage costs little, short enough that it is back within seconds.
pub const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(5);

/// Exponential back-off with full jitter: after `failures` failures in a
/// row the pause is drawn uniformly from `[0, ceiling)`, where the ceiling
/// starts at `initial` and doubles per failure up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// The ceiling after the first failure.
    pub initial: Duration,
    /// The largest ceiling.
    pub max: Duration,
}

impl BackoffPolicy {
    /// `initial` doubling up to [`MAX_RECONNECT_BACKOFF`] (or `initial`
    /// itself when that is larger).
    pub fn starting_at(initial: Duration) -> Self {
        BackoffPolicy {
            initial,
            max: MAX_RECONNECT_BACKOFF.max(initial),
        }
    }

    /// The ceiling after `failures` failures in a row (1 for the first):
    /// `initial * 2^(failures - 1)`, at most `max`.
    pub fn ceiling(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.initial.saturating_mul(1u32 << doublings).min(self.max)
    }

    /// The pause after `failures` failures in a row, for a random `unit`
    /// drawn uniformly from `[0, 1)` (clamped into it).
    pub fn delay(&self, failures: u32, unit: f64) -> Duration {
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.ceiling(failures).mul_f64(unit)
    }
}

/// One task's back-off: how many failures in a row, and the next pause.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: BackoffPolicy,
    failures: u32,
}

impl Backoff {
    /// No failures yet.
    pub fn new(policy: BackoffPolicy) -> Self {
        Backoff {
            policy,
            failures: 0,
        }
    }

    /// Counts one more failure and returns the pause before the next try.
    pub fn next_delay(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.policy.delay(self.failures, rand::random::<f64>())
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// A success: the next failure starts from the initial ceiling again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_ceiling_doubles_per_failure_up_to_the_maximum() {
        let policy = BackoffPolicy::starting_at(100 * MS);
        let ceilings: Vec<u128> = (1..=8).map(|n| policy.ceiling(n).as_millis()).collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(policy.ceiling(u32::MAX), MAX_RECONNECT_BACKOFF);
        // A larger initial pause than the usual maximum is its own maximum.
        let slow = BackoffPolicy::starting_at(Duration::from_secs(8));
        assert_eq!(slow.ceiling(5), Duration::from_secs(8));
    }

    #[test]
    fn the_pause_is_drawn_from_zero_to_the_ceiling() {
        let policy = BackoffPolicy::starting_at(200 * MS);
        assert_eq!(policy.delay(3, 0.0), Duration::ZERO);
        assert_eq!(policy.delay(3, 0.5), 400 * MS);
        assert_eq!(policy.delay(3, 0.999), (800 * MS).mul_f64(0.999));
        // Whatever the random source gives, the pause stays in bounds.
        for unit in [-1.0, 2.0, f64::NAN, f64::INFINITY] {
            assert!(policy.delay(3, unit) <= policy.ceiling(3), "{unit}");
        }
    }

    #[test]
    fn drawn_pauses_spread_over_the_window_grow_and_reset() {
        let mut backoff = Backoff::new(BackoffPolicy::starting_at(100 * MS));
        let first: Vec<Duration> = (0..200)
            .map(|_| {
                let d = backoff.next_delay();
                backoff.reset();
                d
            })
            .collect();
        assert!(first.iter().all(|d| *d < 100 * MS));
        // Jittered: not all alike, and both halves of the window are used.
        assert!(first.iter().any(|d| *d < 50 * MS));
        assert!(first.iter().any(|d| *d >= 50 * MS));

        for _ in 0..6 {
            backoff.next_delay();
        }
        assert_eq!(backoff.failures(), 6);
        let late: Vec<Duration> = (0..200).map(|_| backoff.next_delay()).collect();
        assert!(late.iter().all(|d| *d < MAX_RECONNECT_BACKOFF));
        assert!(
            late.iter().any(|d| *d > Duration::from_secs(1)),
            "after many failures pauses grow past the first windows"
        );
        backoff.reset();
        assert_eq!(backoff.failures(), 0);
        assert!(backoff.next_delay() < 100 * MS);
    }
}
