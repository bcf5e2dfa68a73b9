//! Which commits an apply carries (`with_apply`): the routes it leaves
//! pending that the fleet's current evidence already shows ready, judged
//! by a pass's verdict, and what the state machine then makes of them.

use super::*;

/// `route(name, "green", policy, "keep-old")` answering only for `host`.
fn green_route_for(name: &str, host: &str, policy: &str) -> Resource {
    let mut r = route(name, "green", policy, "keep-old");
    if let Resource::HttpRoute(spec) = &mut r {
        spec.hostnames = vec![host.into()];
    }
    r
}

/// Two proxies (zones a and b), `r` committed on green, both proxies
/// ready for green, at t=20.
fn warm_world(policy: &str) -> (ReplicatedState, CutoverEngine) {
    let mut s = world(&["a", "b"], policy, "keep-old");
    let e = engine_with_ready(&s, &[0, 1]);
    for decision in route_decisions(&e, &s, 20) {
        next(&mut s, decision.command());
    }
    assert!(s.routes[&r()].pending.is_none(), "r committed");
    (s, e)
}

#[test]
fn a_new_spec_on_backends_every_proxy_is_ready_for_is_committed_by_its_own_entry() {
    let (mut s, e) = warm_world("all");
    let change = apply(vec![green_route_for("r", "a.test", "all")]);
    let commits = e.clone().commits_with_apply(&s, &change, 30);
    assert!(
        matches!(&commits[..], [Decision::Commit { route, forced: false, .. }] if *route == r()),
        "{commits:?}"
    );
    let command = Decision::with_apply(change, &commits);
    assert!(matches!(command, Command::ApplyAndCommit { .. }));
    let index = s.last_index + 1;
    let outcome = s
        .apply(LogPosition::new(index, TERM), &command)
        .0
        .expect("accepted");
    assert!(outcome.decisions[0].is_ok(), "{outcome:?}");
    let record = &s.routes[&r()];
    assert!(record.pending.is_none());
    assert_eq!(record.active.as_ref().unwrap().generation, index);
    // Nothing left for a pass.
    assert!(route_decisions(&e, &s, 40).is_empty());
}

#[test]
fn an_apply_carries_no_commit_its_policy_does_not_allow_yet() {
    // Only p0 is ready for green under `all`.
    let mut s = world(&["a", "b"], "1", "keep-old");
    let mut e = engine_with_ready(&s, &[0]);
    for decision in route_decisions(&e, &s, 20) {
        next(&mut s, decision.command());
    }
    let change = apply(vec![green_route_for("r", "a.test", "all")]);
    assert!(e.clone().commits_with_apply(&s, &change, 30).is_empty());
    assert_eq!(
        Decision::with_apply(change.clone(), &[]),
        change,
        "no commits: the apply alone"
    );
    // A backend nobody has warmed.
    let (s, e2) = warm_world("all");
    let to_blue = apply(vec![route("r", "blue", "all", "keep-old")]);
    assert!(e2.clone().commits_with_apply(&s, &to_blue, 30).is_empty());
    // Under `1`, p0 alone is enough.
    report(&mut e, &s, "p0", green_ready(&s), 30);
    let change = apply(vec![green_route_for("r", "b.test", "1")]);
    assert_eq!(e.clone().commits_with_apply(&s, &change, 40).len(), 1);
}

#[test]
fn no_commit_with_an_apply_during_the_grace_or_before_the_leaders_own_entry() {
    let (s, _) = warm_world("all");
    let change = apply(vec![green_route_for("r", "a.test", "all")]);
    // A new leader: p1 not heard from since it took over.
    let mut fresh = CutoverEngine::new(settings(), &s, 1_000, TERM);
    report(&mut fresh, &s, "p0", green_ready(&s), 1_010);
    heartbeat(&mut fresh, &s, "p0", Default::default(), 1_010);
    assert!(
        fresh
            .clone()
            .commits_with_apply(&s, &change, 1_020)
            .is_empty(),
        "in grace"
    );
    // A leader of a later term that has not applied its own entry yet.
    let later = CutoverEngine::new(settings(), &s, 0, TERM + 1);
    assert!(later.clone().commits_with_apply(&s, &change, 20).is_empty());
}

#[test]
fn a_bulk_apply_is_left_to_the_passes() {
    let (s, e) = warm_world("all");
    let many = |n: usize| {
        apply(
            (0..n)
                .map(|i| green_route_for(&format!("bulk{i}"), "a.test", "all"))
                .collect(),
        )
    };
    assert_eq!(
        e.clone()
            .commits_with_apply(&s, &many(MAX_ROUTES_JUDGED_WITH_APPLY), 30)
            .len(),
        MAX_ROUTES_JUDGED_WITH_APPLY
    );
    assert!(
        e.clone()
            .commits_with_apply(&s, &many(MAX_ROUTES_JUDGED_WITH_APPLY + 1), 30)
            .is_empty()
    );
}

#[test]
fn a_carried_commit_whose_endpoints_moved_before_its_entry_waits_for_new_evidence() {
    let (mut s, e) = warm_world("all");
    let change = apply(vec![green_route_for("r", "a.test", "all")]);
    let carried = e.clone().commits_with_apply(&s, &change, 30);
    assert_eq!(carried.len(), 1);
    // Green's endpoints move in an entry committed before the apply's.
    let mut meta = ObjectMeta::named("default", "green-slice");
    meta.labels
        .insert(SERVICE_NAME_LABEL.into(), "green".into());
    next(
        &mut s,
        apply(vec![Resource::EndpointSlice(EndpointSlice {
            meta,
            address_type: "IPv4".into(),
            ports: vec![],
            endpoints: vec![],
            cluster: None,
        })]),
    );
    let index = s.last_index + 1;
    let outcome = s
        .apply(
            LogPosition::new(index, TERM),
            &Decision::with_apply(change, &carried),
        )
        .0
        .expect("the apply stands");
    assert!(
        matches!(
            outcome.decisions[..],
            [Err(CommandError::EvidenceOutdated { .. })]
        ),
        "{outcome:?}"
    );
    assert_eq!(
        s.routes[&r()].pending.as_ref().unwrap().target.generation,
        index
    );
    // The proxies' evidence is for the old endpoints: no pass commits it.
    assert!(!commits(&e, &s, 40));
}

#[test]
fn a_proxy_registered_since_the_last_look_counts_as_live_and_not_ready() {
    // Found by the simulation (invariant 1, seed 158): on a registry as
    // the last look left it, p1's new registration was not live, so zone
    // b had nobody to wait for and "per zone" was met by zone a alone.
    let (mut s, e) = warm_world("per-zone:1");
    next(&mut s, register("p1", "b"));
    let change = apply(vec![green_route_for("r", "a.test", "per-zone:1")]);
    assert!(
        e.clone().commits_with_apply(&s, &change, 30).is_empty(),
        "p1 (zone b) registered again and has not reported since"
    );
    // Once its new registration reports green ready, the apply carries
    // the commit.
    let mut e = e;
    e.sync(&s, 40);
    report(&mut e, &s, "p1", green_ready(&s), 40);
    assert_eq!(e.commits_with_apply(&s, &change, 50).len(), 1);
}
