//! Unit tests of the pure cutover decision: each policy, each zone case,
//! leases, the new-leader grace, supersede, timeouts on the leader's own
//! clock, missing Services, registrations and per-route isolation. The
//! decisions' fence is tested on the state machine (`state::fence_tests`).

use super::*;
use crate::state::{Command, CommandError, DecisionBasis, LogPosition, ReplicatedState};
use std::collections::BTreeMap;
use switchyard_proto::model::*;

mod incremental;
mod passes;
mod safety;
mod sockets;
mod with_apply;

pub(super) const TTL: u64 = 1_000;
/// The term every test state is written in and every engine leads.
pub(super) const TERM: u64 = 1;

pub(super) fn settings() -> EngineSettings {
    EngineSettings { lease_ttl_ms: TTL }
}

pub(super) fn service(name: &str) -> Resource {
    Resource::Service(Service {
        meta: ObjectMeta::named("default", name),
        ports: vec![ServicePort {
            name: None,
            port: 80,
            target_port: None,
            app_protocol: None,
        }],
    })
}

pub(super) fn route(name: &str, backend: &str, policy: &str, on_timeout: &str) -> Resource {
    let mut meta = ObjectMeta::named("default", name);
    meta.annotations
        .insert(ANNOTATION_POLICY.into(), policy.into());
    meta.annotations
        .insert(ANNOTATION_TIMEOUT.into(), "10s".into());
    meta.annotations
        .insert(ANNOTATION_ON_TIMEOUT.into(), on_timeout.into());
    Resource::HttpRoute(HttpRoute {
        kind: Default::default(),
        meta,
        parent_refs: vec![],
        hostnames: vec![],
        rules: vec![RouteRule {
            backend_refs: vec![BackendRef::service(backend, 80)],
            ..Default::default()
        }],
    })
}

/// Applies `command` as the next entry of `s`, in [`TERM`].
pub(super) fn next(s: &mut ReplicatedState, command: Command) -> u64 {
    let index = s.last_index + 1;
    s.apply(LogPosition::new(index, TERM), &command)
        .0
        .expect("accepted");
    index
}

pub(super) fn apply(resources: Vec<Resource>) -> Command {
    Command::Apply {
        resources,
        defaults: CutoverSettings::default(),
        limits: None,
        validation: Some(1),
    }
}

pub(super) fn register(id: &str, zone: &str) -> Command {
    Command::RegisterProxy {
        id: id.into(),
        zone: zone.into(),
        admin_address: String::new(),
    }
}

/// A state with services blue and green, proxies in the given zones
/// (`p0`, `p1`, ...) and a pending route `r` to green under `policy`.
pub(super) fn world(zones: &[&str], policy: &str, on_timeout: &str) -> ReplicatedState {
    let mut s = ReplicatedState::default();
    for (i, zone) in zones.iter().enumerate() {
        next(&mut s, register(&format!("p{i}"), zone));
    }
    next(
        &mut s,
        apply(vec![
            service("blue"),
            service("green"),
            route("r", "green", policy, on_timeout),
        ]),
    );
    s
}

pub(super) fn green() -> BackendKey {
    BackendKey::new("default", "green", 80)
}

pub(super) fn evidence(
    backend: BackendKey,
    generation: u64,
    healthy: u32,
) -> Vec<(BackendKey, BackendEvidence)> {
    vec![(
        backend,
        BackendEvidence {
            endpoints_generation: generation,
            healthy,
            total: 1,
        },
    )]
}

/// Green healthy at its current endpoint generation in `s`.
pub(super) fn green_ready(s: &ReplicatedState) -> Vec<(BackendKey, BackendEvidence)> {
    evidence(green(), s.endpoint_generation(&green()).unwrap(), 1)
}

pub(super) fn r() -> ObjectName {
    ObjectName::new("default", "r")
}

pub(super) fn registration(s: &ReplicatedState, id: &str) -> u64 {
    s.proxies[id].registered_index
}

/// A heartbeat from `id`'s current registration.
pub(super) fn heartbeat(
    e: &mut CutoverEngine,
    s: &ReplicatedState,
    id: &str,
    applied: BTreeMap<ObjectName, u64>,
    now: u64,
) -> bool {
    e.heartbeat(s, id, registration(s, id), applied, now)
}

