//! Gateway status, computed: `Accepted` and `Programmed` for the Gateway,
//! its `addresses`, and per listener `Accepted`, `ResolvedRefs`,
//! `Conflicted`, `Programmed`, the supported route kinds (narrowed to what
//! switchyard serves) and the number of attached routes (every listener,
//! served or not).
//!
//! Pure, like [`super::route_parent_statuses`]. The proxies as the leader
//! knows them are passed in: the Gateway is `Programmed` while a live
//! proxy serves it, and a listener only when the live proxies report that
//! they bound its port (else `PortUnavailable`, or `Pending` while none
//! has reported). The addresses come from the proxies' Service through
//! [`with_addresses`]. A Gateway that is not `Accepted` is never
//! `Programmed`, nor is a `Conflicted` listener. The rules themselves are
//! the model's ([`Topology::listener_conflict`](switchyard_proto::model::gateway_api::Topology::listener_conflict),
//! [`listener_port_state`]); this module only maps them to conditions.

use super::addresses::{Assignment, GatewayAddress};
use super::conditions::{Condition, ConditionStatus, World};
use switchyard_proto::model::gateway_api::{GATEWAY_GROUP, listener_port_state};
use switchyard_proto::model::{Gateway, Listener, ProxyStatus};

/// A Gateway's status (without times).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayStatus {
    /// `Accepted`, `Programmed`.
    pub conditions: Vec<Condition>,
    /// One entry per listener, in spec order.
    pub listeners: Vec<ListenerStatus>,
    /// `status.addresses` (empty until [`with_addresses`]).
    pub addresses: Vec<GatewayAddress>,
}

/// One listener's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerStatus {
    /// The listener's name.
    pub name: String,
    /// Routes attached to it (accepted through at least one parentRef).
    pub attached_routes: i32,
    /// `(group, kind)` of the route kinds it serves.
    pub supported_kinds: Vec<(String, String)>,
    /// `Accepted`, `Conflicted`, `ResolvedRefs`, `Programmed`.
    pub conditions: Vec<Condition>,
}

/// The status of one of our Gateways. `proxies` are the proxies the
/// coordinators know, with their liveness and the listener sockets they
/// last reported. The world's controller decides which routes count as
/// attached.
pub fn gateway_status(
    gateway: &Gateway,
    world: &World<'_>,
    proxies: &[ProxyStatus],
) -> GatewayStatus {
    use ConditionStatus::{False, True};
    let generation = gateway.meta.k8s_generation;
    let c = |type_: &str, status, reason: &str, message: String| Condition {
        type_: type_.to_string(),
        status,
        reason: reason.to_string(),
        message,
        observed_generation: generation,
    };
    let gateway_name = gateway.meta.object_name();
    let live_proxies = proxies.iter().filter(|p| p.live).count();
    let programmed = if live_proxies > 0 {
        (
            True,
            "Programmed",
            format!("served by {live_proxies} live proxies"),
        )
    } else {
        (False, "Pending", "no live proxy yet".to_string())
    };
    let mut listeners = Vec::new();
    let mut valid = 0;
    for l in &gateway.listeners {
        let mut conditions = Vec::new();
        let mut supported_kinds = Vec::new();
        let conflict = world.topology.listener_conflict(&gateway_name, &l.name);
        let conflicted = match conflict {
            Some(conflict) => c(
                "Conflicted",
                True,
                conflict.reason.as_str(),
                conflict.to_string(),
            ),
            None => c("Conflicted", False, "NoConflicts", "no conflicts".into()),
        };
        let transport = world.topology.listener_transport(gateway, l);
        match transport {
            Err(problem) if problem.is_protocol() => {
                conditions.push(c("Accepted", False, problem.reason(), problem.to_string()));
                conditions.push(conflicted);
                conditions.push(c(
                    "ResolvedRefs",
                    True,
                    "ResolvedRefs",
                    "refs resolved".into(),
                ));
                conditions.push(c(
                    "Programmed",
                    False,
                    "Invalid",
                    "listener not accepted".into(),
                ));
            }
            transport => {
                let certificates = transport.as_ref().err();
                if certificates.is_none() {
                    valid += 1;
                }
                conditions.push(c("Accepted", True, "Accepted", "listener accepted".into()));
                conditions.push(conflicted);
                let (supported, invalid) = route_kinds(l);
                supported_kinds = supported;
                conditions.push(if let Some(problem) = certificates {
                    c("ResolvedRefs", False, problem.reason(), problem.to_string())
                } else if invalid.is_empty() {
                    c(
                        "ResolvedRefs",
                        True,
                        "ResolvedRefs",
                        "refs resolved".into(),
                    )
                } else {
                    c(
                        "ResolvedRefs",
                        False,
                        "InvalidRouteKinds",
                        format!(
                            "allowedRoutes.kinds {} not supported; switchyard serves HTTPRoute only",
                            invalid.join(", ")
                        ),
                    )
                });
                conditions.push(match (conflict, certificates) {
                    (Some(conflict), _) => c(
                        "Programmed",
                        False,
                        "Invalid",
                        format!("not served: {conflict}"),
                    ),
                    (None, Some(problem)) => c(
                        "Programmed",
                        False,
                        "Invalid",
                        format!("not served, connections are refused: {problem}"),
                    ),
                    (None, None) => {
                        let port = listener_port_state(proxies, &gateway_name, l.port);
                        let status = if port.programmed() == Some(true) {
                            True
                        } else {
                            False
                        };
                        c("Programmed", status, port.reason(), port.to_string())
                    }
                });
            }
        }
        listeners.push(ListenerStatus {
            name: l.name.clone(),
            attached_routes: attached_routes(gateway, &l.name, world),
            supported_kinds,
            conditions,
        });
    }
    let accepted = if valid > 0 || gateway.listeners.is_empty() {
        c(
            "Accepted",
            True,
            "Accepted",
            format!("{valid} listener(s) served"),
        )
    } else {
        c(
            "Accepted",
            False,
            "ListenersNotValid",
            "no listener can be served".into(),
        )
    };
    let programmed = c("Programmed", programmed.0, programmed.1, programmed.2);
    let mut conditions = vec![accepted, programmed];
    programmed_follows_accepted(&mut conditions);
    GatewayStatus {
        conditions,
        listeners,
        addresses: Vec::new(),
    }
}

