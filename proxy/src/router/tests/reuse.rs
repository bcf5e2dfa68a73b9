//! `RouteTable::compile_after`: a new table compiles only the routes whose
//! inputs changed, and routes exactly as a fresh compile of the same
//! snapshot does.

use super::super::RouteTable;
use super::super::testkit::*;
use std::sync::Arc;
use switchyard_proto::model::*;

/// A world with `n` routes, each on its own host and Service.
fn many(n: usize) -> World {
    let mut w = World::new();
    for i in 0..n {
        w.service(INFRA, &format!("s{i}"), &[8080]);
        let mut r = route(
            INFRA,
            &format!("r{i}"),
            vec![rule(prefix("/"), vec![svc(&format!("s{i}"), 1)])],
        );
        r.hostnames = vec![format!("h{i}.example.com")];
        w.route(r);
    }
    w
}

/// Compiles `w` after `previous`, as the data plane does.
fn after(previous: &RouteTable, w: &World) -> RouteTable {
    RouteTable::compile_after(Some(previous), &Arc::new(w.snapshot.clone()), &w.routes)
}

fn first(w: &World) -> RouteTable {
    RouteTable::compile_after(None, &Arc::new(w.snapshot.clone()), &w.routes)
}

/// Where each of the first `n` hosts (and one unknown host) goes, plus the
/// table's notes and backends: everything a request or the data plane can
/// observe of a table.
fn observed(t: &RouteTable, n: usize) -> (Vec<String>, String, Vec<BackendKey>) {
    let mut hosts: Vec<String> = (0..n).map(|i| format!("h{i}.example.com")).collect();
    hosts.push("nowhere.example.com".into());
    let routed = hosts
        .iter()
        .map(|h| outcome(t.route(&gw80(), &get(h, "/x"), 0)))
        .collect();
    (
        routed,
        super::notes_of(t),
        t.backends().into_iter().collect(),
    )
}

#[test]
fn changing_one_route_compiles_that_route_only_and_routes_as_a_fresh_compile() {
    let mut w = many(200);
    let t1 = first(&w);
    assert_eq!(t1.compile_stats().compiled, 200);
    w.routes[7].rules[0].backend_refs = vec![svc("v2", 1)];
    let t2 = after(&t1, &w);
    assert_eq!(t2.compile_stats().compiled, 1);
    assert_eq!(t2.compile_stats().reused, 199);
    assert_eq!(
        outcome(t2.route(&gw80(), &get("h7.example.com", "/"), 0)),
        "v2"
    );
    assert_eq!(observed(&t2, 200), observed(&w.table(), 200));
}

#[test]
fn an_endpoint_move_compiles_nothing_and_keeps_the_lookup_structure() {
    let mut w = many(50);
    let t1 = first(&w);
    let mut meta = ObjectMeta::named(INFRA, "s3-abc");
    meta.labels
        .insert(SERVICE_NAME_LABEL.to_owned(), "s3".to_owned());
    w.snapshot.endpoint_slices.push(EndpointSlice {
        meta,
        address_type: "IPv4".into(),
        ports: Vec::new(),
        endpoints: Vec::new(),
        cluster: None,
    });
    w.snapshot
        .endpoint_generations
        .bump(ObjectName::new(INFRA, "s3"), 99);
    w.snapshot.version += 1;
    let t2 = after(&t1, &w);
    assert_eq!(t2.compile_stats().compiled, 0);
    assert_eq!(t2.compile_stats().reused, 50);
    assert!(
        Arc::ptr_eq(&t1.ports, &t2.ports),
        "the same lookup structure"
    );
    assert_eq!(observed(&t2, 50), observed(&w.table(), 50));
}

#[test]
fn a_route_whose_service_went_away_is_compiled_again_the_others_are_not() {
    let mut w = many(20);
    let t1 = first(&w);
    w.snapshot.services.retain(|s| s.meta.name != "s4");
    let t2 = after(&t1, &w);
    assert_eq!(t2.compile_stats().compiled, 1, "only r4 names s4");
    assert_eq!(
        outcome(t2.route(&gw80(), &get("h4.example.com", "/"), 0)),
        "500"
    );
    assert_eq!(observed(&t2, 20), observed(&w.table(), 20));
    // And back: the Service returns, r4 serves again.
    w.service(INFRA, "s4", &[8080]);
    let t3 = after(&t2, &w);
    assert_eq!(t3.compile_stats().compiled, 1);
    assert_eq!(
        outcome(t3.route(&gw80(), &get("h4.example.com", "/"), 0)),
        "s4"
    );
}

#[test]
fn a_gateway_change_compiles_every_route_again() {
    let mut w = many(10);
    let t1 = first(&w);
    w.snapshot.gateways[0].listeners[0].hostname = Some("h1.example.com".into());
    let t2 = after(&t1, &w);
    assert_eq!(t2.compile_stats().compiled, 10);
    assert_eq!(
        outcome(t2.route(&gw80(), &get("h1.example.com", "/"), 0)),
        "s1"
    );
    assert_eq!(observed(&t2, 10), observed(&w.table(), 10));
}

