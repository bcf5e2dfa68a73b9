//! Gateways share the fleet's ports but not their routes: a request is
//! matched to one listener of one Gateway, and a conflicted listener
//! serves nothing.

use super::notes_of;
use crate::router::testkit::*;
use crate::router::{ListenerKey, RespondKind, RouteTable};
use switchyard_proto::model::*;

/// The merged socket for port 80: every Gateway's listeners on it.
fn port80() -> ListenerKey {
    ListenerKey {
        gateway: None,
        port: 80,
    }
}

fn only(gateway: &str) -> ListenerKey {
    ListenerKey {
        gateway: Some(ObjectName::new(INFRA, gateway)),
        port: 80,
    }
}

/// A route on `gateway` sending `path` to `backend`.
fn route_on(gateway: &str, name: &str, path: &str, backend: &str, hostnames: &[&str]) -> HttpRoute {
    let mut r = route(INFRA, name, vec![rule(prefix(path), vec![svc(backend, 1)])]);
    r.parent_refs = vec![parent(INFRA, gateway)];
    r.hostnames = hostnames.iter().map(|h| h.to_string()).collect();
    r
}

fn gateway_created(w: &mut World, name: &str, created: Option<i64>, listeners: Vec<Listener>) {
    w.gateway(INFRA, name, OUR_CLASS, listeners);
    if let Some(g) = w.snapshot.gateways.last_mut() {
        g.meta.creation_timestamp_ms = created;
    }
}

#[test]
fn a_gateways_route_does_not_answer_through_another_gateways_listener() {
    let mut w = World::bare();
    w.gateway(
        INFRA,
        "a",
        OUR_CLASS,
        vec![listener("web", 80, Some("*.example.com"))],
    );
    w.gateway(
        INFRA,
        "b",
        OUR_CLASS,
        vec![listener("web", 80, Some("b.example.com"))],
    );
    // Gateway a's routes: one for every host its listener takes, and one
    // that names b's host explicitly (it intersects a's wildcard, so it
    // attaches to a).
    w.route(route_on("a", "a-all", "/", "v1", &[]));
    w.route(route_on("a", "a-wants-b", "/", "v3", &["b.example.com"]));
    w.route(route_on("b", "b-only", "/b", "v2", &[]));
    let t = w.table();
    assert_eq!(
        outcome(t.route(&port80(), &get("a.example.com", "/"), 0)),
        "v1"
    );
    assert_eq!(
        outcome(t.route(&port80(), &get("b.example.com", "/b/x"), 0)),
        "v2"
    );
    // b.example.com belongs to b's listener (exact beats wildcard): a's
    // routes are no candidates there, even where b has none that matches.
    let r = respond(t.route(&port80(), &get("b.example.com", "/"), 0));
    assert_eq!((r.status.as_u16(), r.kind), (404, RespondKind::NoRoute));
    // A socket for a alone carries only a's listener, so there the host
    // is a's (the route naming it explicitly wins over the catch-all).
    assert_eq!(
        outcome(t.route(&only("a"), &get("b.example.com", "/"), 0)),
        "v3"
    );
    assert_eq!(
        outcome(t.route(&only("a"), &get("b.example.com", "/b/x"), 0)),
        "v3"
    );
    assert_eq!(
        outcome(t.route(&only("b"), &get("a.example.com", "/"), 0)),
        "404"
    );
    assert!(!notes_of(&t).contains("Conflicted"), "{}", notes_of(&t));
}

#[test]
fn a_younger_gateway_with_the_same_port_and_hostname_serves_nothing() {
    let mut w = World::bare();
    // Names sort the other way round: age decides, not the name.
    gateway_created(
        &mut w,
        "zz-old",
        Some(1_000),
        vec![listener("web", 80, Some("shop.example.com"))],
    );
    gateway_created(
        &mut w,
        "aa-young",
        Some(2_000),
        vec![
            listener("web", 80, Some("shop.example.com")),
            listener("other", 80, Some("other.example.com")),
        ],
    );
    w.route(route_on("zz-old", "old-route", "/old", "v1", &[]));
    w.route(route_on("aa-young", "young-route", "/", "v2", &[]));
    let t = w.table();
    // The old Gateway keeps the hostname; the young Gateway's route is
    // served only through its listener that does not clash.
    assert_eq!(
        outcome(t.route(&port80(), &get("shop.example.com", "/old"), 0)),
        "v1"
    );
    assert_eq!(
        outcome(t.route(&port80(), &get("shop.example.com", "/"), 0)),
        "404"
    );
    assert_eq!(
        outcome(t.route(&port80(), &get("other.example.com", "/"), 0)),
        "v2"
    );
    // Not through a socket of its own either: a conflicted listener is
    // served nowhere, as its status will say.
    let r = respond(t.route(&only("aa-young"), &get("shop.example.com", "/"), 0));
    assert_eq!((r.status.as_u16(), r.kind), (404, RespondKind::NoListener));
    let notes = notes_of(&t);
    assert!(
        notes.contains("Gateway infra/aa-young: listener web is Conflicted (HostnameConflict): port 80 with hostname shop.example.com is already served by Gateway infra/zz-old listener web"),
        "{notes}"
    );
}

#[test]
fn a_protocol_conflict_on_a_port_leaves_it_to_the_older_gateway() {
    let mut w = World::bare();
    let mut tls = listener("tls", 80, Some("secure.example.com"));
    tls.protocol = ListenerProtocol::Https;
    gateway_created(&mut w, "tls", Some(1), vec![tls]);
    gateway_created(
        &mut w,
        "plain",
        Some(2),
        vec![listener("web", 80, Some("plain.example.com"))],
    );
    w.route(route_on("plain", "plain-route", "/", "v1", &[]));
    let t: RouteTable = w.table();
    // HTTPS is not served yet, but it holds the port: the younger HTTP
    // listener is ProtocolConflict, and port 80 serves nothing.
    assert_eq!(
        outcome(t.route(&port80(), &get("plain.example.com", "/"), 0)),
        "404"
    );
    let notes = notes_of(&t);
    assert!(
        notes.contains("listener web is Conflicted (ProtocolConflict)"),
        "{notes}"
    );
    assert!(
        notes.contains("already served as HTTPS by Gateway infra/tls listener tls"),
        "{notes}"
    );
}

#[test]
fn listeners_without_hostnames_on_one_port_go_to_the_first_gateway() {
    // Without creation times (YAML files) the namespace/name order
    // decides: infra/gw before infra/second. A route attached to both is
    // served once, through gw.
    let mut w = World::new();
    w.gateway(INFRA, "second", OUR_CLASS, vec![listener("http", 80, None)]);
    w.route(route_on("second", "second-route", "/second", "v2", &[]));
    let mut both = route(INFRA, "both", vec![rule(prefix("/"), vec![svc("v1", 1)])]);
    both.parent_refs.push(parent(INFRA, "second"));
    w.route(both);
    let t = w.table();
    assert_eq!(outcome(t.route(&port80(), &get("h", "/second/x"), 0)), "v1");
    assert_eq!(outcome(t.route(&gw80(), &get("h", "/second/x"), 0)), "v1");
    assert_eq!(outcome(t.route(&only("second"), &get("h", "/x"), 0)), "404");
    let notes = notes_of(&t);
    assert!(
        notes.contains("HTTPRoute infra/second-route: not attached to Gateway infra/second"),
        "{notes}"
    );
    assert!(notes.contains("(NotAllowedByListeners)"), "{notes}");
}
