//! The engine's side of the cutover-safety fixes: a route whose Service is
//! missing is not ready, evidence belongs to one registration, timeouts run
//! on the leader's own clock from when it first saw the transition (and not
//! at all while no proxy is live), and a new leader judges nothing before
//! its term's own entry is applied.

use super::*;
use crate::state::{Command, LogPosition, ReplicatedState};

fn missing() -> BackendKey {
    BackendKey::new("default", "missing", 80)
}

/// A live, heartbeating fleet at `now` (keeps every lease current).
fn keep_alive(e: &mut CutoverEngine, s: &ReplicatedState, now: u64) {
    for id in s.proxies.keys() {
        assert!(heartbeat(e, s, id, Default::default(), now));
    }
}

#[test]
fn a_route_whose_service_is_missing_is_not_ready_and_says_why() {
    // Before the fix the unknown backend was left out of what the route
    // needs, so a route that arrived before its Service committed at once
    // to a backend that answers 500.
    let mut s = world(&["a"], "all", "keep-old");
    next(
        &mut s,
        apply(vec![route("r", "missing", "all", "keep-old")]),
    );
    let mut e = engine_with_ready(&s, &[0]);
    report(&mut e, &s, "p0", evidence(missing(), 0, 1), 10);
    assert!(!commits(&e, &s, 20));
    let verdict = e.verdict(&s, &r(), 20).unwrap();
    assert!(
        verdict
            .summary
            .contains("Service default/missing not found"),
        "{}",
        verdict.summary
    );
    // The Service appears (a live cluster's watch delivers it later): now
    // evidence at its generation is what counts.
    next(&mut s, apply(vec![service("missing")]));
    let generation = s.endpoint_generation(&missing()).unwrap();
    assert!(!commits(&e, &s, 30), "old evidence predates the Service");
    report(&mut e, &s, "p0", evidence(missing(), generation, 1), 30);
    assert!(commits(&e, &s, 40));
}

#[test]
fn evidence_from_an_earlier_registration_does_not_count() {
    // Before the fix a proxy restarted fast under the same id still had
    // its previous run's evidence counted.
    let mut s = world(&["a"], "all", "keep-old");
    let mut e = engine_with_ready(&s, &[0]);
    assert!(commits(&e, &s, 20));
    let old = registration(&s, "p0");
    next(&mut s, register("p0", "a"));
    e.sync(&s, 30);
    assert!(!commits(&e, &s, 40), "the new run has warmed nothing yet");
    assert!(
        !e.report(&s, "p0", old, green_ready(&s), 45),
        "a delayed report of the old run is refused"
    );
    assert!(!commits(&e, &s, 50));
    assert!(report(&mut e, &s, "p0", green_ready(&s), 60));
    assert!(commits(&e, &s, 70));
}

#[test]
fn the_timeout_runs_from_when_this_leader_first_saw_the_transition() {
    // Before the fix the deadline was a wall-clock instant stamped by the
    // coordinator that took the apply and compared on the leader's clock:
    // ten minutes of skew abandoned a 60 s cutover at once. Now no
    // timestamp travels: each leader times the transition on its own clock.
    let s = world(&["a"], "all", "keep-old");
    let mut first = CutoverEngine::new(settings(), &s, 0, TERM);
    keep_alive(&mut first, &s, 9_000);
    assert!(route_decisions(&first, &s, 9_000).is_empty());
    // A new leader, whose monotonic clock reads anything at all, starts
    // the 10 s afresh: it waits longer than the user asked, never shorter.
    let start = 7_777_000;
    let mut second = CutoverEngine::new(settings(), &s, start, TERM);
    keep_alive(&mut second, &s, start + 9_999);
    assert!(route_decisions(&second, &s, start + 9_999).is_empty());
    assert!(matches!(
        &route_decisions(&second, &s, start + 10_000)[..],
        [Decision::Abandon { .. }]
    ));
    // A clock reading that goes backwards times out and expires nothing.
    assert!(second.decide(&s, start - 60_000).is_empty());
}

#[test]
fn no_live_proxy_stops_the_timeout_and_the_route_waits_for_one() {
    // Before the fix a new route applied while no proxy was registered
    // timed out ("0 live proxies"), was abandoned, and was never served
    // once proxies came: a bootstrap lost every route applied meanwhile.
    let mut s = world(&[], "all", "keep-old");
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    for now in [5_000, 60_000, 600_000] {
        e.sync(&s, now);
        assert!(e.decide(&s, now).is_empty(), "no judgement at {now}");
    }
    let summary = e.verdict(&s, &r(), 600_000).unwrap().summary;
    assert!(summary.contains("0 live proxies"), "{summary}");
    assert!(
        summary.contains("timeout starts once one is live"),
        "{summary}"
    );
    // A proxy registers at 600 s: its lease starts, and so does the timeout.
    next(&mut s, register("p0", "a"));
    e.sync(&s, 600_000);
    keep_alive(&mut e, &s, 609_000);
    assert!(route_decisions(&e, &s, 609_999).is_empty());
    report(&mut e, &s, "p0", green_ready(&s), 609_999);
    assert!(commits(&e, &s, 609_999), "judged once a proxy is there");
}

#[test]
fn a_new_leader_judges_nothing_before_its_own_term_is_applied() {
    // The state is term 1's; an engine of term 2 has not applied its blank
    // entry yet, so entries of earlier terms may still be on their way.
    let mut s = world(&["a"], "all", "force");
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM + 1);
    keep_alive(&mut e, &s, 10);
    assert!(report(&mut e, &s, "p0", green_ready(&s), 10));
    assert!(e.decide(&s, 20).is_empty(), "nothing before its own entry");
    assert!(
        e.decide(&s, 60_000).is_empty(),
        "not even timeouts or expiries"
    );
    let index = s.last_index + 1;
    s.note_entry(LogPosition::new(index, TERM + 1));
    match &e.decide(&s, 20)[..] {
        [Decision::Commit { basis, .. }] => assert_eq!(basis.term, TERM + 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_decision_maps_to_a_fenced_command() {
    let s = world(&["a"], "all", "keep-old");
    let e = engine_with_ready(&s, &[0]);
    let decisions = e.decide(&s, 20);
    let [commit] = &decisions[..] else {
        panic!("{decisions:?}")
    };
    match commit.command() {
        Command::CommitTransition {
            basis: Some(basis),
            forced: false,
            ..
        } => {
            assert_eq!(basis.term, TERM);
            assert_eq!(
                basis.endpoints,
                vec![(green(), s.endpoint_generation(&green()).unwrap())]
            );
        }
        other => panic!("{other:?}"),
    }
    let expire = Decision::ExpireProxy {
        id: "p0".into(),
        registration: 1,
        term: TERM,
    };
    assert!(matches!(
        expire.command(),
        Command::ExpireProxy { registration: 1, basis, .. } if basis.term == TERM
    ));
    let abandon = Decision::Abandon {
        route: r(),
        generation: 2,
        reason: "timed out".into(),
        term: TERM,
    };
    assert!(matches!(
        abandon.command(),
        Command::AbandonTransition { basis: Some(b), .. } if b.term == TERM
    ));
}
