//! Which Gateways and listeners switchyard serves, and which of them each
//! route attaches to (parentRefs, `allowedRoutes`, hostname intersection).
//!
//! It owns attachment only: the result is, per route, the served listeners
//! it is attached to and the hostnames it answers there. It does not look
//! at rules, matches or backends.

use super::CompileNote;
use super::backends::GATEWAY_GROUP;
use super::hostname::HostPattern;
use std::collections::{BTreeMap, HashMap};
use switchyard_proto::model::{
    CONTROLLER_NAME, ConfigSnapshot, Gateway, HttpRoute, Kind, Listener, ListenerProtocol,
    ObjectName, ParentRef, RouteNamespaces,
};

/// The label Kubernetes puts on every Namespace with its own name; selectors
/// commonly use it, and snapshots built by hand may lack it.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// An HTTP listener of a served Gateway.
#[derive(Debug)]
pub(crate) struct ServedListener {
    /// The Gateway.
    pub(crate) gateway: ObjectName,
    /// The Gateway's listener port.
    pub(crate) port: u16,
    /// The listener hostname; `None` accepts every host.
    pub(crate) hostname: Option<HostPattern>,
}

/// A route attached to one served listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attachment {
    /// Index into [`Gateways::listeners`].
    pub(crate) listener: usize,
    /// The route's effective hostnames there (route ∩ listener); empty
    /// means every host.
    pub(crate) hostnames: Vec<HostPattern>,
}

