//! Scenario tests of the whole router: compile a small world, route
//! requests, assert the decision. One Gateway API rule per test.

use super::testkit::*;
use super::{Decision, ListenerKey, RouteTable};
use http::StatusCode;
use switchyard_proto::model::*;

fn notes_of(t: &RouteTable) -> String {
    t.notes()
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

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
        notes_of(&t).contains("not controlled by"),
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
    let mut w = World::new();
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
    let mut w = World::new();
    let mut all = listener("http", 80, None);
    all.allowed_routes.namespaces = RouteNamespaces::All;
    w.gateway(INFRA, "all", OUR_CLASS, vec![all]);
    let mut sel = listener("http", 80, None);
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
        outcome(t.route(&key("all"), &get("a", "/"), 0)),
        "other-backend"
    );
    // Selector: only the labelled namespace.
    assert_eq!(
        outcome(t.route(&key("selected"), &get("a", "/"), 0)),
        "web-backend"
    );
    assert!(notes_of(&t).contains("NotAllowedByListeners"));
}

#[test]
fn selector_sees_the_implicit_namespace_name_label() {
    let mut w = World::new();
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
    let mut w = World::new();
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
fn listener_hostname_choice_exact_beats_wildcard_beats_none() {
    // HTTPRouteListenerHostnameMatching.
    let mut w = World::new();
    w.gateway(
        INFRA,
        "hosts",
        OUR_CLASS,
        vec![
            listener("listener-1", 80, Some("bar.com")),
            listener("listener-2", 80, Some("foo.bar.com")),
            listener("listener-3", 80, Some("*.bar.com")),
            listener("listener-4", 80, Some("*.foo.com")),
        ],
    );
    let attach = |name: &str, backend: &str, sections: &[&str]| {
        let mut r = route(
            INFRA,
            name,
            vec![RouteRule {
                backend_refs: vec![svc(backend, 1)],
                ..Default::default()
            }],
        );
        r.parent_refs = sections
            .iter()
            .map(|s| ParentRef {
                section_name: Some(s.to_string()),
                ..parent(INFRA, "hosts")
            })
            .collect();
        r
    };
    w.route(attach("backend-v1", "v1", &["listener-1"]));
    w.route(attach("backend-v2", "v2", &["listener-2"]));
    w.route(attach("backend-v3", "v3", &["listener-3", "listener-4"]));
    let t = w.table();
    let key = ListenerKey {
        gateway: Some(ObjectName::new(INFRA, "hosts")),
        port: 80,
    };
    let cases = [
        ("bar.com", "v1"),
        ("foo.bar.com", "v2"),
        ("baz.bar.com", "v3"),
        ("boo.bar.com:8080", "v3"),
        ("multiple.prefixes.bar.com", "v3"),
        ("multiple.prefixes.foo.com", "v3"),
        ("foo.com", "404"),
        ("no.matching.host", "404"),
    ];
    for (host, want) in cases {
        assert_eq!(outcome(t.route(&key, &get(host, "/"), 0)), want, "{host}");
    }
}

#[test]
fn route_hostnames_wildcards_intersection_and_precedence() {
    let mut w = World::new();
    w.gateway(
        INFRA,
        "wild",
        OUR_CLASS,
        vec![listener("http", 80, Some("*.example.com"))],
    );
    let mk = |name: &str, backend: &str, hosts: &[&str]| {
        let mut r = route(INFRA, name, vec![rule(prefix("/"), vec![svc(backend, 1)])]);
        r.parent_refs = vec![parent(INFRA, "wild")];
        r.hostnames = hosts.iter().map(|h| h.to_string()).collect();
        r
    };
    // Defined in an order that would be wrong without hostname precedence.
    w.route(mk("a-any", "v3", &[]));
    w.route(mk("b-wild", "v2", &["*.example.com"]));
    w.route(mk("c-exact", "v1", &["foo.example.com", "outside.org"]));
    w.route(mk("d-deeper", "v1", &["*.deep.example.com"]));
    w.route(mk("e-none", "v1", &["outside.org"]));
    let t = w.table();
    let key = ListenerKey {
        gateway: Some(ObjectName::new(INFRA, "wild")),
        port: 80,
    };
    // a-any takes the listener's hostname, so it ties with b-wild on
    // hostname and wins on name: both are `*.example.com` routes.
    assert_eq!(
        outcome(t.route(&key, &get("FOO.example.com:80", "/"), 0)),
        "v1"
    );
    assert_eq!(
        outcome(t.route(&key, &get("bar.example.com", "/"), 0)),
        "v3"
    );
    assert_eq!(
        outcome(t.route(&key, &get("x.deep.example.com", "/"), 0)),
        "v1"
    );
    // Route hostnames outside the listener's are ignored.
    assert_eq!(outcome(t.route(&key, &get("outside.org", "/"), 0)), "404");
    assert!(notes_of(&t).contains("infra/e-none: not attached"));
}

#[test]
fn exact_route_hostname_beats_wildcard_even_with_a_shorter_path() {
    let mut w = World::new();
    let mut exact = route(INFRA, "exact", vec![rule(prefix("/"), vec![svc("v1", 1)])]);
    exact.hostnames = vec!["a.example.com".into()];
    let mut wild = route(
        INFRA,
        "wild",
        vec![rule(prefix("/long/path"), vec![svc("v2", 1)])],
    );
    wild.hostnames = vec!["*.example.com".into()];
    w.route(exact).route(wild);
    let t = w.table();
    assert_eq!(
        outcome(t.route(&gw80(), &get("a.example.com", "/long/path"), 0)),
        "v1"
    );
    assert_eq!(
        outcome(t.route(&gw80(), &get("b.example.com", "/long/path"), 0)),
        "v2"
    );
    assert_eq!(
        outcome(t.route(&gw80(), &get("b.example.com", "/"), 0)),
        "404"
    );
    // A wildcard never matches its own suffix.
    assert_eq!(
        outcome(t.route(&gw80(), &get("example.com", "/long/path"), 0)),
        "404"
    );
}

#[test]
fn conformance_matching_prefix_segments_and_header_matches() {
    // HTTPRouteMatching.
    let mut w = World::new();
    let hdr = |v: &str| RouteMatch {
        headers: vec![header("version", v)],
        ..Default::default()
    };
    w.route(route(
        INFRA,
        "matching",
        vec![
            RouteRule {
                matches: vec![prefix("/"), hdr("one")],
                backend_refs: vec![svc("v1", 1)],
                ..Default::default()
            },
            RouteRule {
                matches: vec![prefix("/v2"), hdr("two")],
                backend_refs: vec![svc("v2", 1)],
                ..Default::default()
            },
        ],
    ));
    let t = w.table();
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 9] = [
        ("/", &[], "v1"),
        ("/example", &[], "v1"),
        ("/", &[("Version", "one")], "v1"),
        ("/v2", &[], "v2"),
        ("/v2/example", &[], "v2"),
        ("/", &[("Version", "two")], "v2"),
        ("/v2/", &[], "v2"),
        ("/v2example", &[], "v1"),
        ("/foo/v2/example", &[], "v1"),
    ];
    for (path, headers, want) in cases {
        let d = t.route(&gw80(), &req("GET", Some("x"), path, headers), 0);
        assert_eq!(outcome(d), want, "{path} {headers:?}");
    }
}

