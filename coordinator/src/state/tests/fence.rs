//! Tests of the guarantees the state machine itself keeps: generations that
//! never repeat, endpoint generations that only grow, decisions fenced by
//! their term and their evidence, and registrations that a predecessor's
//! goodbye or expiry cannot remove.

use super::{apply, at, commit, force, name, ok, pending_generation, route, service, slice};
use crate::state::*;
use switchyard_proto::model::*;

fn blue() -> BackendKey {
    BackendKey::new("default", "blue", 80)
}

fn register(id: &str) -> Command {
    Command::RegisterProxy {
        id: id.into(),
        zone: "a".into(),
        admin_address: String::new(),
    }
}

#[test]
fn a_withdrawn_generation_is_never_handed_out_again() {
    // On the binary before the fix: withdraw, then apply, gave generation 2
    // twice, to two different specs.
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![route("r", "blue")])));
    ok(s.apply(at(2), &force("r", 1)));
    ok(s.apply(at(3), &apply(vec![route("r", "green")])));
    let withdrawn = pending_generation(&s, "r").unwrap();
    ok(s.apply(at(4), &apply(vec![route("r", "blue")]))); // withdraws it
    ok(s.apply(at(5), &apply(vec![route("r", "red")])));
    let next = pending_generation(&s, "r").unwrap();
    assert_ne!(next, withdrawn, "generation {next} named green, now red");
    assert!(next > withdrawn);
}

#[test]
fn an_abandoned_generation_is_never_handed_out_again() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![route("r", "blue")])));
    ok(s.apply(at(2), &force("r", 1)));
    ok(s.apply(at(3), &apply(vec![route("r", "green")])));
    let abandoned = pending_generation(&s, "r").unwrap();
    ok(s.apply(
        at(4),
        &Command::AbandonTransition {
            route: name("r"),
            generation: abandoned,
            reason: "timed out".into(),
            basis: Some(DecisionBasis {
                term: 1,
                endpoints: vec![],
            }),
        },
    ));
    ok(s.apply(at(5), &apply(vec![route("r", "red")])));
    assert!(pending_generation(&s, "r").unwrap() > abandoned);
}

#[test]
fn delete_and_recreate_never_restarts_the_generations() {
    // Before the fix: delete and re-apply gave generation 1 after 2, and a
    // proxy that missed the delete kept serving the old spec as "newer".
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![route("r", "blue")])));
    ok(s.apply(at(2), &force("r", 1)));
    ok(s.apply(at(3), &apply(vec![route("r", "green")])));
    ok(s.apply(at(4), &force("r", 3)));
    ok(s.apply(
        at(5),
        &Command::Delete {
            keys: vec![route("r", "blue").key()],
        },
    ));
    // Through a snapshot (JSON) and back, as a restarted follower sees it.
    let mut s: ReplicatedState = serde_json::from_slice(&serde_json::to_vec(&s).unwrap()).unwrap();
    ok(s.apply(at(6), &apply(vec![route("r", "blue")])));
    assert!(pending_generation(&s, "r").unwrap() > 3);
}

#[test]
fn endpoint_generations_only_grow() {
    // Before the fix the generation was the newest revision of what
    // remained, so deleting a slice took it back down and evidence about
    // the deleted endpoints still passed.
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![service("blue")])));
    assert_eq!(s.endpoint_generation(&blue()), Some(1));
    ok(s.apply(at(2), &apply(vec![slice("blue", &["10.0.0.1"])])));
    assert_eq!(s.endpoint_generation(&blue()), Some(2));
    // Unchanged content is not a change.
    ok(s.apply(at(3), &apply(vec![slice("blue", &["10.0.0.1"])])));
    assert_eq!(s.endpoint_generation(&blue()), Some(2));
    ok(s.apply(
        at(4),
        &Command::Delete {
            keys: vec![slice("blue", &[]).key()],
        },
    ));
    assert_eq!(s.endpoint_generation(&blue()), Some(4));
    // The Service goes and comes back: still never lower.
    ok(s.apply(
        at(5),
        &Command::Delete {
            keys: vec![service("blue").key()],
        },
    ));
    assert_eq!(s.endpoint_generation(&blue()), None);
    ok(s.apply(at(6), &apply(vec![service("blue")])));
    assert_eq!(s.endpoint_generation(&blue()), Some(6));
    // The snapshot speaks of the same numbers.
    assert_eq!(s.config_snapshot().endpoint_generation(&blue()), Some(6));
}

