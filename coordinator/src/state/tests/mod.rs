//! Unit tests of the state machine's apply: each command's effect and each
//! rejection leaving the state unchanged.

use super::*;
use switchyard_proto::model::*;

mod applies;
mod apply_commits;
mod derived;
mod fence;
mod limits;

/// A route in `default` sending everything to `backend`:80 (also used by
/// `limits_tests`).
pub(super) fn route(name: &str, backend: &str) -> Resource {
    Resource::HttpRoute(HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("default", name),
        parent_refs: vec![],
        hostnames: vec![],
        rules: vec![RouteRule {
            backend_refs: vec![BackendRef::service(backend, 80)],
            ..Default::default()
        }],
    })
}

pub(super) fn service(name: &str) -> Resource {
    Resource::Service(Service {
        meta: ObjectMeta::named("default", name),
        ports: vec![ServicePort {
            name: None,
            port: 80,
            target_port: Some(8080),
            app_protocol: None,
        }],
    })
}

pub(super) fn apply(resources: Vec<Resource>) -> Command {
    Command::Apply {
        resources,
        defaults: CutoverSettings::default(),
        limits: None,
        validation: Some(1),
    }
}

/// Entry `index`, appended in term 1 (the term the tests' decisions name).
pub(super) fn at(index: u64) -> LogPosition {
    LogPosition::new(index, 1)
}

/// A commit forced by the term-1 leader (no evidence to check: the
/// routes of these tests have no Service).
pub(super) fn force(route: &str, generation: u64) -> Command {
    Command::CommitTransition {
        route: name(route),
        generation,
        forced: true,
        basis: Some(DecisionBasis {
            term: 1,
            endpoints: vec![],
        }),
    }
}

/// A commit of `generation` as the term-1 leader decides it, on evidence
/// about `endpoints`.
pub(super) fn commit(route: &str, generation: u64, endpoints: Vec<(BackendKey, u64)>) -> Command {
    Command::CommitTransition {
        route: name(route),
        generation,
        forced: false,
        basis: Some(DecisionBasis { term: 1, endpoints }),
    }
}

/// An EndpointSlice of Service `service` listing `addresses`.
pub(super) fn slice(service: &str, addresses: &[&str]) -> Resource {
    let mut meta = ObjectMeta::named("default", format!("{service}-slice"));
    meta.labels
        .insert(SERVICE_NAME_LABEL.into(), service.into());
    Resource::EndpointSlice(EndpointSlice {
        meta,
        address_type: "IPv4".into(),
        ports: vec![EndpointPort {
            name: None,
            port: 8080,
        }],
        endpoints: addresses
            .iter()
            .map(|a| Endpoint {
                addresses: vec![a.to_string()],
                ready: true,
                serving: true,
                terminating: false,
                zone: None,
            })
            .collect(),
        cluster: None,
    })
}

/// The generation pending on route `r`, if any.
pub(super) fn pending_generation(s: &ReplicatedState, r: &str) -> Option<u64> {
    s.routes[&name(r)]
        .pending
        .as_ref()
        .map(|p| p.target.generation)
}

pub(super) fn ok(r: CommandResponse) -> Outcome {
    r.0.expect("command accepted")
}

pub(super) fn name(n: &str) -> ObjectName {
    ObjectName::new("default", n)
}

#[test]
fn a_new_route_is_pending_until_committed() {
    let mut s = ReplicatedState::default();
    let out = ok(s.apply(at(1), &apply(vec![route("r", "blue")])));
    assert_eq!(out.routes, vec![(name("r"), 1)]);
    let rec = &s.routes[&name("r")];
    assert!(rec.active.is_none());
    let pending = rec.pending.as_ref().unwrap();
    assert_eq!(pending.target.generation, 1);
    assert_eq!(pending.settings.timeout_ms, 60_000);

    // The route's backend has no Service: the evidence covered nothing.
    ok(s.apply(at(2), &force("r", 1)));
    let rec = &s.routes[&name("r")];
    assert_eq!(rec.active.as_ref().unwrap().generation, 1);
    assert!(rec.pending.is_none());
}

#[test]
fn a_newer_apply_supersedes_the_pending_one() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![route("r", "blue")])));
    let out = ok(s.apply(at(2), &apply(vec![route("r", "green")])));
    assert!(
        out.changes[0].contains("supersedes pending generation 1"),
        "{out:?}"
    );
    assert_eq!(
        s.routes[&name("r")]
            .pending
            .as_ref()
            .unwrap()
            .target
            .generation,
        2
    );
    // Committing the superseded generation is refused and changes nothing.
    let before = s.clone();
    let err = s.apply(at(3), &force("r", 1)).0.unwrap_err();
    assert!(matches!(
        err,
        CommandError::NotPending { generation: 1, .. }
    ));
    assert_eq!(s.routes, before.routes);
}