#[test]
fn precedence_across_routes_exact_prefix_method_headers_query() {
    let mut w = World::new();
    let mk = |name: &str, backend: &str, m: RouteMatch| {
        route(INFRA, name, vec![rule(m, vec![svc(backend, 1)])])
    };
    w.route(mk("a-prefix", "v1", prefix("/a")));
    w.route(mk("b-exact", "v2", exact("/a/b")));
    w.route(mk("c-longer", "v3", prefix("/a/b")));
    let t = w.table();
    assert_eq!(outcome(t.route(&gw80(), &get("h", "/a/b"), 0)), "v2");
    assert_eq!(outcome(t.route(&gw80(), &get("h", "/a/b/c"), 0)), "v3");
    assert_eq!(outcome(t.route(&gw80(), &get("h", "/a/x"), 0)), "v1");

    let mut w = World::new();
    let with = |method: Option<&str>, headers: usize, query: usize| RouteMatch {
        path: Some(PathMatch::PathPrefix("/".into())),
        method: method.map(Into::into),
        headers: (0..headers)
            .map(|i| header(&format!("h{i}"), "1"))
            .collect(),
        query_params: (0..query)
            .map(|i| QueryParamMatch {
                match_type: StringMatchType::Exact,
                name: format!("q{i}"),
                value: "1".into(),
            })
            .collect(),
    };
    w.route(mk("a-query", "v1", with(None, 1, 2)));
    w.route(mk("b-headers", "v2", with(None, 2, 0)));
    w.route(mk("c-method", "v3", with(Some("GET"), 0, 0)));
    let t = w.table();
    let all = [("h0", "1"), ("h1", "1")];
    // Method beats headers beats query, whatever the route names.
    assert_eq!(
        outcome(t.route(&gw80(), &req("GET", Some("h"), "/?q0=1&q1=1", &all), 0)),
        "v3"
    );
    assert_eq!(
        outcome(t.route(&gw80(), &req("POST", Some("h"), "/?q0=1&q1=1", &all), 0)),
        "v2"
    );
    assert_eq!(
        outcome(t.route(
            &gw80(),
            &req("POST", Some("h"), "/?q0=1&q1=1", &all[..1]),
            0
        )),
        "v1"
    );
}

