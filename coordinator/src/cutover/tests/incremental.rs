//! Heartbeats and readiness reports whole or as changes: what the engine
//! takes, what it refuses (and keeps unchanged), what counts as news, and
//! that evidence built from changes decides exactly as a whole report.

use super::*;
use switchyard_proto::incremental::SetUpdate;

fn changes<K, V>(base: u64, seq: u64, upserted: Vec<(K, V)>, removed: Vec<K>) -> SetUpdate<K, V> {
    SetUpdate::Changes {
        base,
        seq,
        upserted,
        removed,
    }
}

fn ready(s: &ReplicatedState) -> BackendEvidence {
    green_ready(s)[0].1
}

#[test]
fn evidence_sent_as_changes_commits_like_a_whole_report() {
    let s = world(&["a"], "all", "keep-old");
    let reg = registration(&s, "p0");
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    assert!(heartbeat(&mut e, &s, "p0", Default::default(), 10));
    // Whole and empty first, then green as a change on it.
    let whole = e.report_update(
        &s,
        "p0",
        reg,
        SetUpdate::Whole {
            seq: 1,
            entries: vec![],
        },
        10,
    );
    assert_eq!(
        whole,
        Heard {
            known: true,
            held_seq: 1,
            news: true,
            awaits_set: false,
        }
    );
    assert!(e.decide(&s, 20).is_empty(), "no evidence yet");
    let added = e.report_update(
        &s,
        "p0",
        reg,
        changes(1, 2, vec![(green(), ready(&s))], vec![]),
        20,
    );
    assert_eq!(
        added,
        Heard {
            known: true,
            held_seq: 2,
            news: true,
            awaits_set: false,
        }
    );
    let decisions = e.decide(&s, 30);
    assert!(
        matches!(decisions.as_slice(), [Decision::Commit { route, forced: false, .. }] if *route == r()),
        "{decisions:?}"
    );
}

#[test]
fn changes_on_another_set_are_refused_and_keep_what_was_held() {
    let s = world(&["a"], "all", "keep-old");
    let reg = registration(&s, "p0");
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    assert!(heartbeat(&mut e, &s, "p0", Default::default(), 10));
    let refused = e.report_update(
        &s,
        "p0",
        reg,
        changes(7, 8, vec![(green(), ready(&s))], vec![]),
        20,
    );
    assert_eq!(
        refused.held_seq, 0,
        "nothing held: the proxy must send it whole"
    );
    assert!(refused.known);
    assert!(
        e.decide(&s, 30).is_empty(),
        "refused changes are no evidence"
    );

    // Taken whole; then a removal on the wrong base leaves green counted.
    e.report_update(
        &s,
        "p0",
        reg,
        SetUpdate::Whole {
            seq: 3,
            entries: green_ready(&s),
        },
        40,
    );
    let wrong = e.report_update(&s, "p0", reg, changes(2, 4, vec![], vec![green()]), 50);
    assert_eq!(wrong.held_seq, 3);
    assert!(!e.decide(&s, 60).is_empty(), "green still counts");
}

#[test]
fn an_empty_change_keeps_evidence_current_and_is_no_news() {
    let s = world(&["a"], "all", "keep-old");
    let reg = registration(&s, "p0");
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    assert!(heartbeat(&mut e, &s, "p0", Default::default(), 10));
    // Green ready, reported whole at t=10 and then only renewed.
    e.report_update(
        &s,
        "p0",
        reg,
        SetUpdate::Whole {
            seq: 1,
            entries: green_ready(&s),
        },
        10,
    );
    for t in [500, 1_000, 1_500, 2_000] {
        assert!(heartbeat(&mut e, &s, "p0", Default::default(), t));
        let renewal = e.report_update(&s, "p0", reg, changes(1, 1, vec![], vec![]), t);
        assert_eq!(
            renewal,
            Heard {
                known: true,
                held_seq: 1,
                news: false,
                awaits_set: false,
            }
        );
    }
    // Evidence renewed at t=2000 is current at t=2500, beyond one TTL
    // after the whole report.
    assert!(!e.decide(&s, 2_500).is_empty());
}