/// `status` completed with the Gateway's address assignment: its
/// addresses, `Accepted` `False`/`UnsupportedAddress` for an address type
/// switchyard cannot serve, `Programmed` `False` while it has no usable
/// address (`AddressNotAssigned`, `AddressNotUsable`).
pub fn with_addresses(mut status: GatewayStatus, assignment: &Assignment) -> GatewayStatus {
    status.addresses = assignment.addresses.clone();
    let set = |conditions: &mut Vec<Condition>, type_: &str, reason: &str, message: &str| {
        if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
            c.status = ConditionStatus::False;
            c.reason = reason.to_string();
            c.message = message.to_string();
        }
    };
    if let Err(message) = &assignment.accepted {
        set(
            &mut status.conditions,
            "Accepted",
            "UnsupportedAddress",
            message,
        );
    }
    if let Err((reason, message)) = &assignment.programmed {
        set(&mut status.conditions, "Programmed", reason, message);
    }
    programmed_follows_accepted(&mut status.conditions);
    status
}

/// A Gateway that is not accepted is not programmed, whatever the proxies
/// do: nothing of it is served.
fn programmed_follows_accepted(conditions: &mut [Condition]) {
    let Some(why) = conditions
        .iter()
        .find(|c| c.type_ == "Accepted" && c.status != ConditionStatus::True)
        .map(|c| format!("the Gateway is not accepted: {}", c.message))
    else {
        return;
    };
    if let Some(p) = conditions.iter_mut().find(|c| c.type_ == "Programmed") {
        p.status = ConditionStatus::False;
        p.reason = "Invalid".to_string();
        p.message = why;
    }
}

/// The route kinds an HTTP listener supports, narrowed to what switchyard
/// serves (`supportedKinds`), and the ones it names that switchyard does
/// not serve (`InvalidRouteKinds`). No `allowedRoutes.kinds` means the
/// protocol's default: HTTPRoute and GRPCRoute.
fn route_kinds(l: &Listener) -> (Vec<(String, String)>, Vec<String>) {
    const SERVED: [&str; 2] = ["HTTPRoute", "GRPCRoute"];
    let kind = |k: &str| (GATEWAY_GROUP.to_string(), k.to_string());
    if l.allowed_routes.kinds.is_empty() {
        return (SERVED.map(kind).to_vec(), Vec::new());
    }
    let mut supported = Vec::new();
    let mut invalid = Vec::new();
    for k in &l.allowed_routes.kinds {
        let group = if k.group.is_empty() {
            GATEWAY_GROUP
        } else {
            k.group.as_str()
        };
        if group == GATEWAY_GROUP && SERVED.contains(&k.kind.as_str()) {
            if !supported.contains(&kind(&k.kind)) {
                supported.push(kind(&k.kind));
            }
        } else {
            invalid.push(format!("{group}/{}", k.kind));
        }
    }
    (supported, invalid)
}

fn attached_routes(gateway: &Gateway, listener: &str, world: &World<'_>) -> i32 {
    let name = gateway.meta.object_name();
    let count = world
        .routes
        .iter()
        .filter(|route| {
            world
                .topology
                .attach_route(route)
                .0
                .iter()
                .any(|a| a.gateway.meta.object_name() == name && a.listener.name == listener)
        })
        .count();
    i32::try_from(count).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_documents;
    use switchyard_proto::model::{CONTROLLER_NAME, Resource};

    const SET: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ours}