#[test]
fn ties_go_to_the_oldest_route_then_alphabetical_then_rule_order() {
    let mut w = World::new();
    let mut young = route(
        INFRA,
        "a-young",
        vec![rule(prefix("/"), vec![svc("v1", 1)])],
    );
    young.meta.creation_timestamp_ms = Some(2_000);
    let mut old = route(INFRA, "z-old", vec![rule(prefix("/"), vec![svc("v2", 1)])]);
    old.meta.creation_timestamp_ms = Some(1_000);
    w.route(young).route(old);
    assert_eq!(outcome(w.table().route(&gw80(), &get("h", "/"), 0)), "v2");

    let mut w = World::new();
    w.route(route(
        INFRA,
        "b",
        vec![rule(prefix("/"), vec![svc("v1", 1)])],
    ));
    w.route(route(
        INFRA,
        "a",
        vec![rule(prefix("/"), vec![svc("v2", 1)])],
    ));
    assert_eq!(outcome(w.table().route(&gw80(), &get("h", "/"), 0)), "v2");

    // HTTPRouteHeaderMatching: equal header counts inside one route go to
    // the first rule; more headers win regardless of order.
    let mut w = World::new();
    let hm = |hs: &[(&str, &str)]| RouteMatch {
        headers: hs.iter().map(|(n, v)| header(n, v)).collect(),
        ..Default::default()
    };
    w.route(route(
        INFRA,
        "header-matching",
        vec![
            rule(hm(&[("version", "two")]), vec![svc("v2", 1)]),
            rule(
                hm(&[("version", "two"), ("color", "orange")]),
                vec![svc("v1", 1)],
            ),
            rule(hm(&[("color", "blue")]), vec![svc("v3", 1)]),
        ],
    ));
    let t = w.table();
    let r = |hs: &[(&str, &str)]| outcome(t.route(&gw80(), &req("GET", Some("h"), "/", hs), 0));
    assert_eq!(r(&[("Version", "two"), ("Color", "blue")]), "v2");
    assert_eq!(r(&[("Version", "two"), ("Color", "orange")]), "v1");
    assert_eq!(r(&[("Color", "blue")]), "v3");
    assert_eq!(r(&[("Color", "red")]), "404");
}

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
    assert!(r.reason.contains("does not exist"), "{}", r.reason);
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
        ("/kind", "unsupported kind"),
        ("/port", "no port 9090"),
        ("/cross", "ReferenceGrant"),
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

#[test]
fn header_filters_combine_route_then_backend_and_apply() {
    let mut w = World::new();
    let hv = |n: &str, v: &str| switchyard_proto::model::HeaderValue {
        name: n.into(),
        value: v.into(),
    };
    let mut backend = svc("v1", 1);
    backend.filters = vec![Filter::RequestHeaderModifier(HeaderModifier {
        add: vec![hv("X-From-Backend", "b")],
        ..Default::default()
    })];
    let mut r = rule(prefix("/"), vec![backend]);
    r.filters = vec![
        Filter::RequestHeaderModifier(HeaderModifier {
            set: vec![hv("X-Header-Set", "set-overwrites-values")],
            add: vec![hv("X-Header-Add", "add-appends-values")],
            remove: vec!["X-Header-Remove".into()],
        }),
        Filter::ResponseHeaderModifier(HeaderModifier {
            set: vec![hv("X-Resp", "r")],
            ..Default::default()
        }),
    ];
    w.route(route(INFRA, "r", vec![r]));
    let plan = forward(w.table().route(&gw80(), &get("h", "/"), 0));
    let names: Vec<_> = plan
        .request_headers
        .add
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["x-header-add", "x-from-backend"]);
    let mut h = http::HeaderMap::new();
    h.insert("x-header-set", "old".parse().expect("value"));
    h.insert("x-header-add", "some-other-value".parse().expect("value"));
    h.insert("x-header-remove", "gone".parse().expect("value"));
    plan.request_headers.apply(&mut h);
    assert_eq!(h["x-header-set"], "set-overwrites-values");
    assert_eq!(h["x-header-add"], "some-other-value,add-appends-values");
    assert_eq!(h["x-from-backend"], "b");
    assert!(!h.contains_key("x-header-remove"));
    assert_eq!(plan.response_headers.set.len(), 1);
    assert_eq!(plan.response_headers.set[0].0.as_str(), "x-resp");
}

