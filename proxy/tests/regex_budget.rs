//! Regex cost: the issue's route (20 matches of `/rxN/\w{200}`) is
//! refused at apply time with the rule and match named; a proxy compiles a
//! regex once and shares it with every later table (an unrelated snapshot
//! recompiles nothing); and the distinct regexes of all served routes are
//! held to the proxy's budget, oldest route first.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use support::*;
use switchyard_proto::model::validate::{
    MAX_REGEX_BYTES_PER_PROXY, MAX_REGEX_BYTES_PER_ROUTE, compile_route_regex,
};
use switchyard_proto::model::*;
use switchyard_proxy::router::{Decision, RouteTable};

const NS: &str = "rx";

#[test]
fn the_issues_route_is_refused_at_apply_naming_rule_and_match() {
    let mut text = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
         metadata: {name: costly, namespace: rx}\nspec:\n  parentRefs: [{name: gw}]\n  rules:\n\
         \x20 - backendRefs: [{name: app, port: 8080}]\n    matches:\n",
    );
    for i in 0..20 {
        text.push_str(&format!(
            "    - path: {{type: RegularExpression, value: '/rx{i}/\\w{{200}}'}}\n"
        ));
    }
    let err = switchyard_kubeconfig::parse_documents("costly.yaml", &text).unwrap_err();
    let message = err.to_string();
    for part in [
        "HTTPRoute rx/costly",
        "spec.rules[0].matches[0].path.value",
        "the most one match may use",
    ] {
        assert!(message.contains(part), "{part} missing in {message}");
    }
}

/// The route template: `rx/<name>` on Gateway `rx/gw`, to `app:8080`.
fn route(name: &str, created_ms: i64, patterns: &[String]) -> HttpRoute {
    let mut routes = snapshot_of(0, parse_yaml(&simple_route_yaml(NS, name, "app"))).1;
    let mut route = routes.remove(0);
    route.meta.creation_timestamp_ms = Some(created_ms);
    route.rules[0].matches = patterns
        .iter()
        .map(|p| RouteMatch {
            path: Some(PathMatch::RegularExpression(p.clone())),
            ..Default::default()
        })
        .collect();
    route
}

fn snapshot(version: u64, extra_services: usize) -> ConfigSnapshot {
    let (mut snapshot, _) = snapshot_of(version, parse_yaml(&simple_gateway_yaml(NS)));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    snapshot.services.push(service(NS, "app", 8080, 1));
    for i in 0..extra_services {
        snapshot
            .services
            .push(service(NS, &format!("unrelated-{i}"), 8080, 1));
    }
    snapshot
}

fn decide(table: &RouteTable, path: &str) -> Decision {
    let (parts, ()) = http::Request::get(path)
        .header("host", "app.example")
        .body(())
        .unwrap()
        .into_parts();
    table.route(&simple_listener(NS), &parts, 0)
}

#[test]
fn an_unrelated_change_recompiles_no_regex() {
    // Patterns only this test uses: the cache is per process.
    let patterns: Vec<String> = (0..8)
        .map(|i| format!("/unrelated-change-{i}/[a-z]+"))
        .collect();
    let routes = vec![
        route("app", 1, &patterns[..4]),
        route("two", 2, &patterns[4..]),
    ];
    let first = RouteTable::compile(&snapshot(1, 0), &routes);
    assert!(first.notes().is_empty(), "{:?}", first.notes());
    let stats = first.regex_stats();
    assert_eq!((stats.compiled, stats.reused, stats.refused), (8, 0, 0));
    assert!(matches!(
        decide(&first, "/unrelated-change-3/abc"),
        Decision::Forward(_)
    ));

    // A snapshot that changes something else, compiled while the served
    // table is alive (as the data plane does): every regex is shared.
    let second = RouteTable::compile(&snapshot(2, 3), &routes);
    let stats = second.regex_stats();
    assert_eq!((stats.compiled, stats.reused), (0, 8), "{stats:?}");
    assert!(matches!(
        decide(&second, "/unrelated-change-3/abc"),
        Decision::Forward(_)
    ));
    assert!(matches!(
        decide(&second, "/unrelated-change-3/ABC"),
        Decision::Respond(_)
    ));

    // A route that changes one pattern compiles that one only.
    let mut changed = routes.clone();
    changed[1].rules[0].matches[0].path = Some(PathMatch::RegularExpression(
        "/unrelated-change-new/[0-9]+".into(),
    ));
    drop(first);
    let third = RouteTable::compile(&snapshot(3, 3), &changed);
    let stats = third.regex_stats();
    assert_eq!((stats.compiled, stats.reused), (1, 7), "{stats:?}");

    // Once no table holds them, they are gone: nothing outlives its table.
    drop(second);
    drop(third);
    let fourth = RouteTable::compile(&snapshot(4, 0), &routes);
    assert_eq!(fourth.regex_stats().compiled, 8);
}

#[test]
fn the_proxy_budget_keeps_the_oldest_routes_regexes() {
    // Patterns of about 200 KB each (four Unicode `\w`), four per route:
    // each route within its own budget, the routes together past the
    // proxy's.
    let size = compile_route_regex(r"/budget-probe/\w{4}")
        .unwrap()
        .memory_usage();
    let per_route = (MAX_REGEX_BYTES_PER_ROUTE / size).min(4);
    let routes_needed = MAX_REGEX_BYTES_PER_PROXY / (size * per_route) + 2;
    let routes: Vec<HttpRoute> = (0..routes_needed)
        .map(|r| {
            let patterns: Vec<String> = (0..per_route)
                .map(|m| format!(r"/budget-{r}-{m}/\w{{4}}"))
                .collect();
            // Oldest first by creation time, listed newest first: the
            // order routes are given in must not matter.
            route(&format!("r{r:03}"), r as i64, &patterns)
        })
        .rev()
        .collect();
    for r in &routes {
        validate_resource(&Resource::HttpRoute(r.clone())).unwrap();
    }
    let table = RouteTable::compile(&snapshot(1, 0), &routes);
    let stats = table.regex_stats();
    assert!(stats.refused > 0, "{stats:?}");
    assert!(stats.bytes <= MAX_REGEX_BYTES_PER_PROXY, "{stats:?}");
    assert!(
        table.notes().iter().any(|n| n.message.contains("left out")
            && n.route.name == format!("r{:03}", routes_needed - 1)),
        "{:?}",
        table.notes()
    );
    // The oldest route's regexes match; the newest route's never do.
    assert!(matches!(
        decide(&table, "/budget-0-0/abcd"),
        Decision::Forward(_)
    ));
    let newest = format!("/budget-{}-0/abcd", routes_needed - 1);
    assert!(
        matches!(decide(&table, &newest), Decision::Respond(ref r) if r.status == 404),
        "{newest}"
    );
}