#[test]
fn added_and_removed_routes_change_the_table_and_nothing_else_compiles() {
    let mut w = many(10);
    let t1 = first(&w);
    w.routes.remove(3);
    w.service(INFRA, "s10", &[8080]);
    let mut r = route(INFRA, "r10", vec![rule(prefix("/"), vec![svc("s10", 1)])]);
    r.hostnames = vec!["h10.example.com".into()];
    w.route(r);
    let t2 = after(&t1, &w);
    assert_eq!(t2.compile_stats().compiled, 1, "r10 only");
    assert_eq!(t2.compile_stats().reused, 9);
    assert_eq!(
        outcome(t2.route(&gw80(), &get("h3.example.com", "/"), 0)),
        "404"
    );
    assert_eq!(
        outcome(t2.route(&gw80(), &get("h10.example.com", "/"), 0)),
        "s10"
    );
    assert_eq!(observed(&t2, 11), observed(&w.table(), 11));
}

#[test]
fn a_route_with_regexes_is_reused_with_the_very_same_compiled_regex() {
    let mut w = many(3);
    w.routes[0].rules[0].matches = vec![RouteMatch {
        path: Some(PathMatch::RegularExpression("/v[0-9]+/.*".into())),
        ..Default::default()
    }];
    let t1 = first(&w);
    w.routes[1].rules[0].backend_refs = vec![svc("v1", 1)];
    let t2 = after(&t1, &w);
    assert_eq!(t2.compile_stats().compiled, 1, "only the changed route");
    assert_eq!(
        outcome(t2.route(&gw80(), &get("h0.example.com", "/v2/x"), 0)),
        "s0"
    );
    assert_eq!(
        outcome(t2.route(&gw80(), &get("h0.example.com", "/x"), 0)),
        "404"
    );
}

#[test]
fn a_route_change_rebuilds_its_buckets_only() {
    let mut w = many(30);
    let t1 = first(&w);
    w.routes[5].rules[0].backend_refs = vec![svc("v3", 1)];
    let t2 = after(&t1, &w);
    let bucket = |t: &RouteTable, host: &str| {
        let port = t.ports.get(&gw80()).expect("gw:80");
        let listener = port.listeners.matching(host).next().expect("listener");
        Arc::clone(listener.routes.matching(host).next().expect("bucket"))
    };
    assert!(!Arc::ptr_eq(
        &bucket(&t1, "h5.example.com"),
        &bucket(&t2, "h5.example.com")
    ));
    assert!(
        Arc::ptr_eq(
            &bucket(&t1, "h6.example.com"),
            &bucket(&t2, "h6.example.com")
        ),
        "an untouched route's bucket is the previous table's"
    );
}

/// A small deterministic generator (no dependency, same sequence every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn any_sequence_of_changes_routes_exactly_as_a_fresh_compile() {
    // Routes share hostnames and paths, so buckets hold several routes'
    // candidates and precedence inside a bucket matters.
    const ROUTES: usize = 24;
    let make = |i: usize, host: usize, path: usize, backend: &str| {
        let mut r = route(
            INFRA,
            &format!("r{i}"),
            vec![rule(prefix(&format!("/p{path}")), vec![svc(backend, 1)])],
        );
        r.hostnames = vec![format!("h{host}.example.com")];
        r.meta.creation_timestamp_ms = Some(i as i64);
        r
    };
    let mut w = World::new();
    for i in 0..ROUTES {
        w.route(make(i, i % 5, i % 3, "v1"));
    }
    let probes: Vec<(String, String)> = (0..6)
        .flat_map(|h| (0..4).map(move |p| (format!("h{h}.example.com"), format!("/p{p}/x"))))
        .collect();
    let observe = |t: &RouteTable| -> Vec<String> {
        probes
            .iter()
            .map(|(h, p)| outcome(t.route(&gw80(), &get(h, p), 0)))
            .collect()
    };
    let mut rng = Lcg(7);
    let mut table = first(&w);
    for step in 0..300 {
        match rng.below(6) {
            0 if !w.routes.is_empty() => {
                let i = rng.below(w.routes.len());
                w.routes.remove(i);
            }
            1 => {
                let i = rng.below(ROUTES * 2);
                w.routes.retain(|r| r.meta.name != format!("r{i}"));
                w.route(make(i, rng.below(6), rng.below(4), "v2"));
            }
            2 if !w.routes.is_empty() => {
                let i = rng.below(w.routes.len());
                w.routes[i].hostnames = vec![format!("h{}.example.com", rng.below(6))];
            }
            3 if !w.routes.is_empty() => {
                let i = rng.below(w.routes.len());
                let backend = ["v1", "v2", "v3", "gone"][rng.below(4)];
                w.routes[i].rules[0].backend_refs = vec![svc(backend, 1)];
            }
            4 => {
                // A Service comes or goes.
                if w.snapshot.services.iter().any(|s| s.meta.name == "v3") {
                    w.snapshot.services.retain(|s| s.meta.name != "v3");
                } else {
                    w.service(INFRA, "v3", &[8080]);
                }
            }
            _ => {
                // An endpoint move.
                w.snapshot
                    .endpoint_generations
                    .bump(ObjectName::new(INFRA, "v1"), step as u64 + 1);
            }
        }
        table = after(&table, &w);
        assert_eq!(observe(&table), observe(&w.table()), "after step {step}");
        assert_eq!(
            super::notes_of(&table),
            super::notes_of(&w.table()),
            "notes after step {step}"
        );
        assert_eq!(
            table.backends(),
            w.table().backends(),
            "backends after step {step}"
        );
    }
}
