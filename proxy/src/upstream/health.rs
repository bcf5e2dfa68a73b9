//! Active health checking: the pure threshold logic ([`HealthTracker`]) and
//! the per-endpoint task that probes on an interval (`run`).
//!
//! An endpoint never checked is [`HealthStatus::Unknown`] and gets no
//! traffic: that is what "warm" means — the proxy itself reached it over
//! its real data path. The probe (connect through the endpoint's pool,
//! `GET <path>`, healthy when the status is below 500) lives on
//! [`super::endpoint::Endpoint::probe`]; this module does not do IO itself
//! beyond sleeping between probes.

use super::endpoint::Endpoint;
use crate::settings::HealthSettings;
use std::sync::Weak;

/// What the proxy's own checks say about one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HealthStatus {
    /// Not checked yet: no traffic.
    #[default]
    Unknown,
    /// Passing: gets traffic.
    Healthy,
    /// Failing: no traffic.
    Unhealthy,
}

/// Consecutive-result thresholds for one endpoint.
#[derive(Debug, Clone, Default)]
pub struct HealthTracker {
    status: HealthStatus,
    passes: u32,
    failures: u32,
}

impl HealthTracker {
    /// Current status.
    pub fn status(&self) -> HealthStatus {
        self.status
    }

    /// Records one probe result; returns the new status when it changed.
    ///
    /// The first result decides at once (a pass makes a new endpoint
    /// healthy, so warming a backend takes one probe, not
    /// `healthy_threshold` intervals). After that, a healthy endpoint needs
    /// `unhealthy_threshold` failures in a row to leave, and an unhealthy
    /// one `healthy_threshold` passes in a row to come back, so a single
    /// flaky probe never flips traffic.
    pub fn record(&mut self, passed: bool, settings: &HealthSettings) -> Option<HealthStatus> {
        if passed {
            self.passes = self.passes.saturating_add(1);
            self.failures = 0;
        } else {
            self.failures = self.failures.saturating_add(1);
            self.passes = 0;
        }
        let next = match self.status {
            HealthStatus::Unknown if passed => HealthStatus::Healthy,
            HealthStatus::Unknown => HealthStatus::Unhealthy,
            HealthStatus::Healthy if self.failures >= settings.unhealthy_threshold.max(1) => {
                HealthStatus::Unhealthy
            }
            HealthStatus::Unhealthy if self.passes >= settings.healthy_threshold.max(1) => {
                HealthStatus::Healthy
            }
            same => same,
        };
        if next == self.status {
            None
        } else {
            self.status = next;
            Some(next)
        }
    }
}

/// Probes `endpoint` every interval until it is dropped or the task is
/// aborted (when the endpoint is retired). The first probe runs at once.
pub(crate) async fn run(endpoint: Weak<Endpoint>) {
    loop {
        let Some(ep) = endpoint.upgrade() else {
            return;
        };
        let passed = ep.probe().await;
        ep.record_health(passed);
        let interval = ep.health_interval();
        // Do not keep the endpoint alive while sleeping.
        drop(ep);
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settings() -> HealthSettings {
        HealthSettings {
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            healthy_threshold: 2,
            unhealthy_threshold: 3,
        }
    }

    #[test]
    fn first_result_decides() {
        let s = settings();
        let mut t = HealthTracker::default();
        assert_eq!(t.status(), HealthStatus::Unknown);
        assert_eq!(t.record(true, &s), Some(HealthStatus::Healthy));
        let mut t = HealthTracker::default();
        assert_eq!(t.record(false, &s), Some(HealthStatus::Unhealthy));
    }

    #[test]
    fn healthy_needs_consecutive_failures_to_leave() {
        let s = settings();
        let mut t = HealthTracker::default();
        t.record(true, &s);
        assert_eq!(t.record(false, &s), None);
        assert_eq!(t.record(false, &s), None);
        // A pass in between resets the count.
        assert_eq!(t.record(true, &s), None);
        assert_eq!(t.record(false, &s), None);
        assert_eq!(t.record(false, &s), None);
        assert_eq!(t.record(false, &s), Some(HealthStatus::Unhealthy));
    }

    #[test]
    fn unhealthy_needs_consecutive_passes_to_return() {
        let s = settings();
        let mut t = HealthTracker::default();
        t.record(false, &s);
        assert_eq!(t.record(true, &s), None);
        assert_eq!(t.record(false, &s), None);
        assert_eq!(t.record(true, &s), None);
        assert_eq!(t.record(true, &s), Some(HealthStatus::Healthy));
        assert_eq!(t.status(), HealthStatus::Healthy);
    }

    #[test]
    fn zero_thresholds_act_as_one() {
        let s = HealthSettings {
            healthy_threshold: 0,
            unhealthy_threshold: 0,
            ..settings()
        };
        let mut t = HealthTracker::default();
        t.record(true, &s);
        assert_eq!(t.record(false, &s), Some(HealthStatus::Unhealthy));
        assert_eq!(t.record(true, &s), Some(HealthStatus::Healthy));
    }
}
