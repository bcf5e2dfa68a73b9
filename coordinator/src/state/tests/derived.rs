//! The derived indexes (pending routes, endpoint address count) kept by
//! `apply` agree with the state after every kind of command, take no part
//! in equality or serialisation, and are rebuilt for a state read back from
//! JSON; and the batch of decisions: what it refuses, and that entries
//! written before it still decode.

use super::limits::slice;
use super::{apply, at, force, name, ok, route};
use crate::state::*;
use switchyard_proto::model::*;

/// `s` read back from its JSON, as a restarted coordinator (or a snapshot
/// install) gets it: without indexes.
fn reloaded(s: &ReplicatedState) -> ReplicatedState {
    let json = serde_json::to_vec(s).expect("state encodes");
    serde_json::from_slice(&json).expect("state decodes")
}

fn pending(s: &ReplicatedState) -> Vec<ObjectName> {
    s.pending_routes().map(|(n, _)| n.clone()).collect()
}

fn assert_agrees(s: &ReplicatedState, what: &str) {
    let fresh = reloaded(s);
    assert_eq!(&fresh, s, "{what}: equality ignores the indexes");
    assert_eq!(fresh.endpoint_count(), s.endpoint_count(), "{what}");
    assert_eq!(pending(&fresh), pending(s), "{what}");
}

#[test]
fn indexes_follow_every_command_and_are_rebuilt_after_a_reload() {
    let mut s = ReplicatedState::default();
    // Built before anything is stored, then kept by each apply.
    assert_eq!(s.endpoint_count(), 0);
    ok(s.apply(at(1), &apply(vec![slice("a", &[1, 2]), route("r", "svc")])));
    assert_eq!(s.endpoint_count(), 3);
    assert_eq!(pending(&s), vec![name("r")]);
    assert_agrees(&s, "created");

    ok(s.apply(
        at(2),
        &apply(vec![slice("a", &[1]), slice("b", &[4]), route("q", "svc")]),
    ));
    assert_eq!(
        s.endpoint_count(),
        5,
        "a replaced slice counts its difference"
    );
    assert_agrees(&s, "replaced");

    let batch = Command::Decisions {
        decisions: vec![force("r", 1), force("q", 2)],
    };
    let out = ok(s.apply(at(3), &batch));
    assert_eq!(out.decisions.len(), 2);
    assert!(pending(&s).is_empty(), "both committed in one entry");
    assert_agrees(&s, "committed");

    ok(s.apply(
        at(4),
        &Command::Delete {
            keys: vec![
                ResourceKey {
                    kind: Kind::EndpointSlice,
                    name: name("a"),
                },
                ResourceKey {
                    kind: Kind::HTTPRoute,
                    name: name("q"),
                },
            ],
        },
    ));
    assert_eq!(s.endpoint_count(), 4);
    assert_agrees(&s, "deleted");

    // A refused apply changes neither the state nor its indexes.
    let limits = StoreLimits {
        max_routes: 10,
        max_endpoints: 5,
        max_object_bytes: None,
        max_config_bytes: None,
    };
    let over = Command::Apply {
        resources: vec![slice("c", &[2]), route("p", "svc")],
        defaults: CutoverSettings::default(),
        limits: Some(limits),
        validation: Some(1),
    };
    assert!(matches!(
        s.apply(at(5), &over).0,
        Err(CommandError::OverLimit {
            limit: StoreLimit::Endpoints,
            current: 4,
            after: 6,
            ..
        })
    ));
    assert_eq!(s.endpoint_count(), 4);
    assert!(pending(&s).is_empty());
    assert_agrees(&s, "refused");

    // A reloaded state builds its indexes on first use and keeps them.
    let mut fresh = reloaded(&s);
    ok(fresh.apply(at(6), &apply(vec![route("p", "svc")])));
    assert_eq!(pending(&fresh), vec![name("p")]);
    assert_eq!(fresh.endpoint_count(), 4);
}

#[test]
fn a_batch_refuses_what_is_not_a_decision_and_nothing_else() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![route("r", "svc")])));
    let batch = Command::Decisions {
        decisions: vec![apply(vec![route("x", "svc")]), force("r", 1)],
    };
    let out = ok(s.apply(at(2), &batch));
    assert!(
        matches!(&out.decisions[0], Err(CommandError::NotADecision { command }) if command == "Apply"),
        "{out:?}"
    );
    assert!(out.decisions[1].is_ok(), "{out:?}");
    assert!(
        !s.routes.contains_key(&name("x")),
        "the apply was not carried out"
    );
    assert!(s.routes[&name("r")].pending.is_none());
    assert_eq!(
        s.apply(
            at(3),
            &Command::Decisions {
                decisions: Vec::new()
            }
        )
        .0,
        Err(CommandError::Empty)
    );
}

#[test]
fn entries_written_before_batches_still_decode_and_batches_round_trip() {
    let old = r#"{"CommitTransition":{"route":{"namespace":"default","name":"r"},"generation":1,"forced":true}}"#;
    let decoded: Command = serde_json::from_str(old).expect("an old entry decodes");
    assert_eq!(
        decoded,
        Command::CommitTransition {
            route: name("r"),
            generation: 1,
            forced: true,
            basis: None,
        }
    );
    let batch = Command::Decisions {
        decisions: vec![decoded, force("q", 2)],
    };
    let json = serde_json::to_string(&batch).expect("encodes");
    assert_eq!(
        serde_json::from_str::<Command>(&json).expect("decodes"),
        batch
    );
    // An answer of a single command reads as before (no `decisions`).
    let answer = serde_json::to_string(&Outcome::default()).expect("encodes");
    assert!(!answer.contains("decisions"), "{answer}");
}