#[test]
fn removing_a_backend_by_a_change_withdraws_its_evidence() {
    let s = world(&["a"], "all", "keep-old");
    let reg = registration(&s, "p0");
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    assert!(heartbeat(&mut e, &s, "p0", Default::default(), 10));
    e.report_update(
        &s,
        "p0",
        reg,
        SetUpdate::Whole {
            seq: 1,
            entries: green_ready(&s),
        },
        10,
    );
    let gone = e.report_update(&s, "p0", reg, changes(1, 2, vec![], vec![green()]), 20);
    assert_eq!(
        gone,
        Heard {
            known: true,
            held_seq: 2,
            news: true,
            awaits_set: false,
        }
    );
    assert!(e.decide(&s, 30).is_empty());
}

#[test]
fn applied_generations_as_changes_show_in_the_ready_summary() {
    let mut s = world(&["a", "b"], "all", "keep-old");
    let mut e = engine_with_ready(&s, &[0, 1]);
    let decisions = e.decide(&s, 20);
    let command = Decision::batch(&decisions).unwrap();
    next(&mut s, command);
    let generation = s.routes[&r()].active.as_ref().unwrap().generation;
    for (i, id) in ["p0", "p1"].iter().enumerate() {
        let reg = registration(&s, id);
        let whole = e.heartbeat_update(
            &s,
            id,
            reg,
            SetUpdate::Whole {
                seq: 1,
                entries: vec![],
            },
            0,
            30,
        );
        assert_eq!(whole.held_seq, 1);
        let served = e.heartbeat_update(
            &s,
            id,
            reg,
            changes(1, 2, vec![(r(), generation)], vec![]),
            0,
            40,
        );
        assert_eq!(
            served,
            Heard {
                known: true,
                held_seq: 2,
                news: true,
                awaits_set: false,
            }
        );
        let (summary, ready) = e.applied_summary(&s, &r(), 50).unwrap();
        assert_eq!(ready, i == 1, "{summary}");
        let again = e.heartbeat_update(&s, id, reg, changes(2, 2, vec![], vec![]), 0, 60);
        assert!(!again.news, "the same set again is no news");
    }
    // A heartbeat from an earlier registration is unknown and keeps nothing.
    let stale = e.heartbeat_update(
        &s,
        "p0",
        999,
        SetUpdate::Whole {
            seq: 5,
            entries: vec![],
        },
        0,
        70,
    );
    assert_eq!(
        stale,
        Heard {
            known: false,
            held_seq: 0,
            news: false,
            awaits_set: false,
        }
    );
    assert!(e.applied_summary(&s, &r(), 80).unwrap().1);
}

#[test]
fn evidence_named_by_a_digest_another_proxy_was_asked_for_is_awaited_then_taken() {
    use switchyard_proto::incremental::{AWAIT_WHOLE, digest};
    let s = world(&["a", "b", "c"], "all", "keep-old");
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    for p in ["p0", "p1", "p2"] {
        assert!(heartbeat(&mut e, &s, p, Default::default(), 10));
    }
    // The fleet's common set: green ready, and enough other backends to
    // be named by digest.
    let mut set: imbl::OrdMap<BackendKey, BackendEvidence> = green_ready(&s).into_iter().collect();
    for i in 0..100 {
        set.insert(
            BackendKey::new("default", format!("other-{i}"), 80),
            ready(&s),
        );
    }
    let named = || SetUpdate::Known {
        seq: 1,
        digest: digest(&set),
    };
    let report = |e: &mut CutoverEngine, p: &str, update, now| {
        e.report_update(&s, p, registration(&s, p), update, now)
    };

    // p1 names it first: refused, it is asked for the set whole.
    let asked = report(&mut e, "p1", named(), 20);
    assert_eq!((asked.held_seq, asked.awaits_set), (0, false));
    // p2 names it meanwhile: refused too, but told the set is on its way.
    let awaiting = report(&mut e, "p2", named(), 30);
    assert_eq!((awaiting.held_seq, awaiting.awaits_set), (0, true));
    // Past the wait, the next namer is asked instead.
    let late = 20 + AWAIT_WHOLE.as_millis() as u64;
    let asked_again = report(&mut e, "p0", named(), late);
    assert_eq!((asked_again.held_seq, asked_again.awaits_set), (0, false));

    // The set comes whole from p1; p2 and p0 then take it by digest, and
    // the route commits on evidence held that way.
    let whole = SetUpdate::Whole {
        seq: 1,
        entries: set.iter().map(|(k, v)| (k.clone(), *v)).collect(),
    };
    assert_eq!(report(&mut e, "p1", whole, late + 10).held_seq, 1);
    assert!(
        e.decide(&s, late + 20).is_empty(),
        "p0 and p2 said nothing yet"
    );
    for p in ["p2", "p0"] {
        let taken = report(&mut e, p, named(), late + 30);
        assert_eq!((taken.held_seq, taken.awaits_set), (1, false), "{p}");
        if p == "p2" {
            // p1 and p2 hold one set between them; each counts.
            let verdict = e.verdict(&s, &r(), late + 30).expect("pending");
            assert!(
                verdict
                    .summary
                    .contains("2 of 3 proxies ready (a 0/1, b 1/1, c 1/1)"),
                "{}",
                verdict.summary
            );
        }
    }
    let decisions = e.decide(&s, late + 40);
    assert!(
        matches!(decisions.as_slice(), [Decision::Commit { route, forced: false, .. }] if *route == r()),
        "{decisions:?}"
    );
}

