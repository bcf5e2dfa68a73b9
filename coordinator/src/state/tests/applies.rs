//! `Command::Applies`: several clients' applies in one entry, each
//! carried out and answered on its own; no two may name the same object.

use super::{apply, at, force, name, ok, pending_generation, route, service};
use crate::state::*;

fn applies(applies: Vec<Command>) -> Command {
    Command::Applies { applies }
}

#[test]
fn each_apply_of_an_entry_is_carried_out_and_answered_on_its_own() {
    let mut s = ReplicatedState::default();
    let entry = applies(vec![
        apply(vec![service("blue"), route("a", "blue")]),
        apply(vec![service("green"), route("b", "green")]),
    ]);
    let outcome = ok(s.apply(at(7), &entry));
    assert_eq!(outcome.index, 7);
    assert_eq!(outcome.decisions.len(), 2, "{outcome:?}");
    let first = outcome.decisions[0].as_ref().unwrap();
    let second = outcome.decisions[1].as_ref().unwrap();
    assert_eq!(first.routes, [(name("a"), 7)]);
    assert_eq!(second.routes, [(name("b"), 7)]);
    assert_eq!((first.index, second.index), (7, 7));
    assert_eq!(outcome.routes, [(name("a"), 7), (name("b"), 7)]);
    assert_eq!(pending_generation(&s, "a"), Some(7));
    assert_eq!(pending_generation(&s, "b"), Some(7));
    assert!(s.resources.contains_key(&service("green").key()));
}

#[test]
fn a_refused_apply_leaves_the_others_of_its_entry_standing() {
    let mut s = ReplicatedState::default();
    let nameless = route("", "blue");
    let entry = applies(vec![
        apply(vec![nameless]),
        apply(vec![service("blue"), route("a", "blue")]),
    ]);
    let outcome = ok(s.apply(at(3), &entry));
    assert!(
        matches!(outcome.decisions[0], Err(CommandError::Invalid(_))),
        "{outcome:?}"
    );
    assert_eq!(
        outcome.decisions[1].as_ref().unwrap().routes,
        [(name("a"), 3)]
    );
    assert_eq!(
        outcome.routes,
        [(name("a"), 3)],
        "only the accepted apply's"
    );
    assert_eq!(pending_generation(&s, "a"), Some(3));
}

#[test]
fn an_apply_naming_an_object_an_earlier_apply_of_the_entry_named_is_refused() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![service("blue"), route("r", "blue")])));
    ok(s.apply(at(2), &force("r", 1)));
    let mut green_on_81 = service("green");
    if let Resource::Service(svc) = &mut green_on_81 {
        svc.ports[0].port = 81;
    }
    let entry = applies(vec![
        apply(vec![service("green"), route("other", "green")]),
        apply(vec![route("r", "green")]),
        // Names `green` again: one revision (3) for two specs.
        apply(vec![green_on_81]),
    ]);
    let outcome = ok(s.apply(at(3), &entry));
    assert!(outcome.decisions[0].is_ok(), "{outcome:?}");
    assert_eq!(
        outcome.decisions[1].as_ref().unwrap().routes,
        [(name("r"), 3)],
        "names nothing the first named"
    );
    match &outcome.decisions[2] {
        Err(CommandError::NamedEarlierInEntry { key }) => {
            assert!(key.contains("green"), "{key}")
        }
        other => panic!("expected NamedEarlierInEntry, got {other:?}"),
    }
    let Some(Resource::Service(stored)) = s.resources.get(&service("green").key()) else {
        panic!("green is stored");
    };
    assert_eq!(stored.ports[0].port, 80, "the first apply's spec stands");
}

#[test]
fn an_entry_of_applies_carries_only_applies_and_at_least_one() {
    let mut s = ReplicatedState::default();
    let outcome = ok(s.apply(
        at(1),
        &applies(vec![force("r", 1), apply(vec![service("blue")])]),
    ));
    assert!(
        matches!(outcome.decisions[0], Err(CommandError::NotAnApply { .. })),
        "{outcome:?}"
    );
    assert!(outcome.decisions[1].is_ok(), "{outcome:?}");
    let before = s.clone();
    let refused = s.apply(at(2), &applies(vec![]));
    assert_eq!(refused.0, Err(CommandError::Empty));
    assert_eq!(s.resources, before.resources);
}
