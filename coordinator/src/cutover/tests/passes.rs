//! The cost of a decision pass and when one runs: only pending routes are
//! judged, an idle pass judges nothing, a heartbeat that changes nothing
//! starts none while changed evidence, a lease running out and a timeout
//! falling due each do; and every decision of a pass goes into one entry,
//! each carried out (or refused) on its own.

use super::*;
use crate::state::CommandError;

/// Services blue and green, proxies `p0`..`p{proxies-1}` in zone a, and
/// `routes` routes `r0`.. to green, all committed; `r0` then pending again
/// to blue.
fn many_committed(proxies: usize, routes: usize) -> (ReplicatedState, CutoverEngine) {
    let mut s = ReplicatedState::default();
    for i in 0..proxies {
        next(&mut s, register(&format!("p{i}"), "a"));
    }
    let mut resources = vec![service("blue"), service("green")];
    resources.extend((0..routes).map(|i| route(&format!("r{i}"), "green", "all", "keep-old")));
    next(&mut s, apply(resources));
    let ready: Vec<usize> = (0..proxies).collect();
    let e = engine_with_ready(&s, &ready);
    let decisions = e.decide(&s, 20);
    assert_eq!(decisions.len(), routes, "every route ready at once");
    let before = s.last_index;
    next(&mut s, Decision::batch(&decisions).expect("decisions"));
    assert_eq!(s.last_index, before + 1, "all of them in one entry");
    assert_eq!(s.pending_count(), 0, "every route committed");
    next(&mut s, apply(vec![route("r0", "blue", "all", "keep-old")]));
    (s, e)
}

/// What the leader loop does at `now`: a pass when one is due (returning
/// its judgement), nothing otherwise.
fn loop_turn(e: &mut CutoverEngine, s: &ReplicatedState, now: u64) -> Option<Judgement> {
    if !e.pass_due(s, now) {
        return None;
    }
    let mut copy = e.start_pass(s, now);
    let judgement = copy.run_pass(s, now);
    e.finish_pass(s, copy, &judgement);
    Some(judgement)
}

fn blue() -> BackendKey {
    BackendKey::new("default", "blue", 80)
}

#[test]
fn a_pass_judges_only_the_pending_route_and_an_idle_one_nothing() {
    let (s, mut e) = many_committed(3, 200);
    assert_eq!(s.routes.len(), 200);
    let judgement = loop_turn(&mut e, &s, 30).expect("a first pass");
    assert_eq!(judgement.evaluated, 1, "one route is pending");
    assert!(judgement.decisions.is_empty(), "nobody warmed blue yet");
    // Nothing changed, nothing fell due: the loop does nothing at all.
    assert!(loop_turn(&mut e, &s, 31).is_none());
    assert!(loop_turn(&mut e, &s, 500).is_none());
}

#[test]
fn only_news_or_a_due_time_starts_a_pass() {
    let (s, mut e) = many_committed(2, 50);
    assert!(loop_turn(&mut e, &s, 30).is_some());
    // Heartbeats of live proxies and the same evidence again are no news.
    assert!(heartbeat(&mut e, &s, "p0", BTreeMap::new(), 100));
    assert!(heartbeat(&mut e, &s, "p1", BTreeMap::new(), 100));
    assert!(report(&mut e, &s, "p1", green_ready(&s), 100));
    assert!(loop_turn(&mut e, &s, 110).is_none());
    // Evidence that changed is.
    let blue_ready = evidence(blue(), s.endpoint_generation(&blue()).unwrap(), 1);
    assert!(report(&mut e, &s, "p0", blue_ready.clone(), 120));
    let judgement = loop_turn(&mut e, &s, 120).expect("new evidence");
    assert_eq!(judgement.evaluated, 1);
    assert!(judgement.decisions.is_empty(), "p1 has not warmed blue");
    // p0 was last heard at 120 (its report), so its lease runs out at
    // 120 + TTL; p1 keeps renewing, with the same evidence. The loop is
    // told to look by then, and passes then, not before.
    assert!(heartbeat(&mut e, &s, "p1", BTreeMap::new(), 600));
    assert!(report(&mut e, &s, "p1", green_ready(&s), 600));
    assert!(loop_turn(&mut e, &s, 900).is_none());
    assert!(e.next_due_ms().is_some_and(|t| t <= 120 + TTL));
    assert!(loop_turn(&mut e, &s, 120 + TTL - 1).is_none());
    let judgement = loop_turn(&mut e, &s, 120 + TTL).expect("a lease ran out");
    assert!(
        judgement
            .decisions
            .iter()
            .any(|d| matches!(d, Decision::ExpireProxy { id, .. } if id == "p0")),
        "{:?}",
        judgement.decisions
    );
}