fn tls_policy(ca: &str) -> Resource {
    Resource::BackendTlsPolicy(BackendTlsPolicy {
        meta: ObjectMeta::named("default", "blue-tls"),
        target_refs: vec![PolicyTargetRef {
            group: String::new(),
            kind: "Service".into(),
            name: "blue".into(),
            section_name: None,
        }],
        validation: BackendTlsValidation {
            ca_certificate_refs: vec![LocalObjectRef {
                group: String::new(),
                kind: "ConfigMap".into(),
                name: ca.into(),
            }],
            well_known_ca_certificates: None,
            hostname: "blue.test".into(),
            subject_alt_names: vec![],
        },
    })
}

fn ca_map(name: &str, pem: &str) -> Resource {
    Resource::ConfigMap(ConfigMap {
        meta: ObjectMeta::named("default", name),
        ca_certificate: Some(pem.into()),
    })
}

#[test]
fn a_tls_policy_or_its_ca_changing_moves_the_targeted_services_endpoint_generation() {
    // Evidence that a backend was reached in plaintext must not count once
    // a policy says it is spoken to over TLS (or trusts another CA): the
    // proxies re-warm it through the new data path first.
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![service("blue"), ca_map("ca", "one")])));
    assert_eq!(s.endpoint_generation(&blue()), Some(1));
    ok(s.apply(at(2), &apply(vec![tls_policy("ca")])));
    assert_eq!(s.endpoint_generation(&blue()), Some(2));
    ok(s.apply(at(3), &apply(vec![ca_map("ca", "two")])));
    assert_eq!(s.endpoint_generation(&blue()), Some(3));
    // A ConfigMap no policy names moves nothing.
    ok(s.apply(at(4), &apply(vec![ca_map("unrelated", "x")])));
    assert_eq!(s.endpoint_generation(&blue()), Some(3));
    ok(s.apply(
        at(5),
        &Command::Delete {
            keys: vec![tls_policy("ca").key()],
        },
    ));
    assert_eq!(s.endpoint_generation(&blue()), Some(5));
}

#[test]
fn a_backend_whose_tls_policy_cannot_be_used_is_named_as_a_problem() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![service("blue"), tls_policy("ca")])));
    let why = s.backend_transport_problem(&blue()).expect("a problem");
    assert!(why.contains("default/blue-tls"), "{why}");
    assert!(why.contains("not found"), "{why}");
    // Once the CA resolves, no problem.
    let ca = switchyard_test_support::listener_tls::TestCa::new("blue CA");
    ok(s.apply(at(2), &apply(vec![ca_map("ca", &ca.cert_pem)])));
    assert_eq!(s.backend_transport_problem(&blue()), None);
}

#[test]
fn a_decision_counts_only_in_the_term_that_made_it() {
    // A commit decided by the term-1 leader, re-proposed (forwarded after a
    // step-down) and appended by the term-2 leader, is not carried out.
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![service("blue"), route("r", "blue")])));
    let before = s.routes.clone();
    let late = LogPosition::new(2, 2);
    let err = s
        .apply(late, &commit("r", 1, vec![(blue(), 1)]))
        .0
        .unwrap_err();
    assert!(
        matches!(
            err,
            CommandError::StaleDecision {
                decided_term: 1,
                entry_term: 2
            }
        ),
        "{err}"
    );
    let abandon = Command::AbandonTransition {
        route: name("r"),
        generation: 1,
        reason: "timed out".into(),
        basis: Some(DecisionBasis {
            term: 1,
            endpoints: vec![],
        }),
    };
    assert!(matches!(
        s.apply(LogPosition::new(3, 2), &abandon).0,
        Err(CommandError::StaleDecision { .. })
    ));
    assert_eq!(s.routes, before, "nothing was carried out");
    // In its own term the same commit goes through.
    ok(s.apply(LogPosition::new(4, 1), &commit("r", 1, vec![(blue(), 1)])));
    assert_eq!(s.routes[&name("r")].active.as_ref().unwrap().generation, 1);
}

