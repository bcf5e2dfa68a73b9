//! Unit tests of the store-wide limits in `apply`: refusals are whole and
//! change nothing, only growth past a limit is refused, deletes always
//! work, and the decision depends on the log entry alone.

use super::route;
use crate::state::*;
use switchyard_proto::model::*;

fn namespace(name: &str) -> Resource {
    Resource::Namespace(Namespace {
        meta: ObjectMeta::named("", name),
    })
}

/// A slice of Service `svc` with one endpoint per entry of `addresses`,
/// each listing that many addresses.
pub(super) fn slice(name: &str, addresses: &[usize]) -> Resource {
    let mut meta = ObjectMeta::named("default", name);
    meta.labels
        .insert(SERVICE_NAME_LABEL.to_owned(), "svc".to_owned());
    let mut next = 0;
    let endpoints = addresses
        .iter()
        .map(|count| Endpoint {
            addresses: (0..*count)
                .map(|_| {
                    next += 1;
                    format!("10.0.0.{next}")
                })
                .collect(),
            ready: true,
            serving: true,
            terminating: false,
            zone: None,
        })
        .collect();
    Resource::EndpointSlice(EndpointSlice {
        meta,
        address_type: "IPv4".to_owned(),
        ports: vec![],
        endpoints,
        cluster: None,
    })
}

fn apply(resources: Vec<Resource>, limits: Option<StoreLimits>) -> Command {
    Command::Apply {
        resources,
        defaults: CutoverSettings::default(),
        limits,
        validation: Some(1),
    }
}

fn limits(max_routes: usize, max_endpoints: usize) -> Option<StoreLimits> {
    Some(StoreLimits {
        max_routes,
        max_endpoints,
        max_object_bytes: None,
        max_config_bytes: None,
    })
}

/// Limits on sizes only.
fn sizes(max_object_bytes: usize, max_config_bytes: usize) -> Option<StoreLimits> {
    Some(StoreLimits {
        max_routes: usize::MAX,
        max_endpoints: usize::MAX,
        max_object_bytes: Some(max_object_bytes),
        max_config_bytes: Some(max_config_bytes),
    })
}

/// A route whose one annotation is `bytes` long.
fn annotated_route(name: &str, bytes: usize) -> Resource {
    let mut r = route(name, "blue");
    if let Resource::HttpRoute(route) = &mut r {
        route
            .meta
            .annotations
            .insert("example.com/blob".into(), "x".repeat(bytes));
    }
    r
}

/// Applies `command` at `index`, expecting a refusal that leaves `s` as it
/// was (but for `last_index`); returns the refusal.
fn refused(s: &mut ReplicatedState, index: u64, command: &Command) -> CommandError {
    let mut before = s.clone();
    let err = s.apply(super::at(index), command).0.expect_err("refused");
    before.last_index = index;
    before.last_term = 1;
    assert_eq!(*s, before, "a refused apply changed the state");
    err
}

#[test]
fn an_apply_past_max_routes_is_refused_whole_with_the_counts() {
    let mut s = ReplicatedState::default();
    let lim = limits(2, 100);
    s.apply(
        super::at(1),
        &apply(vec![route("a", "blue"), route("b", "blue")], lim),
    )
    .0
    .expect("at the limit is fine");
    // One new route plus an object that alone would be fine: all refused.
    let err = refused(
        &mut s,
        2,
        &apply(vec![namespace("extra"), route("c", "blue")], lim),
    );
    assert_eq!(
        err,
        CommandError::OverLimit {
            limit: StoreLimit::Routes,
            current: 2,
            after: 3,
            max: 2,
        }
    );
    assert_eq!(
        err.to_string(),
        "apply refused: 3 HTTPRoutes would exceed --max-routes 2 (2 stored now)"
    );
    // Changing a stored route does not add one.
    s.apply(super::at(3), &apply(vec![route("a", "green")], lim))
        .0
        .expect("an update is not growth");
}

#[test]
fn endpoints_are_addresses_and_a_replaced_slice_counts_only_its_difference() {
    let mut s = ReplicatedState::default();
    let lim = limits(100, 4);
    s.apply(super::at(1), &apply(vec![slice("s1", &[1, 2])], lim))
        .0
        .expect("3 addresses");
    assert_eq!(s.endpoint_count(), 3);
    // Replacing s1 with 4 addresses: 3 - 3 + 4 = 4, at the limit.
    s.apply(super::at(2), &apply(vec![slice("s1", &[1, 1, 1, 1])], lim))
        .0
        .expect("replacement within the limit");
    assert_eq!(s.endpoint_count(), 4);
    let err = refused(&mut s, 3, &apply(vec![slice("s2", &[1])], lim));
    assert_eq!(
        err.to_string(),
        "apply refused: 5 endpoint addresses would exceed --max-endpoints 4 (4 stored now)"
    );
    // Shrinking s1 while adding s2 stays within it.
    s.apply(
        super::at(4),
        &apply(vec![slice("s1", &[1, 1]), slice("s2", &[2])], lim),
    )
    .0
    .expect("net count 4");
    assert_eq!(s.endpoint_count(), 4);
}