#[test]
fn url_rewrite_host_full_path_and_prefix_keep_the_query() {
    let mut w = World::new();
    let rewrite = |host: Option<&str>, path: Option<PathModifier>| {
        Filter::UrlRewrite(UrlRewrite {
            hostname: host.map(Into::into),
            path,
        })
    };
    let mut prefix_rule = rule(prefix("/prefix/"), vec![svc("v1", 1)]);
    prefix_rule.filters = vec![rewrite(
        Some("rewritten.example.org"),
        Some(PathModifier::ReplacePrefixMatch("/new".into())),
    )];
    // HTTPRouteBackendURLRewrite: the rewrite sits on the backendRef.
    let mut full_backend = svc("v1", 1);
    full_backend.filters = vec![rewrite(
        None,
        Some(PathModifier::ReplaceFullPath("/rewritten-full".into())),
    )];
    let full_rule = rule(prefix("/full"), vec![full_backend]);
    w.route(route(INFRA, "r", vec![prefix_rule, full_rule]));
    let t = w.table();
    let p = forward(t.route(&gw80(), &get("h", "/prefix/one?x=1"), 0));
    assert_eq!(p.host.as_deref(), Some("rewritten.example.org"));
    assert_eq!(p.path_and_query.as_deref(), Some("/new/one?x=1"));
    let p = forward(t.route(&gw80(), &get("h", "/prefix"), 0));
    assert_eq!(p.path_and_query.as_deref(), Some("/new"));
    let p = forward(t.route(&gw80(), &get("h", "/full/original"), 0));
    assert_eq!(p.host, None);
    assert_eq!(p.path_and_query.as_deref(), Some("/rewritten-full"));
    let p = forward(t.route(&gw80(), &get("h", "/prefix/x"), 0));
    assert_eq!(p.route, ObjectName::new(INFRA, "r"));
    assert_eq!(p.rule_index, 0);
}

#[test]
fn redirects_use_listener_port_scheme_port_and_status() {
    let mut w = World::new();
    w.gateway(INFRA, "alt", OUR_CLASS, vec![listener("http", 8080, None)]);
    let redirect = |r: RequestRedirect| RouteRule {
        matches: vec![prefix("/")],
        filters: vec![Filter::RequestRedirect(r)],
        ..Default::default()
    };
    let mut r = route(
        INFRA,
        "r",
        vec![redirect(RequestRedirect {
            hostname: Some("example.org".into()),
            ..Default::default()
        })],
    );
    r.parent_refs.push(parent(INFRA, "alt"));
    let mut s = route(
        INFRA,
        "s",
        vec![redirect(RequestRedirect {
            scheme: Some("https".into()),
            status_code: Some(301),
            ..Default::default()
        })],
    );
    s.hostnames = vec!["scheme.example".into()];
    s.parent_refs.push(parent(INFRA, "alt"));
    w.route(r).route(s);
    let t = w.table();
    let alt = ListenerKey {
        gateway: Some(ObjectName::new(INFRA, "alt")),
        port: 8080,
    };
    let location = |key: &ListenerKey, host: &str| {
        let r = respond(t.route(key, &get(host, "/p?q=1"), 0));
        let loc = r
            .headers
            .iter()
            .find(|(n, _)| n == http::header::LOCATION)
            .map(|(_, v)| v.to_str().expect("ascii").to_string());
        (r.status.as_u16(), loc.expect("Location"))
    };
    assert_eq!(
        location(&gw80(), "h:1234"),
        (302, "http://example.org/p?q=1".to_string())
    );
    assert_eq!(
        location(&alt, "h"),
        (302, "http://example.org:8080/p?q=1".to_string())
    );
    assert_eq!(
        location(&alt, "scheme.example"),
        (301, "https://scheme.example/p?q=1".to_string())
    );
    // A redirecting rule sends nothing to any backend.
    assert!(t.backends().is_empty());
}

