//! Which Gateways, listeners and routes are served: GatewayClass controller, listener protocol, parentRef sectionName/port, `allowedRoutes`, and the listener keys.

use super::notes_of;
use crate::router::testkit::*;
use crate::router::{Decision, ListenerKey, RouteTable};
use http::StatusCode;
use switchyard_proto::model::*;

#[test]
fn empty_table_and_unknown_listener_answer_404_with_a_reason() {
    let d = RouteTable::empty().route(&gw80(), &get("a", "/"), 0);
    let r = respond(d);
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.reason.contains("port 80"), "{}", r.reason);

    let mut w = World::new();
    w.route(route(
        INFRA,
        "r",
        vec![rule(prefix("/"), vec![svc("v1", 1)])],
    ));
    let t = w.table();
    let other_port = ListenerKey { port: 81, ..gw80() };
    assert_eq!(
        respond(t.route(&other_port, &get("a", "/"), 0)).status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(outcome(t.route(&gw80(), &get("a", "/"), 0)), "v1");
    // `None` means every served Gateway on the port.
    let any = ListenerKey {
        gateway: None,
        port: 80,
    };
    assert_eq!(outcome(t.route(&any, &get("a", "/"), 0)), "v1");
}

#[test]
fn gateways_of_other_controllers_are_not_served() {
    let mut w = World::new();
    w.gateway(INFRA, "theirs", "other", vec![listener("http", 80, None)]);
    let mut r = route(INFRA, "r", vec![rule(prefix("/"), vec![svc("v1", 1)])]);
    r.parent_refs = vec![parent(INFRA, "theirs")];
    w.route(r);
    let t = w.table();
    let key = ListenerKey {
        gateway: Some(ObjectName::new(INFRA, "theirs")),
        port: 80,
    };
    assert_eq!(
        respond(t.route(&key, &get("a", "/"), 0)).status,
        StatusCode::NOT_FOUND
    );
    // The served Gateway on the same port does not pick the route up either.
    assert_eq!(outcome(t.route(&gw80(), &get("a", "/"), 0)), "404");
    assert!(
        notes_of(&t).contains("does not control"),
        "{}",
        notes_of(&t)
    );
    assert!(t.backends().is_empty());
}

#[test]
fn https_listeners_are_skipped_with_a_note() {
    let mut w = World::new();
    let mut tls = listener("https", 443, None);
    tls.protocol = ListenerProtocol::Https;
    w.gateway(INFRA, "secure", OUR_CLASS, vec![tls]);
    let mut r = route(INFRA, "r", vec![rule(prefix("/"), vec![svc("v1", 1)])]);
    r.parent_refs = vec![parent(INFRA, "secure")];
    w.route(r);
    let t = w.table();
    let key = ListenerKey {
        gateway: Some(ObjectName::new(INFRA, "secure")),
        port: 443,
    };
    assert_eq!(outcome(t.route(&key, &get("a", "/"), 0)), "404");
    let notes = notes_of(&t);
    assert!(
        notes.contains("Gateway infra/secure: listener https"),
        "{notes}"
    );
    assert!(notes.contains("HTTPRoute infra/r: not attached"), "{notes}");
}

#[test]
fn parent_refs_select_listeners_by_section_name_and_port() {
    let mut w = World::bare();
    w.gateway(
        INFRA,
        "two",
        OUR_CLASS,
        vec![listener("http", 80, None), listener("alt", 8080, None)],
    );
    let two = |section: Option<&str>, port: Option<u16>| {
        let mut p = parent(INFRA, "two");
        p.section_name = section.map(Into::into);
        p.port = port;
        p
    };
    let mk = |name: &str, backend: &str, p: ParentRef| {
        let mut r = route(
            INFRA,
            name,
            vec![rule(prefix(&format!("/{name}")), vec![svc(backend, 1)])],
        );
        r.parent_refs = vec![p];
        r
    };
    w.route(mk("by-section", "v1", two(Some("alt"), None)));
    w.route(mk("by-port", "v2", two(None, Some(80))));
    w.route(mk("wrong-port", "v3", two(None, Some(81))));
    w.route(mk(
        "section-port-mismatch",
        "v3",
        two(Some("http"), Some(8080)),
    ));
    let t = w.table();
    let key = |port| ListenerKey {
        gateway: Some(ObjectName::new(INFRA, "two")),
        port,
    };
    assert_eq!(
        outcome(t.route(&key(8080), &get("a", "/by-section"), 0)),
        "v1"
    );
    assert_eq!(
        outcome(t.route(&key(80), &get("a", "/by-section"), 0)),
        "404"
    );
    assert_eq!(outcome(t.route(&key(80), &get("a", "/by-port"), 0)), "v2");
    assert_eq!(
        outcome(t.route(&key(8080), &get("a", "/by-port"), 0)),
        "404"
    );
    for p in ["/wrong-port", "/section-port-mismatch"] {
        assert_eq!(outcome(t.route(&key(80), &get("a", p), 0)), "404");
        assert_eq!(outcome(t.route(&key(8080), &get("a", p), 0)), "404");
    }
    let notes = notes_of(&t);
    assert!(
        notes.contains("infra/wrong-port: not attached") && notes.contains("NoMatchingParent"),
        "{notes}"
    );
    assert!(
        notes.contains("infra/section-port-mismatch: not attached"),
        "{notes}"
    );
    assert!(!t.backends().contains(&BackendKey::new(INFRA, "v3", 8080)));
}

