//! Passive outlier ejection: an endpoint that fails this many times in a
//! row on real traffic is taken out for a while.
//!
//! Pure: outcomes and the current time in, decisions out. Only gateway
//! failures count (connect errors, resets, timeouts); what an upstream
//! answers, even a 5xx, is its business and not a reason to eject.

use crate::settings::OutlierSettings;
use std::time::Duration;
use tokio::time::Instant;

/// Ejection state of one endpoint.
#[derive(Debug, Default, Clone)]
pub struct OutlierDetector {
    consecutive_failures: u32,
    /// Ejections since the last success; lengthens the next ejection.
    ejections: u32,
    ejected_until: Option<Instant>,
}

impl OutlierDetector {
    /// Whether the endpoint is out of rotation at `now`.
    pub fn is_ejected(&self, now: Instant) -> bool {
        self.ejected_until.is_some_and(|until| now < until)
    }

    /// A request succeeded.
    pub fn record_success(&mut self) {
        self.consecutive_failures = 0;
        self.ejections = 0;
    }

    /// A request failed at `now`. Returns how long the endpoint is ejected
    /// for when this failure ejects it.
    pub fn record_failure(&mut self, now: Instant, settings: &OutlierSettings) -> Option<Duration> {
        if self.is_ejected(now) {
            // Requests already in flight when it was ejected; no news.
            return None;
        }
        self.consecutive_failures += 1;
        if self.consecutive_failures < settings.consecutive_failures.max(1) {
            return None;
        }
        self.consecutive_failures = 0;
        self.ejections = self.ejections.saturating_add(1);
        let length = settings
            .base_ejection_time
            .saturating_mul(self.ejections)
            .min(settings.max_ejection_time);
        self.ejected_until = Some(now + length);
        Some(length)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> OutlierSettings {
        OutlierSettings {
            consecutive_failures: 3,
            base_ejection_time: Duration::from_secs(10),
            max_ejection_time: Duration::from_secs(25),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ejects_after_consecutive_failures_and_returns() {
        let s = settings();
        let mut d = OutlierDetector::default();
        assert_eq!(d.record_failure(Instant::now(), &s), None);
        assert_eq!(d.record_failure(Instant::now(), &s), None);
        assert_eq!(
            d.record_failure(Instant::now(), &s),
            Some(Duration::from_secs(10))
        );
        assert!(d.is_ejected(Instant::now()));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(d.is_ejected(Instant::now()));
        // Failures of requests in flight during the ejection change nothing.
        assert_eq!(d.record_failure(Instant::now(), &s), None);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!d.is_ejected(Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn success_resets_the_count() {
        let s = settings();
        let mut d = OutlierDetector::default();
        d.record_failure(Instant::now(), &s);
        d.record_failure(Instant::now(), &s);
        d.record_success();
        assert_eq!(d.record_failure(Instant::now(), &s), None);
        assert_eq!(d.record_failure(Instant::now(), &s), None);
        assert!(!d.is_ejected(Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn repeated_ejections_grow_up_to_the_cap() {
        let s = settings();
        let mut d = OutlierDetector::default();
        let mut lengths = Vec::new();
        for _ in 0..3 {
            let mut got = None;
            for _ in 0..3 {
                got = d.record_failure(Instant::now(), &s);
            }
            let length = got.expect("third failure ejects");
            lengths.push(length.as_secs());
            tokio::time::advance(length).await;
        }
        assert_eq!(lengths, vec![10, 20, 25]);
        // A success resets the ladder.
        d.record_success();
        for _ in 0..2 {
            d.record_failure(Instant::now(), &s);
        }
        assert_eq!(
            d.record_failure(Instant::now(), &s),
            Some(Duration::from_secs(10))
        );
    }
}