#[test]
fn backend_level_redirect_uses_the_matched_prefix() {
    // HTTPRouteBackendRequestRedirect.
    let mut w = World::new();
    let mut b = svc("v1", 1);
    b.filters = vec![
        Filter::RequestRedirect(RequestRedirect {
            path: Some(PathModifier::ReplacePrefixMatch(
                "/redirected-prefix".into(),
            )),
            ..Default::default()
        }),
        Filter::ResponseHeaderModifier(HeaderModifier {
            add: vec![switchyard_proto::model::HeaderValue {
                name: "X-Why".into(),
                value: "moved".into(),
            }],
            ..Default::default()
        }),
    ];
    w.route(route(INFRA, "r", vec![rule(prefix("/prefix"), vec![b])]));
    let t = w.table();
    let r = respond(t.route(
        &gw80(),
        &req("GET", Some("10.0.0.1:31000"), "/prefix/original", &[]),
        0,
    ));
    assert_eq!(r.status, StatusCode::FOUND);
    let headers: Vec<_> = r
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.to_str().expect("ascii")))
        .collect();
    assert_eq!(
        headers,
        [
            ("location", "http://10.0.0.1/redirected-prefix/original"),
            ("x-why", "moved")
        ]
    );
    assert!(t.backends().is_empty());
}

#[test]
fn mirrors_by_percent_and_invalid_mirrors_are_dropped_with_a_note() {
    let mut w = World::new();
    let mirror = |name: &str, percent: Option<u32>, fraction: Option<(u32, u32)>| {
        Filter::RequestMirror(RequestMirror {
            backend_ref: BackendRef::service(name, 8080),
            percent,
            fraction,
        })
    };
    let mut r = rule(prefix("/"), vec![svc("v1", 1)]);
    r.filters = vec![
        mirror("v2", Some(20), None),
        mirror("v3", None, Some((25, 50))),
        mirror("nonexistent", None, None),
    ];
    w.route(route(INFRA, "r", vec![r]));
    let t = w.table();
    let mirrors = |random: u64| {
        let p = forward(t.route(&gw80(), &get("h", "/"), random));
        assert_eq!(p.backend.service.name, "v1");
        p.mirrors
            .into_iter()
            .map(|b| b.service.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(mirrors(0), ["v2", "v3"]);
    assert_eq!(mirrors(0x4000_0000_0000_0000), ["v3"]); // 25%: above 20, below 50
    assert_eq!(mirrors(0x9000_0000_0000_0000), Vec::<String>::new());
    assert!(notes_of(&t).contains("RequestMirror not applied"));
    let warmed: Vec<_> = t.backends().into_iter().map(|b| b.service.name).collect();
    assert_eq!(warmed, ["v1", "v2", "v3"]);
}

#[test]
fn any_gateway_key_merges_listeners_on_the_port() {
    let mut w = World::new();
    w.gateway(INFRA, "second", OUR_CLASS, vec![listener("http", 80, None)]);
    let mut r = route(
        INFRA,
        "second-route",
        vec![rule(prefix("/second"), vec![svc("v2", 1)])],
    );
    r.parent_refs = vec![parent(INFRA, "second")];
    w.route(r);
    // Attached to both Gateways: must not be doubled or confused.
    let mut both = route(INFRA, "both", vec![rule(prefix("/"), vec![svc("v1", 1)])]);
    both.parent_refs.push(parent(INFRA, "second"));
    w.route(both);
    let t = w.table();
    let any = ListenerKey {
        gateway: None,
        port: 80,
    };
    assert_eq!(outcome(t.route(&any, &get("h", "/second/x"), 0)), "v2");
    assert_eq!(outcome(t.route(&any, &get("h", "/x"), 0)), "v1");
    assert_eq!(outcome(t.route(&gw80(), &get("h", "/second/x"), 0)), "v1");
}

#[test]
fn table_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<RouteTable>();
    let _ = |d: Decision| d;
}