#[test]
fn allowed_routes_same_all_and_namespace_selector() {
    // Each Gateway on :80 with a hostname of its own: merged on the
    // fleet's port, they must not clash with infra/gw's catch-all.
    let mut w = World::new();
    let mut all = listener("http", 80, Some("all.example.com"));
    all.allowed_routes.namespaces = RouteNamespaces::All;
    w.gateway(INFRA, "all", OUR_CLASS, vec![all]);
    let mut sel = listener("http", 80, Some("selected.example.com"));
    sel.allowed_routes.namespaces = RouteNamespaces::Selector(LabelSelector {
        match_labels: [("gateway-conformance".to_string(), "backend".to_string())].into(),
        match_expressions: Vec::new(),
    });
    w.gateway(INFRA, "selected", OUR_CLASS, vec![sel]);
    w.namespace("web", &[("gateway-conformance", "backend")]);
    w.namespace("other", &[("gateway-conformance", "nope")]);
    w.service("web", "web-backend", &[8080]);
    w.service("other", "other-backend", &[8080]);
    for (ns, backend) in [("web", "web-backend"), ("other", "other-backend")] {
        let mut r = route(ns, "r", vec![rule(prefix("/"), vec![svc(backend, 1)])]);
        r.parent_refs = vec![
            parent(INFRA, "gw"),
            parent(INFRA, "all"),
            parent(INFRA, "selected"),
        ];
        w.route(r);
    }
    let t = w.table();
    let key = |gw: &str| ListenerKey {
        gateway: Some(ObjectName::new(INFRA, gw)),
        port: 80,
    };
    // Same: neither foreign namespace attaches.
    assert_eq!(outcome(t.route(&key("gw"), &get("a", "/"), 0)), "404");
    // All: both attach; the tie goes to the alphabetically first route.
    assert_eq!(
        outcome(t.route(&key("all"), &get("all.example.com", "/"), 0)),
        "other-backend"
    );
    // Selector: only the labelled namespace.
    assert_eq!(
        outcome(t.route(&key("selected"), &get("selected.example.com", "/"), 0)),
        "web-backend"
    );
    assert!(notes_of(&t).contains("NotAllowedByListeners"));
}

#[test]
fn selector_sees_the_implicit_namespace_name_label() {
    let mut w = World::bare();
    let mut sel = listener("http", 80, None);
    sel.allowed_routes.namespaces = RouteNamespaces::Selector(LabelSelector {
        match_labels: Default::default(),
        match_expressions: vec![LabelExpression {
            key: "kubernetes.io/metadata.name".into(),
            operator: "In".into(),
            values: vec!["web".into()],
        }],
    });
    w.gateway(INFRA, "selected", OUR_CLASS, vec![sel]);
    w.service("web", "web-backend", &[8080]);
    let mut r = route(
        "web",
        "r",
        vec![rule(prefix("/"), vec![svc("web-backend", 1)])],
    );
    r.parent_refs = vec![parent(INFRA, "selected")];
    w.route(r);
    let t = w.table();
    let key = ListenerKey {
        gateway: Some(ObjectName::new(INFRA, "selected")),
        port: 80,
    };
    assert_eq!(outcome(t.route(&key, &get("a", "/"), 0)), "web-backend");
}

#[test]
fn allowed_route_kinds_exclude_httproute() {
    let mut w = World::bare();
    let mut l = listener("http", 80, None);
    l.allowed_routes.kinds = vec![GroupKind {
        group: "gateway.networking.k8s.io".into(),
        kind: "TLSRoute".into(),
    }];
    w.gateway(INFRA, "tls-only", OUR_CLASS, vec![l]);
    let mut r = route(INFRA, "r", vec![rule(prefix("/"), vec![svc("v1", 1)])]);
    r.parent_refs = vec![parent(INFRA, "tls-only")];
    w.route(r);
    let t = w.table();
    let key = ListenerKey {
        gateway: Some(ObjectName::new(INFRA, "tls-only")),
        port: 80,
    };
    assert_eq!(outcome(t.route(&key, &get("a", "/"), 0)), "404");
    assert!(notes_of(&t).contains("kind HTTPRoute is not allowed"));
}

#[test]
fn table_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<RouteTable>();
    let _ = |d: Decision| d;
}