spec: {controllerName: switchyard.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: shop, generation: 2}
spec:
  gatewayClassName: ours
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: admin, port: 8080, protocol: HTTP, allowedRoutes: {kinds: [{kind: TLSRoute}]}}
  - {name: tls, port: 443, protocol: HTTPS}
  - {name: mixed, port: 81, protocol: HTTP, allowedRoutes: {kinds: [{kind: FooRoute}, {kind: HTTPRoute}]}}
  - {name: tcp, port: 9000, protocol: TCP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: a, namespace: shop}
spec: {parentRefs: [{name: gw}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: b, namespace: shop}
spec: {parentRefs: [{name: gw, sectionName: http}]}
"#;

    /// `live` live proxies, each with a bound socket for every port the
    /// Gateway listens on.
    fn status(live: usize) -> GatewayStatus {
        let resources = parse_documents("set", SET).unwrap();
        let world = World::new(&resources, CONTROLLER_NAME);
        let Some(Resource::Gateway(g)) =
            resources.iter().find(|r| matches!(r, Resource::Gateway(_)))
        else {
            panic!()
        };
        let sockets = [80, 8080, 443, 81].map(|port| switchyard_proto::model::ListenerBinding {
            gateway: None,
            port,
            address: format!("0.0.0.0:{port}"),
            bound: true,
            error: None,
        });
        let proxies: Vec<ProxyStatus> = (0..live)
            .map(|i| ProxyStatus {
                id: format!("p{i}"),
                live: true,
                listeners: Some(sockets.to_vec()),
                ..ProxyStatus::default()
            })
            .collect();
        gateway_status(g, &world, &proxies)
    }

    fn get<'a>(cs: &'a [Condition], t: &str) -> (&'a str, ConditionStatus) {
        let c = cs.iter().find(|c| c.type_ == t).unwrap();
        (c.reason.as_str(), c.status)
    }

    #[test]
    fn listeners_report_protocol_kinds_and_attached_routes() {
        let s = status(3);
        assert_eq!(
            get(&s.conditions, "Accepted"),
            ("Accepted", ConditionStatus::True)
        );
        assert_eq!(
            get(&s.conditions, "Programmed"),
            ("Programmed", ConditionStatus::True)
        );
        assert_eq!(s.conditions[0].observed_generation, Some(2));
        let by_name = |n: &str| s.listeners.iter().find(|l| l.name == n).unwrap();
        assert_eq!(by_name("http").attached_routes, 2);
        assert_eq!(by_name("admin").attached_routes, 0);
        assert_eq!(
            get(&by_name("admin").conditions, "ResolvedRefs"),
            ("InvalidRouteKinds", ConditionStatus::False)
        );
        assert!(by_name("admin").supported_kinds.is_empty());
        assert_eq!(
            get(&by_name("mixed").conditions, "ResolvedRefs"),
            ("InvalidRouteKinds", ConditionStatus::False)
        );
        assert_eq!(
            by_name("mixed").supported_kinds,
            [(GATEWAY_GROUP.to_string(), "HTTPRoute".to_string())]
        );
        assert_eq!(by_name("mixed").attached_routes, 1, "a: no sectionName");
        assert_eq!(by_name("tls").attached_routes, 0);
        assert_eq!(
            get(&by_name("tls").conditions, "Accepted"),
            ("Accepted", ConditionStatus::True)
        );
        assert_eq!(
            get(&by_name("tls").conditions, "ResolvedRefs"),
            ("InvalidCertificateRef", ConditionStatus::False),
            "an HTTPS listener without certificateRefs"
        );
        assert_eq!(
            get(&by_name("tls").conditions, "Programmed"),
            ("Invalid", ConditionStatus::False)
        );
        assert_eq!(by_name("tcp").attached_routes, 0);
        assert_eq!(
            get(&by_name("tcp").conditions, "Accepted"),
            ("UnsupportedProtocol", ConditionStatus::False)
        );
        // No allowedRoutes.kinds: both route kinds switchyard serves.
        assert_eq!(
            by_name("http").supported_kinds,
            [
                (GATEWAY_GROUP.to_string(), "HTTPRoute".to_string()),
                (GATEWAY_GROUP.to_string(), "GRPCRoute".to_string())
            ]
        );
    }

    #[test]
    fn without_live_proxies_nothing_is_programmed() {
        let s = status(0);
        assert_eq!(
            get(&s.conditions, "Programmed"),
            ("Pending", ConditionStatus::False)
        );
        assert_eq!(
            get(&s.listeners[0].conditions, "Programmed"),
            ("Pending", ConditionStatus::False)
        );
    }
}