#[test]
fn a_timeout_falls_due_without_any_change() {
    // r0's timeout is 10 s; its proxy keeps its lease (same evidence).
    let (s, mut e) = many_committed(1, 10);
    let first = loop_turn(&mut e, &s, 30).expect("a first pass");
    assert_eq!(first.next_timeout_ms, Some(30 + 10_000));
    let mut now = 30;
    let mut passes = 0;
    let mut abandoned = false;
    while now <= 30 + 10_000 {
        now += 250;
        assert!(heartbeat(&mut e, &s, "p0", BTreeMap::new(), now));
        assert!(report(&mut e, &s, "p0", green_ready(&s), now));
        if let Some(j) = loop_turn(&mut e, &s, now) {
            passes += 1;
            abandoned |= j
                .decisions
                .iter()
                .any(|d| matches!(d, Decision::Abandon { route, .. } if route.name == "r0"));
        }
    }
    assert_eq!(passes, 1, "one pass, when the timeout fell due");
    assert!(abandoned, "r0 timed out with keep-old");
}

#[test]
fn a_batch_carries_out_each_decision_on_its_own() {
    let mut s = world(&["a"], "all", "keep-old");
    next(
        &mut s,
        apply(vec![route("other", "green", "all", "keep-old")]),
    );
    let e = engine_with_ready(&s, &[0]);
    let decisions = e.decide(&s, 20);
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    let refused = |a: &Result<_, CommandError>| a.as_ref().err().cloned();

    // Each decision is fenced by the one entry's term.
    let command = Decision::batch(&decisions).expect("decisions");
    let stale = s.apply(LogPosition::new(s.last_index + 1, TERM + 1), &command);
    for answer in Decision::answers(&decisions, stale) {
        assert!(
            matches!(refused(&answer), Some(CommandError::StaleDecision { .. })),
            "{answer:?}"
        );
    }
    assert_eq!(s.pending_count(), 2, "nothing carried out");

    // `r` is overtaken before the entry, and `other` is decided twice:
    // only the first `other` is carried out.
    next(&mut s, apply(vec![route("r", "blue", "all", "keep-old")]));
    let mut decisions = decisions;
    decisions.push(decisions[0].clone());
    let command = Decision::batch(&decisions).expect("decisions");
    let response = s.apply(LogPosition::new(s.last_index + 1, TERM), &command);
    let answers = Decision::answers(&decisions, response);
    let about = |name: &str| -> Vec<Option<CommandError>> {
        decisions
            .iter()
            .zip(&answers)
            .filter(|(d, _)| matches!(d, Decision::Commit { route, .. } if route.name == name))
            .map(|(_, a)| refused(a))
            .collect()
    };
    assert!(
        matches!(&about("r")[..], [Some(CommandError::NotPending { .. })]),
        "{answers:?}"
    );
    assert!(
        matches!(
            &about("other")[..],
            [None, Some(CommandError::NotPending { .. })]
        ),
        "{answers:?}"
    );
    assert!(
        s.routes[&ObjectName::new("default", "other")]
            .pending
            .is_none()
    );
    assert!(
        s.routes[&r()].pending.is_some(),
        "r's newer generation waits"
    );
}