#[test]
fn applied_through_a_configuration_counts_its_active_generations_but_those_listed() {
    let mut s = world(&["a", "b"], "all", "keep-old");
    let mut e = engine_with_ready(&s, &[0, 1]);
    let decisions = e.decide(&s, 20);
    let commit = next(&mut s, Decision::batch(&decisions).unwrap());
    let record = s.routes[&r()].clone();
    let generation = record.active.as_ref().unwrap().generation;
    assert_eq!(record.active_since, commit, "active since its commit");
    assert!(
        commit > generation,
        "committed after the apply that made it"
    );
    let summary = |e: &CutoverEngine, now| e.applied_summary(&s, &r(), now).unwrap();
    let at = |n| format!("{n} of 2 proxies at generation {generation}");
    let beat = |e: &mut CutoverEngine, id: &str, update, through, now| {
        e.heartbeat_update(&s, id, registration(&s, id), update, through, now)
    };
    let nothing_listed = || SetUpdate::Whole {
        seq: 1,
        entries: vec![],
    };

    // p0 serves the configuration of the commit, nothing listed: it
    // serves the route. p1's configuration is older than the commit.
    assert!(beat(&mut e, "p0", nothing_listed(), commit, 30).news);
    beat(&mut e, "p1", nothing_listed(), commit - 1, 30);
    assert_eq!(summary(&e, 40), (at(1), false));

    // Changes p1 sent on a set the leader does not hold are refused, and
    // the version they came with is not taken either.
    let refused = beat(&mut e, "p1", changes(7, 8, vec![], vec![]), commit, 50);
    assert_eq!(refused.held_seq, 1);
    assert_eq!(summary(&e, 60), (at(1), false));

    // p1 catches up: the version moving is news, and the route is Ready.
    let caught_up = beat(&mut e, "p1", changes(1, 2, vec![], vec![]), commit, 70);
    assert!(caught_up.news, "a newer configuration served is news");
    assert_eq!(summary(&e, 80), (at(2), true));
    let same = beat(&mut e, "p1", changes(2, 2, vec![], vec![]), commit, 90);
    assert!(!same.news, "the same version again is not");

    // p0, at a newer configuration, lists the route at an older
    // generation (still warming, say): it does not count.
    let held_back = vec![(r(), generation - 1)];
    beat(
        &mut e,
        "p0",
        changes(1, 2, held_back, vec![]),
        commit + 5,
        100,
    );
    assert_eq!(summary(&e, 110), (at(1), false));

    // A new generation pending is served by nobody, whatever version.
    next(&mut s, apply(vec![route("r", "blue", "all", "keep-old")]));
    let pending = s.routes[&r()].newest_generation();
    assert!(pending > generation);
    let (summary, ready) = e.applied_summary(&s, &r(), 120).unwrap();
    assert_eq!(summary, format!("0 of 2 proxies at generation {pending}"));
    assert!(!ready);
}
