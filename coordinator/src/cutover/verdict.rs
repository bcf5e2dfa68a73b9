//! Policy over evidence: is a transition's readiness policy met, and a
//! one-line summary of why or why not.

use std::collections::{BTreeMap, BTreeSet};
use switchyard_proto::model::ReadinessPolicy;

/// The outcome of evaluating a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the policy is met.
    pub met: bool,
    /// E.g. `2 of 3 proxies ready (zone-a 1/1, zone-b 1/2); policy all`.
    pub summary: String,
}

/// Evaluates `policy` over the `live` proxies (id to zone), of which
/// `ready` are ready: each has evidence showing every backend the
/// transition needs healthy at (or past) its endpoint generation (a
/// backend that does not exist is ready nowhere, and `problems` say why in
/// the summary). With no live proxy the policy is never met. Cost: O(P).
pub fn evaluate(
    policy: &ReadinessPolicy,
    live: &BTreeMap<&str, &str>,
    ready: &BTreeSet<&str>,
    problems: &[String],
) -> Verdict {
    let mut zones: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (proxy, zone) in live {
        let entry = zones.entry(zone).or_default();
        entry.1 += 1;
        if ready.contains(proxy) {
            entry.0 += 1;
        }
    }

    let met = if live.is_empty() {
        false
    } else if policy.per_zone {
        zones
            .values()
            .all(|(ready, total)| *ready >= policy.quorum.required(*total))
    } else {
        ready.len() >= policy.quorum.required(live.len())
    };

    let per_zone: Vec<String> = zones
        .iter()
        .map(|(zone, (r, t))| format!("{zone} {r}/{t}"))
        .collect();
    let mut summary = if live.is_empty() {
        format!(
            "0 live proxies; policy {policy} needs at least one (the cutover timeout starts once one is live)"
        )
    } else {
        format!(
            "{} of {} proxies ready ({}); policy {policy}",
            ready.len(),
            live.len(),
            per_zone.join(", ")
        )
    };
    for problem in problems {
        summary.push_str("; ");
        summary.push_str(problem);
    }
    Verdict { met, summary }
}
