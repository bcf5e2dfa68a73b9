//! The conflict rule on small sets of Gateways: who wins, which reason the
//! loser gets, and that input order never matters.

use super::*;
use crate::model::gateway::{AllowedRoutes, Listener};
use crate::model::meta::ObjectMeta;

fn gateway(name: &str, created: Option<i64>, listeners: Vec<Listener>) -> Gateway {
    let mut meta = ObjectMeta::named("infra", name);
    meta.creation_timestamp_ms = created;
    Gateway {
        meta,
        gateway_class_name: "switchyard".into(),
        listeners,
    }
}

fn listener(name: &str, port: u16, protocol: ListenerProtocol, hostname: Option<&str>) -> Listener {
    Listener {
        name: name.into(),
        port,
        protocol,
        hostname: hostname.map(Into::into),
        allowed_routes: AllowedRoutes::default(),
        tls: None,
    }
}

fn http(name: &str, port: u16, hostname: Option<&str>) -> Listener {
    listener(name, port, ListenerProtocol::Http, hostname)
}

fn at(gateway: &str, listener: &str) -> ListenerRef {
    ListenerRef::new(ObjectName::new("infra", gateway), listener)
}

/// Conflicts as `(gateway, listener, reason, winner gateway, winner
/// listener)`, checked to be the same for the reversed input.
fn conflicts(gateways: &[Gateway]) -> Vec<(String, String, ConflictReason, String, String)> {
    let forward = listener_conflicts(gateways);
    let backward = listener_conflicts(gateways.iter().rev());
    assert_eq!(forward, backward, "the outcome depends on input order");
    forward
        .into_iter()
        .map(|(who, c)| {
            (
                who.gateway.name,
                who.listener,
                c.reason,
                c.winner.gateway.name,
                c.winner.listener,
            )
        })
        .collect()
}

fn row(
    g: &str,
    l: &str,
    r: ConflictReason,
    wg: &str,
    wl: &str,
) -> (String, String, ConflictReason, String, String) {
    (g.into(), l.into(), r, wg.into(), wl.into())
}

#[test]
fn distinct_hostnames_on_one_port_share_it_across_gateways() {
    let a = gateway("a", Some(1), vec![http("web", 80, Some("a.example.com"))]);
    let b = gateway("b", Some(2), vec![http("web", 80, Some("b.example.com"))]);
    let c = gateway("c", Some(3), vec![http("web", 80, Some("*.example.com"))]);
    let d = gateway("d", Some(4), vec![http("web", 80, None)]);
    assert_eq!(conflicts(&[a, b, c, d]), vec![]);
}

#[test]
fn the_same_hostname_goes_to_the_older_gateway() {
    let old = gateway(
        "zz-old",
        Some(1_000),
        vec![http("web", 80, Some("shop.example.com"))],
    );
    let young = gateway(
        "aa-young",
        Some(2_000),
        vec![http("web", 80, Some("Shop.Example.com"))],
    );
    assert_eq!(
        conflicts(&[old, young]),
        vec![row(
            "aa-young",
            "web",
            ConflictReason::HostnameConflict,
            "zz-old",
            "web"
        )]
    );
}

#[test]
fn without_creation_times_the_gateway_counts_as_oldest_then_names_decide() {
    // YAML files carry no creation time: such a Gateway is the oldest,
    // and among several the namespace/name order decides.
    let timed = gateway("a", Some(5), vec![http("web", 80, None)]);
    let untimed_b = gateway("b", None, vec![http("web", 80, None)]);
    let untimed_c = gateway("c", None, vec![http("web", 80, None)]);
    assert_eq!(
        conflicts(&[timed, untimed_b, untimed_c]),
        vec![
            row("a", "web", ConflictReason::HostnameConflict, "b", "web"),
            row("c", "web", ConflictReason::HostnameConflict, "b", "web"),
        ]
    );
}

#[test]
fn another_protocol_on_a_held_port_is_a_protocol_conflict() {
    let plain = gateway(
        "plain",
        Some(1),
        vec![http("web", 8443, Some("a.example.com"))],
    );
    let tls = gateway(
        "tls",
        Some(2),
        vec![listener(
            "secure",
            8443,
            ListenerProtocol::Https,
            Some("b.example.com"),
        )],
    );
    let found = listener_conflicts([&plain, &tls]);
    assert_eq!(found.len(), 1);
    let c = &found[&at("tls", "secure")];
    assert_eq!(c.reason, ConflictReason::ProtocolConflict);
    assert_eq!(c.winner, at("plain", "web"));
    assert_eq!(c.winner_protocol, "HTTP");
    assert!(
        c.to_string()
            .contains("port 8443 is already served as HTTP by Gateway infra/plain listener web"),
        "{c}"
    );
    assert_eq!(c.reason.as_str(), "ProtocolConflict");
}

