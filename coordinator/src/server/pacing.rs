//! Pacing the fleet while applies pile up: the leader holds each proxy's
//! heartbeat answer for a while, so the proxies' rounds space out and the
//! leader's CPU goes to the applies.
//!
//! Every committed configuration change costs the leader a heartbeat from
//! every proxy (the generations it now serves): at P proxies and E entries
//! a second, P × E calls a second. Under a burst of applies from many
//! clients those calls took most of the leader (at 200 proxies and 32
//! clients some 6,000 a second, `bench/RESULTS.md`), and the applies
//! waited for it. While applies pile up — the leader wrote a group of
//! applies (`Command::Applies`, its own or one a follower grouped and
//! forwarded: `Node::since_grouped_write`) within the last [`BUSY_HOLD`]
//! — each heartbeat's answer is held [`FleetPacing::spacing`]: P ÷ the
//! configured calls per second, at most [`MAX_SPACING`]. A proxy starts
//! its next round only once it has its answer, so each proxy's rounds come
//! at most about once per spacing, each carrying whatever changed
//! meanwhile, and the fleet's calls stay near the configured rate whatever
//! the rate of entries.
//!
//! What is held is the answer, not the heartbeat: the lease, the
//! generations served and the evidence are taken at once, so no decision
//! waits for pacing, and a held answer is far within a proxy's call
//! deadline and lease. Applies arriving one at a time (never grouped)
//! hold nothing: an isolated change is Ready as soon as ever.
//!
//! Owns: when the fleet is paced and by how much. Does not own: grouping
//! applies (`super::apply_group`), noticing groups written
//! (`crate::raft`), or the heartbeat itself (`super::fleet`, which asks).

use std::time::Duration;

/// How long after the last group of applies the fleet stays paced: a few
/// groups' time, so pacing does not flicker between the groups of one
/// burst.
pub(crate) const BUSY_HOLD: Duration = Duration::from_secs(1);

/// The longest an answer is held, whatever the fleet's size: well within
/// a proxy's default call deadline (1 s) and lease (3 s), and short enough
/// that a paced change still reaches Ready in a fraction of a second.
pub(crate) const MAX_SPACING: Duration = Duration::from_millis(250);

/// How much the leader paces the fleet's heartbeats.
#[derive(Debug)]
pub(crate) struct FleetPacing {
    /// The fleet's calls a second while paced (0: never paced).
    calls_per_second: u32,
}

impl FleetPacing {
    pub(crate) fn new(calls_per_second: u32) -> Self {
        FleetPacing { calls_per_second }
    }

    /// How long to hold a heartbeat's answer with `proxies` registered,
    /// the last group of applies written `since_group` ago (`None`:
    /// never): zero unless that is within [`BUSY_HOLD`].
    pub(crate) fn hold(&self, proxies: usize, since_group: Option<Duration>) -> Duration {
        match since_group {
            Some(since) if since < BUSY_HOLD => self.spacing(proxies),
            _ => Duration::ZERO,
        }
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
    fn nothing_is_held_unless_a_group_of_applies_was_written_within_the_hold() {
        let pacing = FleetPacing::new(2_000);
        assert_eq!(pacing.hold(200, None), Duration::ZERO, "never a group");
        let ms = Duration::from_millis;
        assert_eq!(pacing.hold(200, Some(ms(0))), ms(100));
        assert_eq!(pacing.hold(200, Some(BUSY_HOLD - ms(1))), ms(100));
        assert_eq!(
            pacing.hold(200, Some(BUSY_HOLD)),
            Duration::ZERO,
            "the pile is over"
        );
    }

    #[test]
    fn the_spacing_is_each_proxy_s_share_of_the_rate_within_its_bound() {
        let pacing = FleetPacing::new(2_000);
        assert_eq!(pacing.spacing(3), Duration::from_micros(1_500));
        assert_eq!(pacing.spacing(200), Duration::from_millis(100));
        assert_eq!(pacing.spacing(100_000), MAX_SPACING);
        let off = FleetPacing::new(0);
        assert_eq!(
            off.hold(200, Some(Duration::ZERO)),
            Duration::ZERO,
            "0 calls a second: off"
        );
    }
}
