//! Listener conflicts: which listeners of the Gateways switchyard serves
//! clash with another listener on the same port, and why, by the Gateway
//! API's `Conflicted` reasons.
//!
//! switchyard runs one proxy fleet for all its Gateways, so the Gateways
//! are *merged* (as Envoy Gateway's `mergeGateways` does): every Gateway's
//! listener on port P is served on the fleet's port P, and a request is
//! matched to one listener by its Host. That only works while the
//! listeners sharing a port are distinct, the Gateway API's "compatible
//! listeners" rule applied across Gateways as well as within one:
//!
//! - every listener on a port uses one protocol family (HTTP; or HTTPS
//!   and TLS, which share TLS's SNI), else `ProtocolConflict`;
//! - no two listeners on a port have the same hostname (no hostname
//!   counts as one value, the catch-all), else `HostnameConflict`.
//!
//! Who wins: listeners are taken in precedence order — the oldest Gateway
//! first (`creationTimestamp`; then namespace, then name; a Gateway without
//! a creation time, as YAML files give them, counts as the oldest), and
//! within a Gateway in spec order — and each keeps the port (and its
//! hostname) unless an earlier one already holds it. So adding a younger
//! Gateway never takes traffic from an older one, and the outcome does not
//! depend on the order objects arrived in.
//!
//! UDP listeners use other sockets than TCP ones, so they only clash with
//! UDP listeners; TCP and UDP listeners have no hostname to tell them
//! apart, so two of them on one port clash by hostname.
//!
//! Pure: the router serves no conflicted listener, and the status writers
//! report the same map as listener `Conflicted` conditions. Not here:
//! attachment (which consults this through [`super::Topology`]) and what a
//! listener's status says otherwise.

use super::hostname::HostPattern;
use crate::model::gateway::{Gateway, ListenerProtocol};
use crate::model::meta::ObjectName;
use std::collections::BTreeMap;
use std::fmt;

/// One listener of one Gateway: the Gateway and the listener's `name` (the
/// `sectionName` routes use).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListenerRef {
    /// The Gateway.
    pub gateway: ObjectName,
    /// The listener's name.
    pub listener: String,
}

impl ListenerRef {
    /// Builds a reference from its parts.
    pub fn new(gateway: ObjectName, listener: impl Into<String>) -> Self {
        ListenerRef {
            gateway,
            listener: listener.into(),
        }
    }
}

impl fmt::Display for ListenerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gateway {} listener {}", self.gateway, self.listener)
    }
}

/// Why a listener is `Conflicted`, as the Gateway API names the reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConflictReason {
    /// Another listener holds the port with an incompatible protocol.
    ProtocolConflict,
    /// Another listener holds the port with the same hostname.
    HostnameConflict,
}

impl ConflictReason {
    /// The condition reason: `ProtocolConflict` or `HostnameConflict`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictReason::ProtocolConflict => "ProtocolConflict",
            ConflictReason::HostnameConflict => "HostnameConflict",
        }
    }
}

impl fmt::Display for ConflictReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A conflicted listener: why, and which listener came first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConflict {
    /// The reason for `Conflicted: True`.
    pub reason: ConflictReason,
    /// The port both listeners use.
    pub port: u16,
    /// The listener that keeps the port (for a protocol conflict: the first
    /// one on the port; for a hostname conflict: the first one with the
    /// hostname).
    pub winner: ListenerRef,
    /// The winner's protocol, for messages (`HTTP`, `HTTPS`, ...).
    pub winner_protocol: String,
    /// The hostname both listeners use (`None`: neither has one).
    pub hostname: Option<String>,
}

impl fmt::Display for ListenerConflict {
    /// The condition message: names the winner, so a user can see which
    /// object to change.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            ConflictReason::ProtocolConflict => write!(
                f,
                "port {} is already served as {} by {}, which takes precedence (older Gateway, or earlier in the list); not served",
                self.port, self.winner_protocol, self.winner
            ),
            ConflictReason::HostnameConflict => write!(
                f,
                "port {} with {} is already served by {}, which takes precedence (older Gateway, or earlier in the list); not served",
                self.port,
                match &self.hostname {
                    Some(h) => format!("hostname {h}"),
                    None => "no hostname".to_string(),
                },
                self.winner
            ),
        }
    }
}

