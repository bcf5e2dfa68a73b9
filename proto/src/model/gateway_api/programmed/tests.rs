//! The bound-port rule over small fleets: all reporting proxies with a
//! socket must have bound it; silent and unreporting proxies do not count.

use super::*;
use crate::model::status::ListenerBinding;

fn gw(name: &str) -> ObjectName {
    ObjectName::new("infra", name)
}

fn socket(gateway: Option<&str>, port: u16, error: Option<&str>) -> ListenerBinding {
    ListenerBinding {
        gateway: gateway.map(gw),
        port,
        address: format!("127.0.0.1:{port}"),
        bound: error.is_none(),
        error: error.map(Into::into),
    }
}

fn proxy(id: &str, live: bool, listeners: Option<Vec<ListenerBinding>>) -> ProxyStatus {
    ProxyStatus {
        id: id.into(),
        zone: "a".into(),
        admin_address: String::new(),
        live,
        listeners,
    }
}

#[test]
fn every_reporting_proxy_with_the_port_must_have_bound_it() {
    let fleet = vec![
        proxy("p1", true, Some(vec![socket(None, 80, None)])),
        proxy(
            "p2",
            true,
            Some(vec![socket(None, 80, None), socket(None, 81, None)]),
        ),
    ];
    assert_eq!(
        listener_port_state(&fleet, &gw("a"), 80),
        PortState::Bound { proxies: 2 }
    );
    assert_eq!(
        listener_port_state(&fleet, &gw("a"), 81),
        PortState::Bound { proxies: 1 }
    );
    assert_eq!(
        listener_port_state(&fleet, &gw("a"), 80).programmed(),
        Some(true)
    );
    assert_eq!(
        listener_port_state(&fleet, &gw("a"), 80).reason(),
        "Programmed"
    );

    let mut broken = fleet.clone();
    broken[1].listeners = Some(vec![socket(None, 80, Some("address in use"))]);
    let state = listener_port_state(&broken, &gw("a"), 80);
    assert_eq!(
        state,
        PortState::Unavailable {
            failed: vec![FailedBind {
                proxy: "p2".into(),
                address: "127.0.0.1:80".into(),
                error: "address in use".into(),
            }],
            bound: 1,
        }
    );
    assert_eq!(state.programmed(), Some(false));
    assert_eq!(state.reason(), "PortUnavailable");
    assert!(
        state
            .to_string()
            .contains("proxy p2 cannot bind 127.0.0.1:80: address in use"),
        "{state}"
    );
}

#[test]
fn silent_and_unreporting_proxies_do_not_count() {
    let fleet = vec![
        // An old proxy: no report at all. Unknown, not failed.
        proxy("old", true, None),
        // A proxy whose lease lapsed: its report does not count.
        proxy(
            "gone",
            false,
            Some(vec![socket(None, 80, Some("address in use"))]),
        ),
        proxy("p1", true, Some(vec![socket(None, 80, None)])),
    ];
    assert_eq!(
        listener_port_state(&fleet, &gw("a"), 80),
        PortState::Bound { proxies: 1 }
    );
    let only_old = vec![proxy("old", true, None)];
    assert_eq!(
        listener_port_state(&only_old, &gw("a"), 80),
        PortState::Unknown
    );
    assert_eq!(
        listener_port_state(&only_old, &gw("a"), 80).programmed(),
        None
    );
    assert_eq!(
        listener_port_state(&only_old, &gw("a"), 80).reason(),
        "Pending"
    );
    assert_eq!(listener_port_state(&[], &gw("a"), 80), PortState::Unknown);
}

#[test]
fn sockets_for_one_gateway_serve_only_that_gateway() {
    let fleet = vec![
        proxy("a-proxy", true, Some(vec![socket(Some("a"), 80, None)])),
        proxy(
            "b-proxy",
            true,
            Some(vec![socket(Some("b"), 80, Some("permission denied"))]),
        ),
    ];
    assert_eq!(
        listener_port_state(&fleet, &gw("a"), 80),
        PortState::Bound { proxies: 1 }
    );
    assert!(matches!(
        listener_port_state(&fleet, &gw("b"), 80),
        PortState::Unavailable { bound: 0, .. }
    ));
    assert_eq!(
        listener_port_state(&fleet, &gw("c"), 80),
        PortState::NotListened { reporting: 2 }
    );
    assert_eq!(
        listener_port_state(&fleet, &gw("a"), 8080).programmed(),
        Some(false)
    );
}
