//! Match precedence across rules and routes.

use crate::router::testkit::*;
use switchyard_proto::model::*;

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
