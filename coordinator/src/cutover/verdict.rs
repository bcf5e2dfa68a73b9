//! Policy over evidence: is a transition's readiness policy met, and a
//! one-line summary of why or why not.

use super::evidence::BackendEvidence;
use std::collections::{BTreeMap, BTreeSet};
use switchyard_proto::model::{BackendKey, ReadinessPolicy};

/// The outcome of evaluating a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the policy is met.
    pub met: bool,
    /// E.g. `2 of 3 proxies ready (zone-a 1/1, zone-b 1/2); policy all`.
    pub summary: String,
}

/// Evaluates `policy` for a transition that needs `needed` backends (each
/// at an endpoint generation, `None` when it does not exist), over the
/// `live` proxies (id to zone) and the current evidence of each
/// (`evidence(proxy)`). A proxy is ready when it has evidence showing every
/// needed backend healthy at (or past) its generation; a backend that does
/// not exist is ready nowhere, and `problems` say why in the summary. With
/// no live proxy the policy is never met.
pub fn evaluate<'a>(
    policy: &ReadinessPolicy,
    live: &BTreeMap<String, String>,
    needed: &BTreeMap<BackendKey, Option<u64>>,
    problems: &[String],
    evidence: impl Fn(&str) -> Option<&'a BTreeMap<BackendKey, BackendEvidence>>,
) -> Verdict {
    let ready: BTreeSet<&String> = live
        .keys()
        .filter(|proxy| {
            needed.iter().all(|(backend, generation)| {
                generation.is_some_and(|generation| {
                    evidence(proxy.as_str())
                        .and_then(|e| e.get(backend))
                        .is_some_and(|e| e.ready_at(generation))
                })
            })
        })
        .collect();

    let mut zones: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (proxy, zone) in live {
        let entry = zones.entry(zone.as_str()).or_default();
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