#[test]
fn https_and_tls_share_a_port_by_hostname() {
    let g = gateway(
        "edge",
        None,
        vec![
            listener("https", 443, ListenerProtocol::Https, Some("a.example.com")),
            listener(
                "tls",
                443,
                ListenerProtocol::Other("TLS".into()),
                Some("b.example.com"),
            ),
            listener(
                "tls-dup",
                443,
                ListenerProtocol::Other("TLS".into()),
                Some("a.example.com"),
            ),
        ],
    );
    let found = listener_conflicts([&g]);
    assert_eq!(found.len(), 1);
    let c = &found[&at("edge", "tls-dup")];
    assert_eq!(c.reason, ConflictReason::HostnameConflict);
    assert_eq!(c.winner, at("edge", "https"));
    assert_eq!(c.winner_protocol, "HTTPS");
    assert_eq!(c.hostname.as_deref(), Some("a.example.com"));
}

#[test]
fn within_one_gateway_the_earlier_listener_wins() {
    let g = gateway(
        "gw",
        None,
        vec![
            http("first", 80, None),
            http("second", 80, None),
            http("other-port", 81, None),
        ],
    );
    assert_eq!(
        conflicts(&[g]),
        vec![row(
            "gw",
            "second",
            ConflictReason::HostnameConflict,
            "gw",
            "first"
        )]
    );
}

#[test]
fn a_conflicted_listener_claims_nothing() {
    // `b` loses the port to `a`'s protocol; `c` is compared with what `a`
    // holds only, so its hostname is free.
    let a = gateway("a", Some(1), vec![http("web", 80, None)]);
    let b = gateway(
        "b",
        Some(2),
        vec![listener(
            "tls",
            80,
            ListenerProtocol::Https,
            Some("x.example.com"),
        )],
    );
    let c = gateway("c", Some(3), vec![http("web", 80, Some("x.example.com"))]);
    assert_eq!(
        conflicts(&[a, b, c]),
        vec![row(
            "b",
            "tls",
            ConflictReason::ProtocolConflict,
            "a",
            "web"
        )]
    );
}

#[test]
fn udp_uses_other_sockets_and_tcp_listeners_have_no_hostname() {
    let g = gateway(
        "l4",
        None,
        vec![
            http("web", 53, None),
            listener("dns", 53, ListenerProtocol::Other("UDP".into()), None),
            listener(
                "raw",
                9000,
                ListenerProtocol::Other("TCP".into()),
                Some("ignored.example"),
            ),
            listener(
                "raw2",
                9000,
                ListenerProtocol::Other("TCP".into()),
                Some("other.example"),
            ),
        ],
    );
    assert_eq!(
        conflicts(&[g]),
        vec![row(
            "l4",
            "raw2",
            ConflictReason::HostnameConflict,
            "l4",
            "raw"
        )]
    );
}

#[test]
fn topology_counts_only_our_gateways_and_attaches_nothing_to_a_conflicted_listener() {
    use crate::model::gateway::{CONTROLLER_NAME, GatewayClass};
    use crate::model::gateway_api::Topology;
    use crate::model::route::{HttpRoute, ParentRef};
    use crate::model::snapshot::ConfigSnapshot;
    let class = |name: &str, controller: &str| GatewayClass {
        meta: ObjectMeta::named("", name),
        controller_name: controller.into(),
    };
    let mut theirs = gateway("theirs", None, vec![http("web", 80, None)]);
    theirs.gateway_class_name = "other".into();
    let snapshot = ConfigSnapshot {
        gateway_classes: vec![
            class("switchyard", CONTROLLER_NAME),
            class("other", "example.com/x"),
        ],
        gateways: vec![
            theirs,
            gateway("old", Some(1), vec![http("web", 80, None)]),
            gateway(
                "young",
                Some(2),
                vec![
                    http("web", 80, None),
                    http("api", 80, Some("api.example.com")),
                ],
            ),
        ],
        ..Default::default()
    };
    let t = Topology::of_snapshot(&snapshot);
    // Another controller's Gateway on the same port is not ours to serve:
    // it takes nothing from ours.
    let keys: Vec<&ListenerRef> = t.listener_conflicts().keys().collect();
    assert_eq!(keys, vec![&at("young", "web")]);
    assert_eq!(
        t.listener_conflict(&ObjectName::new("infra", "young"), "web")
            .map(|c| c.reason),
        Some(ConflictReason::HostnameConflict)
    );
    assert_eq!(
        t.listener_conflict(&ObjectName::new("infra", "young"), "api"),
        None
    );

    let route = |section: Option<&str>| HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("infra", "r"),
        parent_refs: vec![ParentRef {
            group: String::new(),
            kind: String::new(),
            namespace: None,
            name: "young".into(),
            section_name: section.map(Into::into),
            port: None,
        }],
        hostnames: Vec::new(),
        rules: Vec::new(),
    };
    let to_web = route(Some("web"));
    let refused = t
        .attach(&to_web, &to_web.parent_refs[0])
        .expect_err("web is conflicted");
    assert_eq!(refused.reason(), "NotAllowedByListeners");
    assert!(
        refused
            .to_string()
            .contains("listener web is Conflicted (HostnameConflict)"),
        "{refused}"
    );
    let to_any = route(None);
    let attached = t
        .attach(&to_any, &to_any.parent_refs[0])
        .expect("api is free");
    let names: Vec<&str> = attached.iter().map(|a| a.listener.name.as_str()).collect();
    assert_eq!(names, vec!["api"]);
}
