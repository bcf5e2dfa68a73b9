//! Attachment: which listeners of which Gateways a route's parentRef binds
//! to — the Gateway named (and whether it is ours), `sectionName`/`port`,
//! the listener's protocol (only HTTP is served), whether the listener is
//! conflicted (a conflicted listener is served nowhere, so nothing
//! attaches to it; the route reads `NotAllowedByListeners`, naming the
//! conflict), `allowedRoutes` namespaces and kinds, hostname intersection
//! — and, when none, why.

use super::hostname::{HostPattern, effective_hostnames};
use super::{GATEWAY_GROUP, Topology};
use crate::model::gateway::{Gateway, Listener, RouteNamespaces};
use crate::model::meta::ObjectName;
use crate::model::route::{HttpRoute, ParentRef, RouteKind};
use std::fmt;

/// A route bound to one listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached<'a> {
    /// The Gateway.
    pub gateway: &'a Gateway,
    /// The listener.
    pub listener: &'a Listener,
    /// The route's hostnames there (route ∩ listener); empty means every
    /// host.
    pub hostnames: Vec<HostPattern>,
}

/// Why a parentRef binds to no listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAttached {
    /// The parentRef is not a Gateway (another group or kind).
    NotAGateway {
        /// Its group.
        group: String,
        /// Its kind.
        kind: String,
    },
    /// No such Gateway.
    GatewayNotFound {
        /// The Gateway named.
        gateway: ObjectName,
    },
    /// The Gateway's class is not controlled by our controller (or does
    /// not exist).
    NotOurGatewayClass {
        /// The Gateway.
        gateway: ObjectName,
        /// Its `gatewayClassName`.
        class: String,
    },
    /// No listener matches the parentRef's `sectionName` and `port`.
    NoMatchingParent {
        /// The Gateway.
        gateway: ObjectName,
        /// The parentRef's `sectionName`.
        section_name: Option<String>,
        /// The parentRef's `port`.
        port: Option<u16>,
    },
    /// Listeners matched, but none allows the route (namespace, kind, or a
    /// protocol switchyard does not serve).
    NotAllowedByListeners {
        /// Per listener, why.
        why: Vec<String>,
    },
    /// Listeners allow the route, but no route hostname intersects theirs.
    NoMatchingListenerHostname {
        /// Per listener, why.
        why: Vec<String>,
    },
}

impl NotAttached {
    /// The Gateway API reason for the parent's `Accepted: False` (the
    /// first three are not the Gateway's to report; they read as
    /// `NoMatchingParent` where a reason is needed).
    pub fn reason(&self) -> &'static str {
        match self {
            NotAttached::NotAGateway { .. }
            | NotAttached::GatewayNotFound { .. }
            | NotAttached::NotOurGatewayClass { .. }
            | NotAttached::NoMatchingParent { .. } => "NoMatchingParent",
            NotAttached::NotAllowedByListeners { .. } => "NotAllowedByListeners",
            NotAttached::NoMatchingListenerHostname { .. } => "NoMatchingListenerHostname",
        }
    }
}

impl fmt::Display for NotAttached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotAttached::NotAGateway { group, kind } => {
                write!(f, "parent {group}/{kind} is not a Gateway")
            }
            NotAttached::GatewayNotFound { gateway } => {
                write!(f, "Gateway {gateway} does not exist")
            }
            NotAttached::NotOurGatewayClass { gateway, class } => write!(
                f,
                "Gateway {gateway} is of GatewayClass {class:?}, which switchyard does not control"
            ),
            NotAttached::NoMatchingParent {
                gateway,
                section_name,
                port,
            } => write!(
                f,
                "Gateway {gateway} has no listener matching sectionName {section_name:?} and port {port:?} (NoMatchingParent)"
            ),
            NotAttached::NotAllowedByListeners { why } => {
                write!(f, "{} (NotAllowedByListeners)", why.join("; "))
            }
            NotAttached::NoMatchingListenerHostname { why } => {
                write!(f, "{} (NoMatchingListenerHostname)", why.join("; "))
            }
        }
    }
}

/// Whether a parentRef's group and kind name a Gateway (empty means the
/// Gateway API defaults).
pub(super) fn is_gateway_ref(parent: &ParentRef) -> bool {
    (parent.group.is_empty() || parent.group == GATEWAY_GROUP)
        && (parent.kind.is_empty() || parent.kind == "Gateway")
}

