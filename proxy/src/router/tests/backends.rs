//! Weights, invalid backendRefs, ReferenceGrants and rules without backends.

use super::notes_of;
use crate::router::testkit::*;
use http::StatusCode;
use switchyard_proto::model::*;

#[test]
fn weights_pick_by_random_and_weight_zero_gets_nothing() {
    let mut w = World::new();
    w.route(route(
        INFRA,
        "weighted",
        vec![rule(
            prefix("/"),
            vec![svc("v1", 70), svc("v2", 30), svc("v3", 0)],
        )],
    ));
    let t = w.table();
    let pick = |r| outcome(t.route(&gw80(), &get("h", "/"), r));
    assert_eq!(pick(0), "v1");
    assert_eq!(pick(69), "v1");
    assert_eq!(pick(70), "v2");
    assert_eq!(pick(99), "v2");
    assert_eq!(pick(100), "v1");
    let counts = (0..1000u64).fold([0; 3], |mut c, r| {
        match pick(r).as_str() {
            "v1" => c[0] += 1,
            "v2" => c[1] += 1,
            _ => c[2] += 1,
        }
        c
    });
    assert_eq!(counts, [700, 300, 0]);
    // Weight 0 is not warmed: it never gets traffic.
    assert!(!t.backends().contains(&BackendKey::new(INFRA, "v3", 8080)));
}

#[test]
fn invalid_shares_answer_500_and_valid_shares_still_forward() {
    let mut w = World::new();
    w.route(route(
        INFRA,
        "half",
        vec![rule(prefix("/"), vec![svc("v1", 1), svc("nonexistent", 1)])],
    ));
    let t = w.table();
    assert_eq!(outcome(t.route(&gw80(), &get("h", "/"), 0)), "v1");
    let r = respond(t.route(&gw80(), &get("h", "/"), 1));
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(r.reason.contains("BackendNotFound"), "{}", r.reason);
    assert_eq!(
        t.backends().into_iter().collect::<Vec<_>>(),
        vec![BackendKey::new(INFRA, "v1", 8080)]
    );
}

#[test]
fn invalid_refs_unknown_kind_missing_port_cross_namespace() {
    let mut w = World::new();
    w.service("web", "web-backend", &[8080]);
    let unknown = BackendRef {
        kind: "UnknownKind".into(),
        ..svc("v1", 1)
    };
    let bad_port = BackendRef {
        port: Some(9090),
        ..svc("v1", 1)
    };
    let cross = BackendRef {
        namespace: Some("web".into()),
        ..svc("web-backend", 1)
    };
    w.route(route(
        INFRA,
        "r",
        vec![
            rule(prefix("/kind"), vec![unknown]),
            rule(prefix("/port"), vec![bad_port]),
            rule(prefix("/cross"), vec![cross]),
        ],
    ));
    let t = w.table();
    for (path, why) in [
        ("/kind", "InvalidKind"),
        ("/port", "no port 9090"),
        ("/cross", "RefNotPermitted"),
    ] {
        let r = respond(t.route(&gw80(), &get("h", path), 0));
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{path}");
        assert!(r.reason.contains(why), "{path}: {}", r.reason);
        assert!(notes_of(&t).contains(why), "{path}");
    }
    assert!(t.backends().is_empty());

    // A grant in the target namespace makes the cross-namespace ref valid.
    w.snapshot.reference_grants.push(ReferenceGrant {
        meta: ObjectMeta::named("web", "allow-infra"),
        from: vec![GrantFrom {
            group: "gateway.networking.k8s.io".into(),
            kind: "HTTPRoute".into(),
            namespace: INFRA.into(),
        }],
        to: vec![GrantTo {
            group: String::new(),
            kind: "Service".into(),
            name: None,
        }],
    });
    let t = w.table();
    assert_eq!(
        outcome(t.route(&gw80(), &get("h", "/cross"), 0)),
        "web-backend"
    );
    assert!(
        t.backends()
            .contains(&BackendKey::new("web", "web-backend", 8080))
    );
}

#[test]
fn no_backend_refs_answers_500_without_falling_through() {
    // HTTPRouteNoBackendRefs.
    let mut w = World::new();
    w.route(route(
        INFRA,
        "r",
        vec![
            rule(prefix("/"), vec![svc("v1", 1)]),
            rule(prefix("/empty"), vec![]),
        ],
    ));
    let t = w.table();
    let r = respond(t.route(&gw80(), &get("h", "/empty/x"), 0));
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(r.reason.contains("no backendRefs"));
    assert_eq!(outcome(t.route(&gw80(), &get("h", "/other"), 0)), "v1");
    assert!(notes_of(&t).contains("rule 1: has no backendRefs"));

    let mut w = World::new();
    w.route(route(
        INFRA,
        "zero",
        vec![rule(prefix("/"), vec![svc("v1", 0)])],
    ));
    assert_eq!(outcome(w.table().route(&gw80(), &get("h", "/"), 7)), "500");
}