/// A report from `id`'s current registration.
pub(super) fn report(
    e: &mut CutoverEngine,
    s: &ReplicatedState,
    id: &str,
    backends: Vec<(BackendKey, BackendEvidence)>,
    now: u64,
) -> bool {
    e.report(s, id, registration(s, id), backends, now)
}

/// Engine started at t=0; every proxy heartbeats at t=10 (ending the
/// grace), the listed ones report green ready.
pub(super) fn engine_with_ready(state: &ReplicatedState, ready: &[usize]) -> CutoverEngine {
    let mut e = CutoverEngine::new(settings(), state, 0, TERM);
    for id in state.proxies.keys() {
        assert!(heartbeat(&mut e, state, id, Default::default(), 10));
    }
    for i in ready {
        assert!(report(
            &mut e,
            state,
            &format!("p{i}"),
            green_ready(state),
            10
        ));
    }
    e
}

pub(super) fn commits(e: &CutoverEngine, s: &ReplicatedState, now: u64) -> bool {
    e.decide(s, now)
        .iter()
        .any(|d| matches!(d, Decision::Commit { forced: false, .. }))
}

/// Decisions about routes only (leases expire in long tests too).
pub(super) fn route_decisions(e: &CutoverEngine, s: &ReplicatedState, now: u64) -> Vec<Decision> {
    e.decide(s, now)
        .into_iter()
        .filter(|d| !matches!(d, Decision::ExpireProxy { .. }))
        .collect()
}

#[test]
fn all_needs_every_live_proxy() {
    let s = world(&["a", "a", "a"], "all", "keep-old");
    assert!(!commits(&engine_with_ready(&s, &[0, 1]), &s, 20));
    assert!(commits(&engine_with_ready(&s, &[0, 1, 2]), &s, 20));
}

#[test]
fn majority_count_and_percent() {
    let s = world(&["a"; 5], "majority", "keep-old");
    assert!(!commits(&engine_with_ready(&s, &[0, 1]), &s, 20));
    assert!(commits(&engine_with_ready(&s, &[0, 1, 2]), &s, 20));

    let s = world(&["a"; 5], "2", "keep-old");
    assert!(!commits(&engine_with_ready(&s, &[0]), &s, 20));
    assert!(commits(&engine_with_ready(&s, &[3, 4]), &s, 20));

    let s = world(&["a"; 5], "60%", "keep-old");
    assert!(!commits(&engine_with_ready(&s, &[0, 1]), &s, 20));
    assert!(commits(&engine_with_ready(&s, &[0, 1, 2]), &s, 20));
}

#[test]
fn per_zone_needs_every_zone_on_its_own() {
    // Zones a (p0, p1) and b (p2). Majority overall would be 2 of 3.
    let s = world(&["a", "a", "b"], "per-zone:majority", "keep-old");
    let e = engine_with_ready(&s, &[0, 1]);
    assert!(!commits(&e, &s, 20), "zone b has no ready proxy");
    let v = e.verdict(&s, &r(), 20).unwrap();
    assert!(v.summary.contains("a 2/2, b 0/1"), "{}", v.summary);
    // Majority of zone a's two proxies is both of them.
    assert!(!commits(&engine_with_ready(&s, &[0, 2]), &s, 20));
    assert!(commits(&engine_with_ready(&s, &[0, 1, 2]), &s, 20));

    let s = world(&["a", "a", "b", "b"], "per-zone:all", "keep-old");
    assert!(!commits(&engine_with_ready(&s, &[0, 1, 2]), &s, 20));
    assert!(commits(&engine_with_ready(&s, &[0, 1, 2, 3]), &s, 20));
}

#[test]
fn no_live_proxy_is_never_all_ready() {
    let s = world(&[], "all", "keep-old");
    let e = CutoverEngine::new(settings(), &s, 0, TERM);
    assert!(!commits(&e, &s, 5_000));
    assert!(
        e.verdict(&s, &r(), 5_000)
            .unwrap()
            .summary
            .contains("0 live proxies")
    );
}