impl<'a> Topology<'a> {
    /// The Gateway a parentRef of `route` names, if it is ours.
    pub fn our_gateway(
        &self,
        route: &HttpRoute,
        parent: &ParentRef,
    ) -> Result<&'a Gateway, NotAttached> {
        if !is_gateway_ref(parent) {
            return Err(NotAttached::NotAGateway {
                group: parent.group.clone(),
                kind: parent.kind.clone(),
            });
        }
        let ns = parent.namespace.as_deref().unwrap_or(&route.meta.namespace);
        let name = ObjectName::new(ns, parent.name.clone());
        let Some(&gateway) = self.gateways.get(&name) else {
            return Err(NotAttached::GatewayNotFound { gateway: name });
        };
        if !self.is_ours(gateway) {
            return Err(NotAttached::NotOurGatewayClass {
                gateway: name,
                class: gateway.gateway_class_name.clone(),
            });
        }
        Ok(gateway)
    }

    /// The listeners `parent` of `route` binds to, with the route's
    /// hostnames on each, or why none.
    pub fn attach(
        &self,
        route: &HttpRoute,
        parent: &ParentRef,
    ) -> Result<Vec<Attached<'a>>, NotAttached> {
        let gateway = self.our_gateway(route, parent)?;
        let candidates: Vec<&'a Listener> = gateway
            .listeners
            .iter()
            .filter(|l| parent.section_name.as_ref().is_none_or(|s| *s == l.name))
            .filter(|l| parent.port.is_none_or(|p| p == l.port))
            .collect();
        if candidates.is_empty() {
            return Err(NotAttached::NoMatchingParent {
                gateway: gateway.meta.object_name(),
                section_name: parent.section_name.clone(),
                port: parent.port,
            });
        }
        let mut attached = Vec::new();
        let mut not_allowed = Vec::new();
        let mut no_hostname = Vec::new();
        for l in candidates {
            if let Err(why) = self.listener_transport(gateway, l) {
                not_allowed.push(format!(
                    "listener {} is not served ({}): {why}",
                    l.name,
                    why.reason()
                ));
                continue;
            }
            if let Some(conflict) = self.listener_conflict(&gateway.meta.object_name(), &l.name) {
                not_allowed.push(format!(
                    "listener {} is Conflicted ({}): {conflict}",
                    l.name, conflict.reason
                ));
                continue;
            }
            if let Err(why) = self.allowed(gateway, l, route) {
                not_allowed.push(format!("listener {}: {why}", l.name));
                continue;
            }
            let listener_host = l.hostname.as_deref().map(HostPattern::parse);
            match effective_hostnames(&route.hostnames, listener_host.as_ref()) {
                Some(hostnames) => attached.push(Attached {
                    gateway,
                    listener: l,
                    hostnames,
                }),
                None => no_hostname.push(format!(
                    "listener {}: no route hostname intersects {:?}",
                    l.name, l.hostname
                )),
            }
        }
        if !attached.is_empty() {
            return Ok(attached);
        }
        if not_allowed.is_empty() {
            Err(NotAttached::NoMatchingListenerHostname { why: no_hostname })
        } else {
            not_allowed.extend(no_hostname);
            Err(NotAttached::NotAllowedByListeners { why: not_allowed })
        }
    }

    /// Every listener `route` binds to through any of its parentRefs (each
    /// once), and why each parentRef that binds nowhere does not.
    pub fn attach_route(
        &self,
        route: &HttpRoute,
    ) -> (Vec<Attached<'a>>, Vec<(usize, NotAttached)>) {
        let mut attached: Vec<Attached<'a>> = Vec::new();
        let mut refused = Vec::new();
        for (i, parent) in route.parent_refs.iter().enumerate() {
            match self.attach(route, parent) {
                Ok(found) => {
                    for a in found {
                        let seen = attached.iter().any(|b| {
                            std::ptr::eq(b.listener, a.listener)
                                && std::ptr::eq(b.gateway, a.gateway)
                        });
                        if !seen {
                            attached.push(a);
                        }
                    }
                }
                Err(why) => refused.push((i, why)),
            }
        }
        (attached, refused)
    }

    /// `allowedRoutes`: namespaces (Same / All / Selector) and kinds.
    fn allowed(&self, gateway: &Gateway, l: &Listener, route: &HttpRoute) -> Result<(), String> {
        let route_ns = route.meta.namespace.as_str();
        let ns_ok = match &l.allowed_routes.namespaces {
            RouteNamespaces::Same => route_ns == gateway.meta.namespace,
            RouteNamespaces::All => true,
            RouteNamespaces::Selector(selector) => {
                selector.matches(&self.namespace_labels(route_ns))
            }
        };
        if !ns_ok {
            return Err(format!("routes from namespace {route_ns} are not allowed"));
        }
        if !listener_allows(l, route.kind) {
            return Err(format!("kind {} is not allowed", route.kind.kind()));
        }
        Ok(())
    }
}

/// Whether a listener's `allowedRoutes.kinds` admits routes of `kind`
/// (empty means the protocol's default: HTTPRoute and GRPCRoute for HTTP
/// and HTTPS; a missing group reads as the Gateway API group, its YAML
/// default).
pub fn listener_allows(l: &Listener, kind: RouteKind) -> bool {
    let name = kind.kind().as_str();
    l.allowed_routes.kinds.is_empty()
        || l.allowed_routes
            .kinds
            .iter()
            .any(|k| (k.group.is_empty() || k.group == GATEWAY_GROUP) && k.kind == name)
}
