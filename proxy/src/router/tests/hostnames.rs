//! Listener choice by hostname and route hostname precedence.

use super::notes_of;
use crate::router::ListenerKey;
use crate::router::testkit::*;
use switchyard_proto::model::*;

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