#[test]
fn stale_or_unhealthy_evidence_does_not_count() {
    let s = world(&["a"], "all", "keep-old");
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    let generation = s.endpoint_generation(&green()).unwrap();
    report(&mut e, &s, "p0", evidence(green(), generation - 1, 1), 10);
    assert!(!commits(&e, &s, 20), "evidence about an older endpoint set");
    report(&mut e, &s, "p0", evidence(green(), generation, 0), 10);
    assert!(!commits(&e, &s, 20), "no healthy endpoint");
    report(&mut e, &s, "p0", evidence(green(), generation, 1), 10);
    assert!(commits(&e, &s, 20));
}

#[test]
fn evidence_from_unregistered_proxies_is_refused() {
    let s = world(&["a"], "1", "keep-old");
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    assert!(!e.report(&s, "intruder", 1, green_ready(&s), 10));
    assert!(!e.heartbeat(&s, "intruder", 1, Default::default(), 10));
    assert!(!commits(&e, &s, 20));
}

#[test]
fn a_silent_proxy_expires_and_stops_blocking_all() {
    let s = world(&["a", "a"], "all", "keep-old");
    let mut e = engine_with_ready(&s, &[0]);
    assert!(!commits(&e, &s, 20));
    // p0 keeps reporting, p1 goes silent.
    report(&mut e, &s, "p0", green_ready(&s), 900);
    let later = 10 + TTL;
    let decisions = e.decide(&s, later);
    assert!(
        decisions.contains(&Decision::ExpireProxy {
            id: "p1".into(),
            registration: registration(&s, "p1"),
            term: TERM
        }),
        "{decisions:?}"
    );
    assert!(
        decisions
            .iter()
            .any(|d| matches!(d, Decision::Commit { .. })),
        "{decisions:?}"
    );
}

#[test]
fn a_new_leader_waits_out_its_grace_unless_everyone_is_back() {
    let s = world(&["a", "a"], "1", "keep-old");
    let mut e = CutoverEngine::new(settings(), &s, 1_000, TERM);
    // p0 reconnects and reports; p1 has not reconnected yet.
    report(&mut e, &s, "p0", green_ready(&s), 1_010);
    assert!(
        !commits(&e, &s, 1_020),
        "policy met, but p1 had no TTL to reconnect"
    );
    assert!(commits(&e, &s, 1_000 + TTL), "grace over");
    // If every registered proxy is back, no need to wait.
    heartbeat(&mut e, &s, "p1", Default::default(), 1_030);
    assert!(commits(&e, &s, 1_040));
}

#[test]
fn the_end_of_the_grace_is_told_once_with_how_long_it_took() {
    let s = world(&["a", "a"], "1", "keep-old");
    let mut e = CutoverEngine::new(settings(), &s, 1_000, TERM);
    report(&mut e, &s, "p0", green_ready(&s), 1_010);
    assert_eq!(e.grace_just_ended(&s, 1_020), None, "p1 not back yet");
    heartbeat(&mut e, &s, "p1", Default::default(), 1_030);
    assert_eq!(e.grace_just_ended(&s, 1_040), Some(40), "everyone back");
    assert_eq!(e.grace_just_ended(&s, 1_050), None, "told once");
    // Without everyone back, a lease TTL ends it.
    let mut e = CutoverEngine::new(settings(), &s, 1_000, TERM);
    assert_eq!(e.grace_just_ended(&s, 1_000 + TTL - 1), None);
    assert_eq!(e.grace_just_ended(&s, 1_000 + TTL), Some(TTL));
}

#[test]
fn a_pause_for_the_quorum_keeps_evidence_and_renews_every_lease() {
    let s = world(&["a", "a"], "all", "keep-old");
    let mut e = engine_with_ready(&s, &[0, 1]);
    assert!(e.pause_for_quorum(500), "the pause starts");
    assert!(!e.pause_for_quorum(600), "and is not started twice");
    // Back 800 ms later: nobody was heard from meanwhile (their calls were
    // refused), yet nobody expires and the evidence still counts.
    assert_eq!(e.resume_after_quorum(1_300), Some(800));
    assert_eq!(e.resume_after_quorum(1_300), None, "resumed once");
    assert!(e.pass_due(&s, 1_300), "the next look judges again");
    let decisions = e.decide(&s, 10 + TTL - 1);
    assert!(
        decisions
            .iter()
            .all(|d| !matches!(d, Decision::ExpireProxy { .. })),
        "{decisions:?}"
    );
    assert!(commits(&e, &s, 10 + TTL - 1), "evidence kept");
    // Evidence still counts only within a TTL of its arrival, and a lease
    // renewed at the resume runs out a TTL after it.
    assert!(!commits(&e, &s, 10 + TTL), "evidence is a TTL old");
    let expired = e
        .decide(&s, 1_300 + TTL)
        .into_iter()
        .filter(|d| matches!(d, Decision::ExpireProxy { .. }))
        .count();
    assert_eq!(expired, 2, "silent for a TTL after the resume");
}