#[test]
fn a_timeout_starts_when_a_proxy_is_live_however_long_nobody_was() {
    // `r` is pending (10 s timeout, keep-old) and no proxy exists.
    let mut s = world(&[], "all", "keep-old");
    let mut e = CutoverEngine::leading(settings(), &s, 0, TERM);
    let first = loop_turn(&mut e, &s, 0).expect("a first pass");
    assert_eq!(first.evaluated, 1);
    assert_eq!(first.next_timeout_ms, None, "nobody live: no timeout runs");
    assert_eq!(e.next_due_ms(), None, "nothing falls due");
    assert!(
        loop_turn(&mut e, &s, 60_000).is_none(),
        "a minute of nothing"
    );
    next(&mut s, register("p0", "a"));
    let judgement = loop_turn(&mut e, &s, 60_005).expect("a registration");
    assert!(
        judgement.decisions.is_empty(),
        "the timeout starts now, not a minute ago: {:?}",
        judgement.decisions
    );
    assert_eq!(judgement.next_timeout_ms, Some(60_005 + 10_000));
    assert_eq!(
        e.first_seen_ms(&r(), s.routes[&r()].newest_generation()),
        Some(60_005)
    );
}

/// Proxies `p0..`, and `routes` routes `r<i>`, each pending to its own
/// Service `s<i>` under policy all.
fn pending_routes_world(proxies: usize, routes: usize) -> ReplicatedState {
    let mut s = ReplicatedState::default();
    for i in 0..proxies {
        next(&mut s, register(&format!("p{i}"), "a"));
    }
    let services: Vec<String> = (0..routes).map(|i| format!("s{i}")).collect();
    let mut resources: Vec<Resource> = services.iter().map(|n| service(n)).collect();
    resources.extend(
        services
            .iter()
            .enumerate()
            .map(|(i, n)| route(&format!("r{i}"), n, "all", "keep-old")),
    );
    next(&mut s, apply(resources));
    s
}

#[test]
fn when_only_evidence_changed_a_pass_judges_only_the_routes_on_those_backends() {
    // Three proxies, 30 pending routes each to its own Service.
    let mut s = pending_routes_world(3, 30);
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    for id in ["p0", "p1", "p2"] {
        assert!(heartbeat(&mut e, &s, id, BTreeMap::new(), 10));
    }
    let ready = |s: &ReplicatedState, name: &str| {
        let b = BackendKey::new("default", name, 80);
        evidence(b.clone(), s.endpoint_generation(&b).unwrap(), 1)
    };
    assert_eq!(loop_turn(&mut e, &s, 20).expect("first").evaluated, 30);

    // p0 and p1 warm s7: only r7 is judged, and it waits for p2.
    assert!(report(&mut e, &s, "p0", ready(&s, "s7"), 30));
    assert!(report(&mut e, &s, "p1", ready(&s, "s7"), 30));
    let judgement = loop_turn(&mut e, &s, 30).expect("evidence changed");
    assert_eq!(judgement.evaluated, 1);
    assert!(judgement.decisions.is_empty());
    // p2 warms s7 and s8: r7 commits, r8 is judged and waits.
    let mut both = ready(&s, "s7");
    both.extend(ready(&s, "s8"));
    assert!(report(&mut e, &s, "p2", both, 40));
    let judgement = loop_turn(&mut e, &s, 40).expect("evidence changed");
    assert_eq!(judgement.evaluated, 2);
    assert!(
        matches!(judgement.decisions.as_slice(), [Decision::Commit { route, .. }] if route.name == "r7"),
        "{:?}",
        judgement.decisions
    );
    // The commit is a new entry: everything pending is judged again.
    next(&mut s, Decision::batch(&judgement.decisions).unwrap());
    assert_eq!(loop_turn(&mut e, &s, 50).expect("new entry").evaluated, 29);
    // A proxy live again (news beyond evidence) widens the pass too.
    assert!(loop_turn(&mut e, &s, 60).is_none());
    e.forget("p2");
    assert_eq!(
        loop_turn(&mut e, &s, 70).expect("fleet changed").evaluated,
        29
    );
}