#[test]
fn reapplying_the_same_spec_is_idempotent_and_reverting_withdraws() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![route("r", "blue")])));
    ok(s.apply(at(2), &force("r", 1)));
    let out = ok(s.apply(at(3), &apply(vec![route("r", "blue")])));
    assert!(out.changes[0].contains("unchanged"), "{out:?}");
    assert!(s.routes[&name("r")].pending.is_none());

    ok(s.apply(at(4), &apply(vec![route("r", "green")])));
    let out = ok(s.apply(at(5), &apply(vec![route("r", "blue")])));
    assert!(out.changes[0].contains("withdrawn"), "{out:?}");
    let rec = &s.routes[&name("r")];
    assert!(rec.pending.is_none());
    assert_eq!(rec.active.as_ref().unwrap().generation, 1);
    // The same spec again is a new generation: the withdrawn one (4) is
    // never handed out twice.
    let out = ok(s.apply(at(6), &apply(vec![route("r", "green")])));
    assert_eq!(out.routes, vec![(name("r"), 6)]);
}

#[test]
fn abandoning_keeps_the_active_generation_and_says_why() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![route("r", "blue")])));
    ok(s.apply(at(2), &force("r", 1)));
    ok(s.apply(at(3), &apply(vec![route("r", "green")])));
    ok(s.apply(
        at(4),
        &Command::AbandonTransition {
            route: name("r"),
            generation: 3,
            reason: "timed out after 60s: 1 of 3 proxies ready".into(),
            basis: Some(DecisionBasis {
                term: 1,
                endpoints: vec![],
            }),
        },
    ));
    let rec = &s.routes[&name("r")];
    assert_eq!(rec.active.as_ref().unwrap().generation, 1);
    assert!(rec.pending.is_none());
    assert!(
        rec.last_failure
            .as_ref()
            .unwrap()
            .contains("1 of 3 proxies ready")
    );
}

#[test]
fn rejected_applies_change_nothing_but_the_index() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![service("blue"), route("r", "blue")])));
    let before = s.clone();

    let mut bad = route("bad", "x");
    if let Resource::HttpRoute(r) = &mut bad {
        r.rules[0].backend_refs[0].port = None;
    }
    // The valid service in the same apply must not be stored either.
    let err = s
        .apply(at(2), &apply(vec![service("green"), bad]))
        .0
        .unwrap_err();
    match err {
        CommandError::Invalid(e) => {
            assert_eq!(e.object, "HTTPRoute default/bad");
            assert_eq!(e.field, "spec.rules[0].backendRefs[0].port");
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = s
        .apply(at(3), &apply(vec![service("green"), service("green")]))
        .0
        .unwrap_err();
    assert!(matches!(err, CommandError::Duplicate { .. }));
    assert!(matches!(
        s.apply(at(4), &apply(vec![])).0,
        Err(CommandError::Empty)
    ));
    assert_eq!(s.last_index, 4);
    let mut after = s.clone();
    after.last_index = before.last_index;
    after.last_term = before.last_term;
    assert_eq!(after, before);
}

/// `route` declared as a GRPCRoute.
fn grpc_route(name: &str, backend: &str) -> Resource {
    let mut r = route(name, backend);
    if let Resource::HttpRoute(spec) = &mut r {
        spec.kind = RouteKind::Grpc;
    }
    r
}

#[test]
fn routes_of_both_kinds_share_one_name_space_and_are_deleted_by_their_own_kind() {
    let mut s = ReplicatedState::default();
    let out = ok(s.apply(at(1), &apply(vec![grpc_route("calls", "blue")])));
    assert_eq!(
        out.changes,
        ["GRPCRoute default/calls: generation 1 pending (policy all, timeout 60000ms)"]
    );
    assert_eq!(s.routes[&name("calls")].kind(), Kind::GRPCRoute);

    // An HTTPRoute of the same name is refused, with the whole apply.
    let before = s.clone();
    let err = s
        .apply(
            at(2),
            &apply(vec![service("green"), route("calls", "green")]),
        )
        .0
        .unwrap_err();
    assert!(
        matches!(err, CommandError::RouteNameTaken { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "HTTPRoute default/calls refused: a GRPCRoute of the same namespace and name is stored, and routes of both kinds share one name space; rename one of them"
    );
    assert!(s.resources.is_empty());
    assert_eq!(s.routes, before.routes);

    // Deleting the HTTPRoute of that name removes nothing; the GRPCRoute
    // goes by its own kind, after which the name is free for either kind.
    let delete = |key| Command::Delete { keys: vec![key] };
    let out = ok(s.apply(at(3), &delete(route("calls", "blue").key())));
    assert_eq!(out.changes, ["HTTPRoute default/calls not found"]);
    assert!(s.routes.contains_key(&name("calls")));
    let out = ok(s.apply(at(4), &delete(grpc_route("calls", "blue").key())));
    assert_eq!(out.changes, ["GRPCRoute default/calls deleted"]);
    assert!(s.routes.is_empty());
    ok(s.apply(at(5), &apply(vec![route("calls", "blue")])));
    assert_eq!(s.routes[&name("calls")].kind(), Kind::HTTPRoute);
}

#[test]
fn resources_are_stamped_with_their_revision_and_deleted_by_key() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(7), &apply(vec![service("blue")])));
    let key = service("blue").key();
    assert_eq!(s.resources[&key].meta().revision, 7);
    // Unchanged content keeps its revision (endpoint generations stay put).
    let out = ok(s.apply(at(8), &apply(vec![service("blue")])));
    assert!(out.changes[0].ends_with("unchanged"));
    assert_eq!(s.resources[&key].meta().revision, 7);

    ok(s.apply(at(9), &apply(vec![route("r", "blue")])));
    let out = ok(s.apply(
        at(10),
        &Command::Delete {
            keys: vec![key.clone(), route("r", "blue").key(), service("nope").key()],
        },
    ));
    assert_eq!(
        out.changes,
        vec![
            "Service default/blue deleted",
            "HTTPRoute default/r deleted",
            "Service default/nope not found"
        ]
    );
    assert!(s.resources.is_empty() && s.routes.is_empty());
}