#[test]
fn a_commit_on_outdated_endpoints_is_refused() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![service("blue"), route("r", "blue")])));
    // The leader decides on evidence about generation 1, then a rollout
    // lands before the commit's entry.
    ok(s.apply(at(2), &apply(vec![slice("blue", &["10.0.0.2"])])));
    let err = s
        .apply(at(3), &commit("r", 1, vec![(blue(), 1)]))
        .0
        .unwrap_err();
    assert!(
        matches!(&err, CommandError::EvidenceOutdated { detail, .. } if detail.contains("generation 2")),
        "{err}"
    );
    // Evidence about nothing, for a route that now needs blue, is refused
    // too (the Service appeared after the decision).
    let mut t = ReplicatedState::default();
    ok(t.apply(at(1), &apply(vec![route("r", "blue")])));
    ok(t.apply(at(2), &apply(vec![service("blue")])));
    assert!(matches!(
        t.apply(at(3), &commit("r", 1, vec![])).0,
        Err(CommandError::EvidenceOutdated { .. })
    ));
    // A forced commit rests on no evidence: only its term is checked.
    ok(s.apply(
        at(4),
        &Command::CommitTransition {
            route: name("r"),
            generation: 1,
            forced: true,
            basis: Some(DecisionBasis {
                term: 1,
                endpoints: vec![],
            }),
        },
    ));
}

#[test]
fn a_predecessor_cannot_remove_a_newer_registration() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &register("p1")));
    // p1 restarts fast: the new run registers before the old one's goodbye
    // and before the leader expires the old lease.
    ok(s.apply(at(2), &register("p1")));
    let out = ok(s.apply(
        at(3),
        &Command::RemoveProxy {
            id: "p1".into(),
            reason: "deregistered on shutdown".into(),
            registration: Some(1),
        },
    ));
    assert!(out.changes[0].contains("registration 2 stays"), "{out:?}");
    let err = s
        .apply(
            at(4),
            &Command::ExpireProxy {
                id: "p1".into(),
                registration: 1,
                basis: DecisionBasis {
                    term: 1,
                    endpoints: vec![],
                },
            },
        )
        .0
        .unwrap_err();
    assert!(
        matches!(err, CommandError::StaleRegistration { .. }),
        "{err}"
    );
    assert_eq!(s.proxies["p1"].registered_index, 2);
    ok(s.apply(
        at(5),
        &Command::ExpireProxy {
            id: "p1".into(),
            registration: 2,
            basis: DecisionBasis {
                term: 1,
                endpoints: vec![],
            },
        },
    ));
    assert!(s.proxies.is_empty());
}

#[test]
fn entries_written_before_the_fence_still_decode_and_apply() {
    // Logs and snapshots of earlier versions: an Apply with the proposer's
    // clock, decisions without a basis, a transition with wall-clock
    // deadlines.
    let old_apply = serde_json::json!({"Apply": {
        "resources": [], "now_ms": 5, "defaults": CutoverSettings::default(), "limits": null
    }});
    let decoded: Command = serde_json::from_value(old_apply).unwrap();
    assert!(matches!(decoded, Command::Apply { .. }));
    let old_commit = serde_json::json!({"CommitTransition": {
        "route": {"namespace": "default", "name": "r"}, "generation": 1, "forced": false
    }});
    let decoded: Command = serde_json::from_value(old_commit).unwrap();
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![route("r", "blue")])));
    ok(s.apply(LogPosition::new(2, 7), &decoded));
    let mut record = serde_json::to_value(&s.routes[&name("r")]).unwrap();
    record["pending"] = serde_json::json!({
        "target": record["active"].clone(),
        "settings": CutoverSettings::default(),
        "created_ms": 1, "deadline_ms": 2
    });
    let back: RouteRecord = serde_json::from_value(record).unwrap();
    assert!(back.pending.is_some());
}