/// The sort key of a Gateway in conflict resolution: older first, a
/// missing creation time oldest of all, then namespace and name.
pub fn gateway_precedence(gateway: &Gateway) -> (Option<i64>, &str, &str) {
    (
        gateway.meta.creation_timestamp_ms,
        gateway.meta.namespace.as_str(),
        gateway.meta.name.as_str(),
    )
}

/// Which socket family a protocol uses: listeners on different ones never
/// share a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Transport {
    Tcp,
    Udp,
}

/// How a listener's protocol takes part in conflicts: its transport, the
/// family listeners on one port must share, and whether its hostname
/// tells it apart from others of the family.
struct Family {
    transport: Transport,
    name: String,
    by_hostname: bool,
}

fn family(protocol: &ListenerProtocol) -> Family {
    let f = |transport, name: &str, by_hostname| Family {
        transport,
        name: name.to_string(),
        by_hostname,
    };
    match protocol {
        ListenerProtocol::Http => f(Transport::Tcp, "HTTP", true),
        ListenerProtocol::Https => f(Transport::Tcp, "TLS", true),
        ListenerProtocol::Other(p) => match p.to_ascii_uppercase().as_str() {
            "TLS" => f(Transport::Tcp, "TLS", true),
            "TCP" => f(Transport::Tcp, "TCP", false),
            "UDP" => f(Transport::Udp, "UDP", false),
            _ => f(Transport::Tcp, p, true),
        },
    }
}

/// A protocol's name as the Gateway spec writes it.
pub(super) fn protocol_name(protocol: &ListenerProtocol) -> &str {
    match protocol {
        ListenerProtocol::Http => "HTTP",
        ListenerProtocol::Https => "HTTPS",
        ListenerProtocol::Other(p) => p,
    }
}

/// What the listeners kept so far hold on one port and transport.
struct PortHolder {
    family: String,
    protocol: String,
    first: ListenerRef,
    /// Per hostname: the listener that holds it, and its protocol.
    hostnames: BTreeMap<Option<HostPattern>, (ListenerRef, String)>,
}

/// Every conflicted listener of `gateways` (which should be the Gateways
/// one fleet serves: ours) and why; listeners not in the map are not
/// conflicted. Deterministic whatever the order of `gateways`.
///
/// Cost: O(L log L) in the number of listeners.
pub fn listener_conflicts<'a>(
    gateways: impl IntoIterator<Item = &'a Gateway>,
) -> BTreeMap<ListenerRef, ListenerConflict> {
    let mut ordered: Vec<&Gateway> = gateways.into_iter().collect();
    ordered.sort_by_key(|g| gateway_precedence(g));
    let mut holders: BTreeMap<(u16, Transport), PortHolder> = BTreeMap::new();
    let mut conflicts = BTreeMap::new();
    for gateway in ordered {
        let name = gateway.meta.object_name();
        for l in &gateway.listeners {
            let this = ListenerRef::new(name.clone(), l.name.clone());
            let family = family(&l.protocol);
            let hostname = l
                .hostname
                .as_deref()
                .filter(|_| family.by_hostname)
                .map(HostPattern::parse);
            let holder = holders
                .entry((l.port, family.transport))
                .or_insert_with(|| PortHolder {
                    family: family.name.clone(),
                    protocol: protocol_name(&l.protocol).to_string(),
                    first: this.clone(),
                    hostnames: BTreeMap::new(),
                });
            let conflict = |reason, winner: &ListenerRef, winner_protocol: &str| ListenerConflict {
                reason,
                port: l.port,
                winner: winner.clone(),
                winner_protocol: winner_protocol.to_string(),
                hostname: hostname.as_ref().map(ToString::to_string),
            };
            if holder.family != family.name {
                let c = conflict(
                    ConflictReason::ProtocolConflict,
                    &holder.first,
                    &holder.protocol,
                );
                conflicts.insert(this, c);
            } else if let Some((winner, protocol)) = holder.hostnames.get(&hostname) {
                let c = conflict(ConflictReason::HostnameConflict, winner, protocol);
                conflicts.insert(this, c);
            } else {
                let protocol = protocol_name(&l.protocol).to_string();
                holder.hostnames.insert(hostname.clone(), (this, protocol));
            }
        }
    }
    conflicts
}

#[cfg(test)]
mod tests;