#[test]
fn a_report_listing_more_backends_than_routes_pending_widens_the_pass_instead() {
    // Three pending routes; one proxy's report names 40 backends at once
    // (a whole set reaching a new leader): judging the three costs less
    // than listing the 40, so all three are judged.
    let s = pending_routes_world(1, 3);
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    assert!(heartbeat(&mut e, &s, "p0", BTreeMap::new(), 10));
    assert_eq!(loop_turn(&mut e, &s, 20).expect("first").evaluated, 3);
    let many: Vec<_> = (0..40)
        .flat_map(|i| evidence(BackendKey::new("default", format!("other-{i}"), 80), 1, 1))
        .collect();
    assert!(report(&mut e, &s, "p0", many, 30));
    assert_eq!(loop_turn(&mut e, &s, 30).expect("evidence").evaluated, 3);
}

/// While some live proxy has no evidence yet or an empty set (a fleet
/// coming up), a pass
/// finds every route whose policy those without it decide waiting
/// without reading any evidence; a policy the proxies with evidence could
/// meet, a route needing no backend and a route timing out are judged in
/// full, and once the last proxy reports nothing is found by the bound.
#[test]
fn a_pass_finds_routes_waiting_on_proxies_without_evidence_by_the_bound() {
    let mut s = world(&["a", "a", "b"], "all", "keep-old");
    let mut no_backend = route("n", "green", "all", "keep-old");
    if let Resource::HttpRoute(route) = &mut no_backend {
        route.rules[0].backend_refs.clear();
    }
    next(
        &mut s,
        apply(vec![
            route("m", "green", "majority", "keep-old"),
            no_backend,
        ]),
    );
    // p0 and p1 have green ready; p2 is live and has warmed nothing yet.
    let mut e = engine_with_ready(&s, &[0, 1]);
    report(&mut e, &s, "p2", Vec::new(), 15);
    let judgement = e.judge(&s, 20);
    assert_eq!(judgement.evaluated, 3);
    assert_eq!(judgement.bounded, 1, "only r (all) waits by the bound");
    let committed: Vec<&str> = judgement
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Commit { route, summary, .. } => {
                assert!(summary.contains("of 3 proxies ready"), "{summary}");
                Some(route.name.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(committed, ["m", "n"], "majority met by two, n needs no one");
    assert!(judgement.next_timeout_ms.is_some(), "r still times out");

    // At r's timeout, with p2 still without evidence, r gets its full
    // verdict in the decision.
    for id in ["p0", "p1", "p2"] {
        heartbeat(&mut e, &s, id, Default::default(), 9_900);
    }
    for id in ["p0", "p1"] {
        report(&mut e, &s, id, green_ready(&s), 9_900);
    }
    let timed_out = e.judge(&s, 10_000);
    assert_eq!(timed_out.bounded, 0, "a route timing out is judged in full");
    let reasons: Vec<&str> = timed_out
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Abandon { route, reason, .. } if route.name == "r" => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 1, "{:?}", timed_out.decisions);
    assert!(
        reasons[0].contains("2 of 3 proxies ready (a 2/2, b 0/1)"),
        "{}",
        reasons[0]
    );

    // Before the timeout, p2's evidence arriving ends the bound.
    let mut e = engine_with_ready(&s, &[0, 1]);
    assert!(report(&mut e, &s, "p2", green_ready(&s), 20));
    let judgement = e.judge(&s, 30);
    assert_eq!(judgement.bounded, 0);
    assert_eq!(
        judgement
            .decisions
            .iter()
            .filter(|d| matches!(d, Decision::Commit { forced: false, .. }))
            .count(),
        3,
        "{:?}",
        judgement.decisions
    );
}
