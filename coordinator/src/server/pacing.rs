//! Pacing the fleet while applies pile up: the leader holds each proxy's
//! heartbeat answer for a while, so the proxies' rounds space out and the
//! leader's CPU goes to the applies.
//!
//! Every committed configuration change costs the leader a heartbeat from
//! every proxy (the generations it now serves): at P proxies and E entries
//! a second, P × E calls a second. Under a burst of applies from many
//! clients those calls took most of the leader (at 200 proxies and 32
//! clients some 6,000 a second, `bench/RESULTS.md`), and the applies
//! waited for it. While applies pile up — a group of two or more was
//! proposed within the last [`BUSY_HOLD`] — each heartbeat's answer is
//! held [`FleetPacing::spacing`]: P ÷ the configured calls per second, at
//! most [`MAX_SPACING`]. A proxy starts its next round only once it has
//! its answer, so each proxy's rounds come at most about once per spacing,
//! each carrying whatever changed meanwhile, and the fleet's calls stay
//! near the configured rate whatever the rate of entries.
//!
//! What is held is the answer, not the heartbeat: the lease, the
//! generations served and the evidence are taken at once, so no decision
//! waits for pacing, and a held answer is far within a proxy's call
//! deadline and lease. Applies arriving one at a time (no group of two)
//! hold nothing: an isolated change is Ready as soon as ever.
//!
//! Only groups this coordinator forms count: a follower groups the
//! applies its own clients send and forwards each group as one proposal,
//! which the leader does not see as a pile (a gap: clients that write
//! through followers get no pacing).
//!
//! Owns: when the fleet is paced and by how much. Does not own: grouping
//! applies (`super::apply_group`, which tells it) or the heartbeat itself
//! (`super::fleet`, which asks).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long after the last group of two or more applies the fleet stays
/// paced: a few groups' time, so pacing does not flicker between the
/// groups of one burst.
pub(crate) const BUSY_HOLD: Duration = Duration::from_secs(1);

/// The longest an answer is held, whatever the fleet's size: well within
/// a proxy's default call deadline (1 s) and lease (3 s), and short enough
/// that a paced change still reaches Ready in a fraction of a second.
pub(crate) const MAX_SPACING: Duration = Duration::from_millis(250);

/// Whether and how much the leader paces the fleet's heartbeats.
#[derive(Debug)]
pub(crate) struct FleetPacing {
    /// The fleet's calls a second while paced (0: never paced).
    calls_per_second: u32,
    /// Until when (ms, by this coordinator's clock) the fleet is paced.
    busy_until_ms: AtomicU64,
}

impl FleetPacing {
    pub(crate) fn new(calls_per_second: u32) -> Self {
        FleetPacing {
            calls_per_second,
            busy_until_ms: AtomicU64::new(0),
        }
    }

    /// A group of `applies` was proposed at `now_ms`: two or more mean
    /// applies are piling up.
    pub(crate) fn note_group(&self, applies: usize, now_ms: u64) {
        if applies >= 2 {
            let until = now_ms.saturating_add(BUSY_HOLD.as_millis() as u64);
            self.busy_until_ms.fetch_max(until, Ordering::Relaxed);
        }
    }

    /// How long to hold a heartbeat's answer at `now_ms` with `proxies`
    /// registered: zero unless applies piled up within [`BUSY_HOLD`].
    pub(crate) fn hold(&self, proxies: usize, now_ms: u64) -> Duration {
        if now_ms >= self.busy_until_ms.load(Ordering::Relaxed) {
            return Duration::ZERO;
        }
        self.spacing(proxies)
    }

    /// Each proxy's share of the paced rate: `proxies` ÷ calls per second,
    /// at most [`MAX_SPACING`] (zero when pacing is off).
    pub(crate) fn spacing(&self, proxies: usize) -> Duration {
        if self.calls_per_second == 0 {
            return Duration::ZERO;
        }
        let micros = proxies as u64 * 1_000_000 / u64::from(self.calls_per_second);
        Duration::from_micros(micros).min(MAX_SPACING)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_held_until_a_group_of_two_or_more_applies_and_for_a_while_after() {
        let pacing = FleetPacing::new(2_000);
        assert_eq!(pacing.hold(200, 1_000), Duration::ZERO, "never busy");
        pacing.note_group(1, 1_000);
        assert_eq!(
            pacing.hold(200, 1_001),
            Duration::ZERO,
            "applies one at a time are no pile"
        );
        pacing.note_group(2, 1_000);
        assert_eq!(pacing.hold(200, 1_001), Duration::from_millis(100));
        let end = 1_000 + BUSY_HOLD.as_millis() as u64;
        assert_eq!(pacing.hold(200, end - 1), Duration::from_millis(100));
        assert_eq!(pacing.hold(200, end), Duration::ZERO, "the pile is over");
        // An older group's note never shortens a later one's.
        pacing.note_group(8, end + 10);
        pacing.note_group(8, end);
        assert_eq!(pacing.hold(200, end + 1_000), Duration::from_millis(100));
    }

    #[test]
    fn the_spacing_is_each_proxy_s_share_of_the_rate_within_its_bound() {
        let pacing = FleetPacing::new(2_000);
        assert_eq!(pacing.spacing(3), Duration::from_micros(1_500));
        assert_eq!(pacing.spacing(200), Duration::from_millis(100));
        assert_eq!(pacing.spacing(100_000), MAX_SPACING);
        let off = FleetPacing::new(0);
        off.note_group(64, 0);
        assert_eq!(off.hold(200, 1), Duration::ZERO, "0 calls a second: off");
    }
}
