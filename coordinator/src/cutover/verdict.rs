//! Policy over evidence: is a transition's readiness policy met, and a
//! one-line summary of why or why not.

use std::collections::BTreeMap;
use switchyard_proto::model::ReadinessPolicy;

/// The outcome of evaluating a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the policy is met.
    pub met: bool,
    /// E.g. `2 of 3 proxies ready (zone-a 1/1, zone-b 1/2); policy all`.
    pub summary: String,
}

/// The live proxies counted per zone: the same for every verdict of a
/// pass, so counted once for all of them.
#[derive(Debug, Default)]
pub struct Zones<'a> {
    /// Zone to live proxies in it.
    total: BTreeMap<&'a str, usize>,
    /// Live proxies in all.
    live: usize,
}

impl<'a> Zones<'a> {
    /// O(P).
    pub fn of(live: &BTreeMap<&str, &'a str>) -> Zones<'a> {
        let mut total: BTreeMap<&str, usize> = BTreeMap::new();
        for zone in live.values() {
            *total.entry(zone).or_default() += 1;
        }
        Zones {
            total,
            live: live.len(),
        }
    }
}

/// Ready proxies counted per zone: what a verdict rests on, before (and
/// without, when nothing is decided) writing its summary.
#[derive(Debug, Default)]
pub struct Tally<'a> {
    /// Zone to ready proxies in it (zones without any left out).
    ready: BTreeMap<&'a str, usize>,
    /// Ready proxies in all.
    count: usize,
}

impl<'a> Tally<'a> {
    /// The ready proxies given by their zones, one zone per proxy. O(R
    /// log zones) for R ready, whatever the fleet's size.
    pub fn of_zones(zones: impl Iterator<Item = &'a str>) -> Self {
        let mut tally = Tally::default();
        for zone in zones {
            *tally.ready.entry(zone).or_default() += 1;
            tally.count += 1;
        }
        tally
    }

    /// Whether `policy` is met; never with no live proxy. O(zones).
    pub fn meets(&self, policy: &ReadinessPolicy, zones: &Zones<'_>) -> bool {
        if zones.live == 0 {
            false
        } else if policy.per_zone {
            zones.total.iter().all(|(zone, total)| {
                self.ready.get(zone).copied().unwrap_or(0) >= policy.quorum.required(*total)
            })
        } else {
            self.count >= policy.quorum.required(zones.live)
        }
    }

    /// E.g. `2 of 3 proxies ready (zone-a 1/1, zone-b 1/2); policy all`,
    /// then each of `problems`. O(zones).
    pub fn summary(
        &self,
        policy: &ReadinessPolicy,
        zones: &Zones<'_>,
        problems: &[String],
    ) -> String {
        let mut summary = if zones.live == 0 {
            format!(
                "0 live proxies; policy {policy} needs at least one (the cutover timeout starts once one is live)"
            )
        } else {
            let per_zone: Vec<String> = zones
                .total
                .iter()
                .map(|(zone, total)| {
                    let ready = self.ready.get(zone).copied().unwrap_or(0);
                    format!("{zone} {ready}/{total}")
                })
                .collect();
            format!(
                "{} of {} proxies ready ({}); policy {policy}",
                self.count,
                zones.live,
                per_zone.join(", ")
            )
        };
        for problem in problems {
            summary.push_str("; ");
            summary.push_str(problem);
        }
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use switchyard_proto::model::Quorum;

    /// The `ready` ids among the `live` proxies, tallied by zone.
    fn tally_of<'a>(live: &BTreeMap<&str, &'a str>, ready: &[&str]) -> Tally<'a> {
        Tally::of_zones(ready.iter().filter_map(|id| live.get(id).copied()))
    }

    /// The verdict a pass reaches on these counts.
    fn evaluate(
        policy: &ReadinessPolicy,
        live: &BTreeMap<&str, &str>,
        ready: &BTreeSet<&str>,
        problems: &[String],
    ) -> Verdict {
        let zones = Zones::of(live);
        let ready: Vec<&str> = ready.iter().copied().collect();
        let tally = tally_of(live, &ready);
        Verdict {
            met: tally.meets(policy, &zones),
            summary: tally.summary(policy, &zones, problems),
        }
    }

    fn policy(quorum: Quorum, per_zone: bool) -> ReadinessPolicy {
        ReadinessPolicy { quorum, per_zone }
    }

    #[test]
    fn each_zone_counts_its_own_ready_proxies() {
        let live: BTreeMap<&str, &str> =
            [("a", "z1"), ("b", "z1"), ("c", "z2"), ("d", "z2")].into();
        // Every other proxy ready, so each zone has one of two.
        let ready: BTreeSet<&str> = ["b", "d"].into();
        let all = evaluate(&policy(Quorum::All, true), &live, &ready, &[]);
        assert!(!all.met);
        assert!(
            all.summary
                .contains("2 of 4 proxies ready (z1 1/2, z2 1/2)"),
            "{}",
            all.summary
        );
        assert!(evaluate(&policy(Quorum::Count(1), true), &live, &ready, &[]).met);
        assert!(!evaluate(&policy(Quorum::Majority, false), &live, &ready, &[]).met);
        let first_two: BTreeSet<&str> = ["a", "b"].into();
        let zone_one = evaluate(&policy(Quorum::Count(1), true), &live, &first_two, &[]);
        assert!(!zone_one.met, "z2 has none: {}", zone_one.summary);
        assert!(
            zone_one.summary.contains("z1 2/2, z2 0/2"),
            "{}",
            zone_one.summary
        );
    }

    #[test]
    fn ready_proxies_counted_by_zone_in_any_order() {
        let live: BTreeMap<&str, &str> =
            [("a", "z1"), ("b", "z2"), ("c", "z1"), ("d", "z1")].into();
        let zones = Zones::of(&live);
        let tally = Tally::of_zones(["z1", "z1", "z2", "z1"].into_iter());
        let all_per_zone = policy(Quorum::All, true);
        assert_eq!(
            tally.summary(&all_per_zone, &zones, &[]),
            format!("4 of 4 proxies ready (z1 3/3, z2 1/1); policy {all_per_zone}")
        );
        assert!(tally.meets(&all_per_zone, &zones));
        let by_id = tally_of(&live, &["a", "b", "x"]);
        assert!(
            !by_id.meets(&policy(Quorum::Count(2), true), &zones),
            "z1 has one"
        );
        assert!(by_id.meets(&policy(Quorum::Count(1), true), &zones));
        assert!(
            by_id
                .summary(&policy(Quorum::Majority, false), &zones, &["why".into()])
                .starts_with("2 of 4 proxies ready (z1 1/3, z2 1/1); policy ")
        );
    }
}
