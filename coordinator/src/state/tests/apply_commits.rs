//! `Command::ApplyAndCommit`: an apply carrying commits its leader decided
//! with it. The apply always stands; each commit is fenced as a
//! `CommitTransition` of the generation the apply gave its route.

use super::{apply, at, force, name, ok, pending_generation, route, service, slice};
use crate::state::*;
use switchyard_proto::model::*;

fn blue() -> BackendKey {
    BackendKey::new("default", "blue", 80)
}

/// `route(name, backend)` answering only for `host`: a new spec on the
/// same backend.
fn route_for_host(n: &str, backend: &str, host: &str) -> Resource {
    let mut r = route(n, backend);
    if let Resource::HttpRoute(spec) = &mut r {
        spec.hostnames = vec![host.into()];
    }
    r
}

/// Route `r` active on blue (entries 1–2); blue's endpoint generation.
fn active_on_blue() -> (ReplicatedState, u64) {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![service("blue"), route("r", "blue")])));
    ok(s.apply(at(2), &force("r", 1)));
    let generation = s.endpoint_generation(&blue()).unwrap();
    (s, generation)
}

fn with_commit(resources: Vec<Resource>, term: u64, endpoints: Vec<(BackendKey, u64)>) -> Command {
    Command::ApplyAndCommit {
        apply: Box::new(apply(resources)),
        commits: vec![(name("r"), DecisionBasis { term, endpoints })],
    }
}

#[test]
fn a_commit_carried_by_its_apply_makes_the_new_spec_active_in_the_same_entry() {
    let (mut s, endpoints) = active_on_blue();
    let command = with_commit(
        vec![route_for_host("r", "blue", "a.test")],
        1,
        vec![(blue(), endpoints)],
    );
    let outcome = ok(s.apply(at(3), &command));
    let record = &s.routes[&name("r")];
    assert!(record.pending.is_none(), "{record:?}");
    let active = record.active.as_ref().unwrap();
    assert_eq!(active.generation, 3, "the generation the apply gave it");
    assert_eq!(active.spec.hostnames, ["a.test"]);
    assert_eq!(outcome.decisions.len(), 1);
    assert!(outcome.decisions[0].is_ok(), "{outcome:?}");
    assert_eq!(outcome.routes, [(name("r"), 3)]);
    assert!(
        outcome
            .changes
            .iter()
            .any(|c| c.contains("generation 3 pending"))
            && outcome
                .changes
                .iter()
                .any(|c| c.ends_with("generation 3 committed")),
        "the apply's change and the commit's: {:?}",
        outcome.changes
    );
}

#[test]
fn a_carried_commit_of_another_term_is_refused_and_the_apply_stands() {
    let (mut s, endpoints) = active_on_blue();
    let command = with_commit(
        vec![route_for_host("r", "blue", "a.test")],
        1,
        vec![(blue(), endpoints)],
    );
    // Forwarded to (or re-proposed by) the term-2 leader.
    let outcome = ok(s.apply(LogPosition::new(3, 2), &command));
    let record = &s.routes[&name("r")];
    assert_eq!(record.active.as_ref().unwrap().generation, 1);
    assert_eq!(pending_generation(&s, "r"), Some(3));
    assert!(
        matches!(
            outcome.decisions[..],
            [Err(CommandError::StaleDecision {
                decided_term: 1,
                entry_term: 2
            })]
        ),
        "{outcome:?}"
    );
}

#[test]
fn a_carried_commit_on_endpoints_its_own_apply_moves_is_refused() {
    let (mut s, endpoints) = active_on_blue();
    let command = with_commit(
        vec![
            slice("blue", &["10.0.0.9"]),
            route_for_host("r", "blue", "a.test"),
        ],
        1,
        vec![(blue(), endpoints)],
    );
    let outcome = ok(s.apply(at(3), &command));
    assert!(s.endpoint_generation(&blue()).unwrap() > endpoints);
    assert_eq!(
        pending_generation(&s, "r"),
        Some(3),
        "pending, for evidence at the new endpoints"
    );
    assert!(
        matches!(
            outcome.decisions[..],
            [Err(CommandError::EvidenceOutdated { .. })]
        ),
        "{outcome:?}"
    );
}

#[test]
fn a_carried_commit_of_a_route_the_apply_does_not_make_pending_is_refused() {
    let (mut s, endpoints) = active_on_blue();
    // The apply leaves r's spec as it is: nothing pending to commit.
    let same = with_commit(vec![route("r", "blue")], 1, vec![(blue(), endpoints)]);
    let outcome = ok(s.apply(at(3), &same));
    assert!(matches!(
        outcome.decisions[..],
        [Err(CommandError::NotPending { .. })]
    ));
    // The apply does not name r at all.
    let other = with_commit(vec![route("q", "blue")], 1, vec![(blue(), endpoints)]);
    let outcome = ok(s.apply(at(4), &other));
    assert!(matches!(
        outcome.decisions[..],
        [Err(CommandError::NotPending { .. })]
    ));
    assert!(s.routes[&name("q")].pending.is_some(), "q's apply stands");
    assert_eq!(s.routes[&name("r")].active.as_ref().unwrap().generation, 1);
}

#[test]
fn an_apply_and_commit_must_carry_an_apply() {
    let (mut s, _) = active_on_blue();
    let before = s.clone();
    let command = Command::ApplyAndCommit {
        apply: Box::new(force("r", 1)),
        commits: vec![],
    };
    let refused = s.apply(at(3), &command).0;
    assert!(
        matches!(refused, Err(CommandError::NotAnApply { ref command }) if command == "CommitTransition"),
        "{refused:?}"
    );
    assert_eq!(s.routes, before.routes);
}

#[test]
fn an_apply_and_commit_round_trips_through_the_logs_json() {
    let (_, endpoints) = active_on_blue();
    let command = with_commit(
        vec![route_for_host("r", "blue", "a.test")],
        1,
        vec![(blue(), endpoints)],
    );
    let json = serde_json::to_vec(&command).unwrap();
    let back: Command = serde_json::from_slice(&json).unwrap();
    assert_eq!(back, command);
}