#[test]
fn a_new_leader_never_expires_live_proxies_at_once() {
    let s = world(&["a"], "all", "keep-old");
    let e = CutoverEngine::new(settings(), &s, 50_000, TERM);
    assert!(
        e.decide(&s, 50_000 + TTL - 1)
            .iter()
            .all(|d| !matches!(d, Decision::ExpireProxy { .. }))
    );
}

#[test]
fn timeout_keeps_old_or_forces() {
    let s = world(&["a"], "all", "keep-old");
    let mut e = engine_with_ready(&s, &[]);
    heartbeat(&mut e, &s, "p0", Default::default(), 9_500);
    assert!(route_decisions(&e, &s, 9_999).is_empty());
    match &route_decisions(&e, &s, 10_000)[..] {
        [Decision::Abandon { reason, .. }] => {
            assert!(reason.contains("timed out after 10000ms"), "{reason}");
            assert!(reason.contains("0 of 1 proxies ready"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let s = world(&["a"], "all", "force");
    let mut e = engine_with_ready(&s, &[]);
    heartbeat(&mut e, &s, "p0", Default::default(), 9_500);
    assert!(matches!(
        &route_decisions(&e, &s, 10_000)[..],
        [Decision::Commit { forced: true, .. }]
    ));
}

#[test]
fn decisions_name_the_newest_generation_after_a_supersede() {
    let mut s = world(&["a"], "all", "keep-old");
    let index = next(&mut s, apply(vec![route("r", "blue", "all", "keep-old")]));
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    heartbeat(&mut e, &s, "p0", Default::default(), 10);
    // Ready for green (the superseded target) does not help.
    report(&mut e, &s, "p0", green_ready(&s), 10);
    assert!(!commits(&e, &s, 20));
    let blue = BackendKey::new("default", "blue", 80);
    let blue_generation = s.endpoint_generation(&blue).unwrap();
    report(
        &mut e,
        &s,
        "p0",
        evidence(blue.clone(), blue_generation, 2),
        10,
    );
    match &e.decide(&s, 20)[..] {
        [
            Decision::Commit {
                generation, basis, ..
            },
        ] => {
            assert_eq!(*generation, index, "the supersede's own log index");
            assert_eq!(basis.term, TERM);
            assert_eq!(basis.endpoints, vec![(blue, blue_generation)]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_stuck_route_never_delays_another() {
    let mut s = world(&["a"], "all", "keep-old");
    // A second route whose backend (blue) is ready while green never is.
    next(
        &mut s,
        apply(vec![route("other", "blue", "all", "keep-old")]),
    );
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    let blue = BackendKey::new("default", "blue", 80);
    let generation = s.endpoint_generation(&blue).unwrap();
    report(&mut e, &s, "p0", evidence(blue, generation, 1), 10);
    let decisions = e.decide(&s, 20);
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert!(matches!(&decisions[0], Decision::Commit { route, .. } if route.name == "other"));
}

/// A world of one proxy per zone in `zones` whose route's transition is
/// committed (forced): the state and the route's active generation.
fn committed_world(zones: &[&str]) -> (ReplicatedState, u64) {
    let mut s = world(zones, "all", "keep-old");
    let g = s.routes[&r()].newest_generation();
    next(
        &mut s,
        Command::CommitTransition {
            route: r(),
            generation: g,
            forced: true,
            basis: Some(DecisionBasis {
                term: TERM,
                endpoints: vec![],
            }),
        },
    );
    (s, g)
}

#[test]
fn a_copy_of_the_engine_keeps_what_it_saw_while_the_engine_moves_on() {
    // The leader loop and every status work on copies that share the
    // per-proxy maps; a change to the engine must not show in them.
    let (s, g) = committed_world(&["a", "b"]);
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    heartbeat(&mut e, &s, "p0", [(r(), g)].into(), 10);
    heartbeat(&mut e, &s, "p1", [(r(), 0)].into(), 10);
    let copy = e.clone();
    heartbeat(&mut e, &s, "p1", [(r(), g)].into(), 10);
    e.forget("p0");
    assert_eq!(
        copy.applied_summary(&s, &r(), 20),
        Some((format!("1 of 2 proxies at generation {g}"), false))
    );
    assert_eq!(
        e.applied_summary(&s, &r(), 20),
        Some((format!("1 of 1 proxies at generation {g}"), true))
    );
}

#[test]
fn applied_summary_and_ready() {
    let (s, g) = committed_world(&["a", "b"]);
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    heartbeat(&mut e, &s, "p0", [(r(), g)].into(), 10);
    heartbeat(&mut e, &s, "p1", [(r(), 0)].into(), 10);
    assert_eq!(
        e.applied_summary(&s, &r(), 20),
        Some((format!("1 of 2 proxies at generation {g}"), false))
    );
    let live = e.live_proxies(&s, 20);
    assert!(!e.ready_everywhere(&live, &s, &r()), "p1 is behind");
    heartbeat(&mut e, &s, "p1", [(r(), g)].into(), 10);
    assert_eq!(
        e.applied_summary(&s, &r(), 20),
        Some((format!("2 of 2 proxies at generation {g}"), true))
    );
    assert!(e.ready_everywhere(&live, &s, &r()));
    assert!(
        !e.ready_everywhere(&Default::default(), &s, &r()),
        "nobody live: not Ready"
    );
}

#[test]
fn asked_again_ready_everywhere_starts_with_the_proxy_found_behind_and_moves_on_when_it_caught_up()
{
    let (s, g) = committed_world(&["a", "b", "c"]);
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    for p in ["p0", "p1", "p2"] {
        heartbeat(&mut e, &s, p, [(r(), 0)].into(), 10);
    }
    let live = e.live_proxies(&s, 20);
    let mut blocker = None;
    assert!(!e.ready_everywhere_past(&live, &s, &r(), &mut blocker));
    assert_eq!(blocker.as_deref(), Some("p0"), "the first proxy behind");
    // p1 catches up: p0 is still behind, and still the one remembered.
    heartbeat(&mut e, &s, "p1", [(r(), g)].into(), 10);
    assert!(!e.ready_everywhere_past(&live, &s, &r(), &mut blocker));
    assert_eq!(blocker.as_deref(), Some("p0"));
    // p0 catches up: the next one behind is found.
    heartbeat(&mut e, &s, "p0", [(r(), g)].into(), 10);
    assert!(!e.ready_everywhere_past(&live, &s, &r(), &mut blocker));
    assert_eq!(blocker.as_deref(), Some("p2"));
    heartbeat(&mut e, &s, "p2", [(r(), g)].into(), 10);
    assert!(e.ready_everywhere_past(&live, &s, &r(), &mut blocker));
    // A remembered proxy that is no longer live does not hold it back.
    let mut gone = Some("p9".to_string());
    assert!(e.ready_everywhere_past(&live, &s, &r(), &mut gone));
}

#[test]
fn evidence_must_be_current() {
    let s = world(&["a"], "all", "keep-old");
    let mut e = engine_with_ready(&s, &[0]);
    assert!(commits(&e, &s, 20));
    // Heartbeats keep the lease, but the report is older than a TTL.
    heartbeat(&mut e, &s, "p0", Default::default(), 900);
    assert!(
        !commits(&e, &s, 10 + TTL),
        "a report older than one lease TTL"
    );
    // A newer report that no longer lists green withdraws it.
    report(&mut e, &s, "p0", vec![], 950);
    assert!(
        !commits(&e, &s, 960),
        "green was dropped from the proxy's latest report"
    );
    report(&mut e, &s, "p0", green_ready(&s), 970);
    assert!(commits(&e, &s, 980));
}
