//! Which listeners of the served Gateways the router builds tables for,
//! and where each route goes — the attachment and conflict rules
//! themselves live in the model ([`Topology`], shared with the Kubernetes
//! status writer and the coordinators' status, so what is served and what
//! status says agree).
//!
//! It owns the mapping from attachments to the router's listener slots and
//! the compile notes that say why a route or listener is not served. A
//! conflicted listener (`Topology::listener_conflicts`) gets no slot: it
//! serves nothing, and the listener that won its port or hostname keeps
//! it alone, so no Gateway's routes answer through another's listener.

use super::CompileNote;
use super::hostname::HostPattern;
use std::collections::HashMap;
use switchyard_proto::model::gateway_api::{ListenerTransport, Topology};
use switchyard_proto::model::{HttpRoute, Kind, ListenerProtocol, ObjectName, ParentRef};

/// An HTTP or HTTPS listener of a served Gateway.
#[derive(Debug)]
pub(crate) struct ServedListener {
    /// The Gateway.
    pub(crate) gateway: ObjectName,
    /// The Gateway's listener port.
    pub(crate) port: u16,
    /// The listener hostname; `None` accepts every host.
    pub(crate) hostname: Option<HostPattern>,
    /// Plaintext, or TLS with these certificates.
    pub(crate) transport: ListenerTransport,
}

/// A listener of a served Gateway that cannot be served (its protocol,
/// TLS mode or certificates): its port must not fall back to plaintext.
#[derive(Debug)]
pub(crate) struct RefusedListener {
    /// The Gateway.
    pub(crate) gateway: ObjectName,
    /// The Gateway's listener port.
    pub(crate) port: u16,
    /// Why, for logs.
    pub(crate) why: String,
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
pub(crate) struct Gateways<'t, 'a> {
    /// Every servable listener of every served Gateway.
    pub(crate) listeners: Vec<ServedListener>,
    /// Listeners of served Gateways that cannot be served.
    pub(crate) refused: Vec<RefusedListener>,
    /// Listener indexes by (Gateway, listener name).
    by_name: HashMap<(ObjectName, &'a str), usize>,
    topology: &'t Topology<'a>,
}

impl<'t, 'a> Gateways<'t, 'a> {
    /// The servable listeners of the Gateways `topology` says are ours
    /// (HTTP, and HTTPS whose certificates resolve); notes the listeners
    /// it skips and keeps the unservable ones apart.
    pub(crate) fn new(topology: &'t Topology<'a>, notes: &mut Vec<CompileNote>) -> Self {
        let mut listeners = Vec::new();
        let mut refused = Vec::new();
        let mut by_name = HashMap::new();
        for g in topology.gateways().filter(|g| topology.is_ours(g)) {
            let name = g.meta.object_name();
            for l in &g.listeners {
                if let Some(conflict) = topology.listener_conflict(&name, &l.name) {
                    notes.push(CompileNote::gateway(
                        &name,
                        format!(
                            "listener {} is Conflicted ({}): {conflict}",
                            l.name, conflict.reason
                        ),
                    ));
                    // Not served either way; but a socket for this
                    // Gateway alone must not answer in plaintext where the
                    // listener speaks TLS (the winner of a socket shared by
                    // every Gateway decides that socket's transport).
                    if l.protocol != ListenerProtocol::Http {
                        refused.push(RefusedListener {
                            gateway: name.clone(),
                            port: l.port,
                            why: format!("listener {} is Conflicted: {conflict}", l.name),
                        });
                    }
                    continue;
                }
                let transport = match topology.listener_transport(g, l) {
                    Ok(transport) => transport,
                    Err(why) => {
                        notes.push(CompileNote::gateway(
                            &name,
                            format!(
                                "listener {} ({:?} on port {}) is not served ({}): {why}",
                                l.name,
                                l.protocol,
                                l.port,
                                why.reason()
                            ),
                        ));
                        refused.push(RefusedListener {
                            gateway: name.clone(),
                            port: l.port,
                            why: format!("listener {}: {why}", l.name),
                        });
                        continue;
                    }
                };
                by_name.insert((name.clone(), l.name.as_str()), listeners.len());
                listeners.push(ServedListener {
                    gateway: name.clone(),
                    port: l.port,
                    hostname: l.hostname.as_deref().map(HostPattern::parse),
                    transport,
                });
            }
        }
        Gateways {
            listeners,
            refused,
            by_name,
            topology,
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
        if route.parent_refs.is_empty() {
            notes.push(CompileNote::route(
                &route_name,
                "has no parentRefs; not served".into(),
            ));
        }
        let (attached, refused) = self.topology.attach_route(route);
        for (i, why) in refused {
            notes.push(CompileNote::route(
                &route_name,
                format!(
                    "not attached to {}: {why}",
                    parent_label(route, &route.parent_refs[i])
                ),
            ));
        }
        attached
            .into_iter()
            .filter_map(|a| {
                let key = (a.gateway.meta.object_name(), a.listener.name.as_str());
                self.by_name.get(&key).map(|&listener| Attachment {
                    listener,
                    hostnames: a.hostnames,
                })
            })
            .collect()
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