#[test]
fn proxies_register_and_leave() {
    let mut s = ReplicatedState::default();
    ok(s.apply(
        at(1),
        &Command::RegisterProxy {
            id: "p1".into(),
            zone: "a".into(),
            admin_address: "127.0.0.1:1".into(),
        },
    ));
    assert_eq!(s.proxies["p1"].zone, "a");
    let err = s
        .apply(
            at(2),
            &Command::RegisterProxy {
                id: "has space".into(),
                zone: "a".into(),
                admin_address: String::new(),
            },
        )
        .0
        .unwrap_err();
    assert!(matches!(err, CommandError::InvalidProxy(_)));
    ok(s.apply(
        at(3),
        &Command::RemoveProxy {
            id: "p1".into(),
            reason: "deregistered on shutdown".into(),
            registration: Some(1),
        },
    ));
    assert!(s.proxies.is_empty());
}

#[test]
fn the_snapshot_carries_every_kind() {
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![service("blue"), route("r", "blue")])));
    let snap = s.config_snapshot();
    assert_eq!(snap.version, 1);
    assert_eq!(snap.services.len(), 1);
    assert_eq!(snap.routes.len(), 1);
    let rows = s.route_statuses();
    assert_eq!(rows[0].pending_generation, Some(1));
    assert_eq!(rows[0].active_generation, None);
    assert_eq!(rows[0].policy.as_deref(), Some("all"));
}

#[test]
fn the_snapshot_encoded_from_the_state_is_the_snapshot_s_json() {
    let mut s = ReplicatedState::default();
    ok(s.apply(
        at(1),
        &apply(vec![
            service("blue"),
            service("green"),
            slice("blue", &["10.0.0.1", "10.0.0.2"]),
            route("r", "blue"),
            route("s", "green"),
        ]),
    ));
    ok(s.apply(at(2), &force("r", 1)));
    ok(s.apply(at(3), &apply(vec![slice("green", &["10.0.0.3"])])));
    let copied = serde_json::to_vec(&s.config_snapshot()).unwrap();
    assert_eq!(
        String::from_utf8(s.config_snapshot_json().unwrap()).unwrap(),
        String::from_utf8(copied).unwrap()
    );
}

#[test]
fn the_state_round_trips_through_json() {
    // Snapshots and the sled state machine store the state as JSON; struct
    // map keys must survive that.
    let mut s = ReplicatedState::default();
    ok(s.apply(at(1), &apply(vec![service("blue"), route("r", "blue")])));
    ok(s.apply(
        at(2),
        &Command::RegisterProxy {
            id: "p".into(),
            zone: "z".into(),
            admin_address: String::new(),
        },
    ));
    let json = serde_json::to_vec(&s).unwrap();
    let back: ReplicatedState = serde_json::from_slice(&json).unwrap();
    assert_eq!(back, s);
}