#[test]
fn over_a_limit_deletes_and_non_growing_applies_still_work() {
    // Stored before limits existed (no limits in the entry), then the
    // limit is lower than what is stored.
    let mut s = ReplicatedState::default();
    let routes = vec![route("a", "blue"), route("b", "blue"), route("c", "blue")];
    s.apply(super::at(1), &apply(routes, None))
        .0
        .expect("no limits: accepted");
    let lim = limits(1, 100);
    let err = refused(&mut s, 2, &apply(vec![route("d", "blue")], lim));
    assert!(matches!(
        err,
        CommandError::OverLimit {
            limit: StoreLimit::Routes,
            current: 3,
            after: 4,
            max: 1,
        }
    ));
    s.apply(super::at(3), &apply(vec![route("a", "green")], lim))
        .0
        .expect("an update keeps the count where it is");
    let delete = Command::Delete {
        keys: vec![Resource::key(&route("b", "blue"))],
    };
    s.apply(super::at(4), &delete)
        .0
        .expect("deletes are never limited");
    assert_eq!(s.routes.len(), 2);
}

#[test]
fn every_replica_decides_the_same_from_the_entry_alone() {
    // Two replicas with the same history; the leader proposes with its
    // limits, the follower decodes the entry from JSON as it arrives over
    // Raft. Whatever the follower's own flags are, they play no part:
    // `apply` takes no configuration.
    let history = [
        apply(vec![route("a", "blue")], limits(10, 10)),
        apply(vec![slice("s1", &[1, 1])], limits(10, 10)),
    ];
    let mut leader = ReplicatedState::default();
    let mut follower = ReplicatedState::default();
    for (i, command) in history.iter().enumerate() {
        leader.apply(super::at(i as u64 + 1), command);
        follower.apply(super::at(i as u64 + 1), command);
    }
    let over = apply(vec![route("b", "blue"), slice("s2", &[1])], limits(1, 10));
    let wire = serde_json::to_vec(&over).expect("encode");
    let decoded: Command = serde_json::from_slice(&wire).expect("decode");
    assert_eq!(decoded, over);
    let on_leader = leader.apply(super::at(3), &over);
    let on_follower = follower.apply(super::at(3), &decoded);
    assert_eq!(on_leader, on_follower);
    assert!(on_leader.0.is_err());
    assert_eq!(leader, follower);
    // And again: the same entry, the same answer.
    assert_eq!(leader.clone().apply(super::at(3), &over), on_leader);
}

#[test]
fn an_entry_written_before_limits_existed_decodes_without_them() {
    let mut old =
        serde_json::to_value(apply(vec![route("a", "blue")], limits(0, 0))).expect("encode");
    old["Apply"]
        .as_object_mut()
        .expect("Apply is an object")
        .remove("limits");
    let decoded: Command = serde_json::from_value(old).expect("old entries still decode");
    assert!(matches!(&decoded, Command::Apply { limits: None, .. }));
    let mut s = ReplicatedState::default();
    // With limits of 0 it would be refused; as written then, it is not.
    s.apply(super::at(1), &decoded)
        .0
        .expect("accepted as it was then");
}

#[test]
fn an_object_over_the_object_size_limit_is_refused_by_name() {
    // Before: two routes with 2.2 MB annotations were each accepted, and
    // then no proxy ever received a configuration again.
    let mut s = ReplicatedState::default();
    let err = refused(
        &mut s,
        1,
        &apply(
            vec![annotated_route("big", 2_200_000)],
            sizes(1 << 20, 4 << 20),
        ),
    );
    match err {
        CommandError::ObjectTooLarge { object, bytes, max } => {
            assert_eq!(object, "HTTPRoute default/big");
            assert!(bytes > 2_200_000 && max == 1 << 20);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_apply_that_would_make_the_configuration_undeliverable_is_refused() {
    let mut s = ReplicatedState::default();
    let lim = sizes(1 << 20, 2_500_000);
    for (i, name) in ["a", "b"].iter().enumerate() {
        s.apply(
            super::at(i as u64 + 1),
            &apply(vec![annotated_route(name, 900_000)], lim),
        )
        .0
        .expect("fits");
    }
    let err = refused(&mut s, 3, &apply(vec![annotated_route("c", 900_000)], lim));
    assert!(
        matches!(err, CommandError::OverLimit { limit: StoreLimit::ConfigBytes, after, .. } if after > 2_500_000),
        "{err}"
    );
    assert!(err.to_string().contains("--max-message-bytes"), "{err}");
    // Replacing an object by a smaller one, and deleting, always work.
    s.apply(super::at(4), &apply(vec![annotated_route("a", 10)], lim))
        .0
        .expect("a smaller pending spec fits");
    assert!(s.config_bytes() < 2_500_000 + 900_000);
}

#[test]
fn validation_rules_travel_in_the_entry_so_replays_answer_as_before() {
    // A regex over today's budget: refused in an entry that says it was
    // validated with today's rules, accepted in one written before the
    // budget existed (replaying it must answer as it did then).
    let mut r = route("rx", "blue");
    if let Resource::HttpRoute(route) = &mut r {
        route.rules[0].matches = vec![RouteMatch {
            path: Some(PathMatch::RegularExpression(r"/rx/\w{200}".into())),
            ..Default::default()
        }];
    }
    let entry = |validation| Command::Apply {
        resources: vec![r.clone()],
        defaults: CutoverSettings::default(),
        limits: None,
        validation,
    };
    let mut today = ReplicatedState::default();
    let err = refused(&mut today, 1, &entry(Some(1)));
    assert!(matches!(err, CommandError::Invalid(_)), "{err}");
    let mut then = ReplicatedState::default();
    then.apply(super::at(1), &entry(None))
        .0
        .expect("accepted under the rules of its time");
}
