//! Filters end to end through the table: header edits, rewrites, redirects, mirrors.

use super::notes_of;
use crate::router::ListenerKey;
use crate::router::testkit::*;
use http::StatusCode;
use switchyard_proto::model::*;

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
    assert_eq!(*p.route, ObjectName::new(INFRA, "r"));
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
            .map(|b| b.service.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(mirrors(0), ["v2", "v3"]);
    assert_eq!(mirrors(0x4000_0000_0000_0000), ["v3"]); // 25%: above 20, below 50
    assert_eq!(mirrors(0x9000_0000_0000_0000), Vec::<String>::new());
    assert!(notes_of(&t).contains("RequestMirror not applied"));
    let warmed: Vec<_> = t.backends().into_iter().map(|b| b.service.name).collect();
    assert_eq!(warmed, ["v1", "v2", "v3"]);
}