/// Served Gateways and their HTTP listeners, ready for attaching routes.
pub(crate) struct Gateways<'a> {
    /// Every HTTP listener of every served Gateway.
    pub(crate) listeners: Vec<ServedListener>,
    /// Listener indexes by (Gateway, listener name).
    by_name: HashMap<(ObjectName, &'a str), usize>,
    gateways: HashMap<ObjectName, (&'a Gateway, bool)>,
    namespaces: HashMap<&'a str, &'a BTreeMap<String, String>>,
}

impl<'a> Gateways<'a> {
    /// Finds the served Gateways (class controlled by [`CONTROLLER_NAME`])
    /// and their HTTP listeners; notes listeners it skips.
    pub(crate) fn new(snapshot: &'a ConfigSnapshot, notes: &mut Vec<CompileNote>) -> Gateways<'a> {
        let ours: Vec<&str> = snapshot
            .gateway_classes
            .iter()
            .filter(|c| c.controller_name == CONTROLLER_NAME)
            .map(|c| c.meta.name.as_str())
            .collect();
        let mut listeners = Vec::new();
        let mut by_name = HashMap::new();
        let mut gateways = HashMap::new();
        for g in &snapshot.gateways {
            let name = g.meta.object_name();
            let served = ours.contains(&g.gateway_class_name.as_str());
            gateways.insert(name.clone(), (g, served));
            if !served {
                continue;
            }
            for l in &g.listeners {
                if l.protocol != ListenerProtocol::Http {
                    notes.push(CompileNote::gateway(
                        &name,
                        format!(
                            "listener {} ({:?} on port {}) is not served: only HTTP listeners are",
                            l.name, l.protocol, l.port
                        ),
                    ));
                    continue;
                }
                by_name.insert((name.clone(), l.name.as_str()), listeners.len());
                listeners.push(ServedListener {
                    gateway: name.clone(),
                    port: l.port,
                    hostname: l.hostname.as_deref().map(HostPattern::parse),
                });
            }
        }
        let namespaces = snapshot
            .namespaces
            .iter()
            .map(|n| (n.meta.name.as_str(), &n.meta.labels))
            .collect();
        Gateways {
            listeners,
            by_name,
            gateways,
            namespaces,
        }
    }

    /// The listeners `route` attaches to, with its hostnames on each. Every
    /// parentRef that attaches nowhere gets a note saying why.
    pub(crate) fn attach(
        &self,
        route: &HttpRoute,
        notes: &mut Vec<CompileNote>,
    ) -> Vec<Attachment> {
        let route_name = route.meta.object_name();
        let mut out: Vec<Attachment> = Vec::new();
        for parent in &route.parent_refs {
            match self.attach_parent(route, parent) {
                Ok(found) => {
                    for a in found {
                        if !out.iter().any(|o| o.listener == a.listener) {
                            out.push(a);
                        }
                    }
                }
                Err(why) => notes.push(CompileNote::route(
                    &route_name,
                    format!("not attached to {}: {why}", parent_label(route, parent)),
                )),
            }
        }
        if route.parent_refs.is_empty() {
            notes.push(CompileNote::route(
                &route_name,
                "has no parentRefs; not served".into(),
            ));
        }
        out
    }

    fn attach_parent(
        &self,
        route: &HttpRoute,
        parent: &ParentRef,
    ) -> Result<Vec<Attachment>, String> {
        let group_ok = parent.group.is_empty() || parent.group == GATEWAY_GROUP;
        let kind_ok = parent.kind.is_empty() || parent.kind == "Gateway";
        if !group_ok || !kind_ok {
            return Err(format!(
                "parent kind {}/{} is not a Gateway",
                parent.group, parent.kind
            ));
        }
        let ns = parent.namespace.as_deref().unwrap_or(&route.meta.namespace);
        let gw_name = ObjectName::new(ns, parent.name.clone());
        let Some(&(gateway, served)) = self.gateways.get(&gw_name) else {
            return Err("the Gateway does not exist".into());
        };
        if !served {
            return Err(format!(
                "GatewayClass {:?} is not controlled by {CONTROLLER_NAME}",
                gateway.gateway_class_name
            ));
        }
        let candidates: Vec<&Listener> = gateway
            .listeners
            .iter()
            .filter(|l| parent.section_name.as_ref().is_none_or(|s| *s == l.name))
            .filter(|l| parent.port.is_none_or(|p| p == l.port))
            .collect();
        if candidates.is_empty() {
            return Err(
                "no listener matches the parentRef's sectionName/port (NoMatchingParent)".into(),
            );
        }
        let mut found = Vec::new();
        let mut reasons = Vec::new();
        for l in candidates {
            let Some(&index) = self.by_name.get(&(gw_name.clone(), l.name.as_str())) else {
                reasons.push(format!("listener {} is not HTTP", l.name));
                continue;
            };
            if let Err(why) = self.allowed(gateway, l, route) {
                reasons.push(format!("listener {}: {why}", l.name));
                continue;
            }
            match effective_hostnames(route, self.listeners[index].hostname.as_ref()) {
                Some(hostnames) => found.push(Attachment {
                    listener: index,
                    hostnames,
                }),
                None => reasons.push(format!(
                    "listener {}: no route hostname intersects {:?}",
                    l.name, l.hostname
                )),
            }
        }
        if found.is_empty() {
            return Err(reasons.join("; "));
        }
        Ok(found)
    }

    /// `allowedRoutes`: namespaces (Same / All / Selector) and kinds.
    fn allowed(&self, gateway: &Gateway, l: &Listener, route: &HttpRoute) -> Result<(), String> {
        let route_ns = route.meta.namespace.as_str();
        let ns_ok = match &l.allowed_routes.namespaces {
            RouteNamespaces::Same => route_ns == gateway.meta.namespace,
            RouteNamespaces::All => true,
            RouteNamespaces::Selector(selector) => {
                let mut labels = self
                    .namespaces
                    .get(route_ns)
                    .map(|l| (*l).clone())
                    .unwrap_or_default();
                labels
                    .entry(NAMESPACE_NAME_LABEL.to_string())
                    .or_insert_with(|| route_ns.to_string());
                selector.matches(&labels)
            }
        };
        if !ns_ok {
            return Err(format!(
                "routes from namespace {route_ns} are not allowed (NotAllowedByListeners)"
            ));
        }
        let kinds = &l.allowed_routes.kinds;
        // Empty kinds means the protocol's default, HTTPRoute for HTTP. A
        // missing group is read as the Gateway API group, its YAML default.
        let kind_ok = kinds.is_empty()
            || kinds
                .iter()
                .any(|k| (k.group.is_empty() || k.group == GATEWAY_GROUP) && k.kind == "HTTPRoute");
        if !kind_ok {
            return Err("kind HTTPRoute is not allowed (NotAllowedByListeners)".into());
        }
        Ok(())
    }
}

/// The route's hostnames on a listener: route hostnames intersected with the
/// listener's, the listener's when the route has none. `None` when they do
/// not intersect at all (the route may not attach there).
pub(crate) fn effective_hostnames(
    route: &HttpRoute,
    listener: Option<&HostPattern>,
) -> Option<Vec<HostPattern>> {
    let route_hosts: Vec<HostPattern> = route
        .hostnames
        .iter()
        .map(|h| HostPattern::parse(h))
        .collect();
    match (route_hosts.is_empty(), listener) {
        (true, None) => Some(Vec::new()),
        (true, Some(l)) => Some(vec![l.clone()]),
        (false, None) => Some(route_hosts),
        (false, Some(l)) => {
            let mut out: Vec<HostPattern> =
                route_hosts.iter().filter_map(|r| r.intersect(l)).collect();
            out.sort();
            out.dedup();
            (!out.is_empty()).then_some(out)
        }
    }
}

fn parent_label(route: &HttpRoute, p: &ParentRef) -> String {
    let ns = p.namespace.as_deref().unwrap_or(&route.meta.namespace);
    let mut s = format!("Gateway {ns}/{}", p.name);
    if let Some(section) = &p.section_name {
        s.push_str(&format!(" sectionName {section}"));
    }
    if let Some(port) = p.port {
        s.push_str(&format!(" port {port}"));
    }
    s
}

impl CompileNote {
    fn gateway(name: &ObjectName, message: String) -> CompileNote {
        CompileNote {
            kind: Kind::Gateway,
            route: name.clone(),
            message,
        }
    }

    /// A note about a route.
    pub(crate) fn route(name: &ObjectName, message: String) -> CompileNote {
        CompileNote {
            kind: Kind::HTTPRoute,
            route: name.clone(),
            message,
        }
    }
}
