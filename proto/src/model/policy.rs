//! Cutover settings: the readiness policy a transition must meet, how long
//! it may wait, and what happens when it times out. Read from route
//! annotations, falling back to coordinator-wide defaults.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Annotation: readiness policy (`all`, `majority`, `3`, `60%`, and any of
/// those prefixed `per-zone:`).
pub const ANNOTATION_POLICY: &str = "switchyard.io/readiness-policy";
/// Annotation: how long a transition may wait for readiness (`30s`).
pub const ANNOTATION_TIMEOUT: &str = "switchyard.io/cutover-timeout";
/// Annotation: what a timed-out transition does (`keep-old` or `force`).
pub const ANNOTATION_ON_TIMEOUT: &str = "switchyard.io/on-timeout";
/// Service annotation: HTTP path the proxies health-check (`/` by default).
pub const ANNOTATION_HEALTH_PATH: &str = "switchyard.io/health-path";

/// How many live proxies must report a backend ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Quorum {
    /// Every live proxy.
    All,
    /// More than half of the live proxies.
    Majority,
    /// At least this many live proxies (capped at the number live).
    Count(u32),
    /// At least this percentage (1..=100) of live proxies, rounded up.
    Percent(u8),
}

impl Quorum {
    /// How many of `live` proxies must be ready. Never 0 while `live > 0`:
    /// a policy that could be met by nobody is no policy.
    pub fn required(self, live: usize) -> usize {
        let need = match self {
            Quorum::All => live,
            Quorum::Majority => live / 2 + 1,
            Quorum::Count(n) => (n as usize).min(live),
            Quorum::Percent(p) => (live * p as usize).div_ceil(100),
        };
        need.max(1).min(live.max(1))
    }
}

/// A readiness policy: a quorum, over the whole fleet or in each zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadinessPolicy {
    /// How many proxies must be ready.
    pub quorum: Quorum,
    /// Whether every zone that has live proxies must meet the quorum on its
    /// own.
    pub per_zone: bool,
}

impl Default for ReadinessPolicy {
    fn default() -> Self {
        ReadinessPolicy {
            quorum: Quorum::All,
            per_zone: false,
        }
    }
}

impl ReadinessPolicy {
    /// Parses `all`, `majority`, `N`, `P%`, optionally prefixed `per-zone:`.
    pub fn parse(text: &str) -> Result<ReadinessPolicy, String> {
        let text = text.trim();
        let (per_zone, rest) = match text.strip_prefix("per-zone:") {
            Some(rest) => (true, rest.trim()),
            None => (false, text),
        };
        let quorum = match rest {
            "all" => Quorum::All,
            "majority" => Quorum::Majority,
            _ => {
                if let Some(p) = rest.strip_suffix('%') {
                    match p.trim().parse::<u8>() {
                        Ok(p) if (1..=100).contains(&p) => Quorum::Percent(p),
                        _ => return Err(format!("percentage must be 1%..100%, got {rest:?}")),
                    }
                } else {
                    match rest.parse::<u32>() {
                        Ok(n) if n >= 1 => Quorum::Count(n),
                        _ => {
                            return Err(format!(
                                "expected all, majority, a count >= 1 or a percentage like 60%, optionally prefixed per-zone:, got {text:?}"
                            ));
                        }
                    }
                }
            }
        };
        Ok(ReadinessPolicy { quorum, per_zone })
    }
}

impl fmt::Display for ReadinessPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.per_zone {
            f.write_str("per-zone:")?;
        }
        match self.quorum {
            Quorum::All => f.write_str("all"),
            Quorum::Majority => f.write_str("majority"),
            Quorum::Count(n) => write!(f, "{n}"),
            Quorum::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// What a transition does when its deadline passes without readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum OnTimeout {
    /// Abandon the transition; the active spec keeps serving.
    #[default]
    KeepOld,
    /// Commit the new spec anyway.
    Force,
}

impl OnTimeout {
    /// Parses `keep-old` or `force`.
    pub fn parse(text: &str) -> Result<OnTimeout, String> {
        match text.trim() {
            "keep-old" => Ok(OnTimeout::KeepOld),
            "force" => Ok(OnTimeout::Force),
            other => Err(format!("expected keep-old or force, got {other:?}")),
        }
    }
}

/// Everything that governs one route's cutovers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutoverSettings {
    /// Readiness policy.
    pub policy: ReadinessPolicy,
    /// How long a transition may wait, in milliseconds.
    pub timeout_ms: u64,
    /// What happens after that.
    pub on_timeout: OnTimeout,
}

impl Default for CutoverSettings {
    fn default() -> Self {
        CutoverSettings {
            policy: ReadinessPolicy::default(),
            timeout_ms: 60_000,
            on_timeout: OnTimeout::KeepOld,
        }
    }
}

impl CutoverSettings {
    /// `defaults` overridden by whatever `switchyard.io/*` annotations are
    /// present. Errors name the annotation.
    pub fn from_annotations(
        annotations: &BTreeMap<String, String>,
        defaults: CutoverSettings,
    ) -> Result<CutoverSettings, (String, String)> {
        let mut out = defaults;
        if let Some(v) = annotations.get(ANNOTATION_POLICY) {
            out.policy = ReadinessPolicy::parse(v).map_err(|e| (ANNOTATION_POLICY.into(), e))?;
        }
        if let Some(v) = annotations.get(ANNOTATION_TIMEOUT) {
            let d = parse_duration(v).map_err(|e| (ANNOTATION_TIMEOUT.into(), e))?;
            out.timeout_ms = d.as_millis() as u64;
        }
        if let Some(v) = annotations.get(ANNOTATION_ON_TIMEOUT) {
            out.on_timeout = OnTimeout::parse(v).map_err(|e| (ANNOTATION_ON_TIMEOUT.into(), e))?;
        }
        Ok(out)
    }
}

/// Parses a human duration: a whole number followed by `ms`, `s`, `m` or
/// `h` (`500ms`, `30s`, `2m`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("duration {text:?} needs a unit (ms, s, m, h)"))?;
    let (num, unit) = text.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("duration {text:?} must start with a whole number"))?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => {
            return Err(format!(
                "duration {text:?} has unknown unit {unit:?} (ms, s, m, h)"
            ));
        }
    }
    .ok_or_else(|| format!("duration {text:?} is too large"))?;
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_round_trip() {
        for text in ["all", "majority", "2", "60%", "per-zone:all", "per-zone:1"] {
            let p = ReadinessPolicy::parse(text).unwrap();
            assert_eq!(p.to_string(), text);
        }
        assert!(ReadinessPolicy::parse("0").is_err());
        assert!(ReadinessPolicy::parse("101%").is_err());
        assert!(ReadinessPolicy::parse("most").is_err());
    }

    #[test]
    fn quorum_required_counts() {
        assert_eq!(Quorum::All.required(5), 5);
        assert_eq!(Quorum::Majority.required(4), 3);
        assert_eq!(Quorum::Majority.required(5), 3);
        assert_eq!(Quorum::Count(7).required(5), 5);
        assert_eq!(Quorum::Percent(60).required(5), 3);
        assert_eq!(Quorum::Percent(1).required(5), 1);
        // With nobody live, one is still required: "no proxies" is never "ready".
        assert_eq!(Quorum::All.required(0), 1);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5d").is_err());
    }
}
