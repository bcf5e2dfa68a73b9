//! What `switchyard status` shows: the leader, every route's generations and
//! cutover progress, and the proxies with the listener sockets they bound.

use super::gateway_api::{PortState, listener_port_state};
use super::meta::ObjectName;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Status of the whole cluster as one coordinator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ClusterStatus {
    /// Id of the coordinator that answered.
    pub answered_by: u64,
    /// Current leader's id, if known.
    pub leader: Option<u64>,
    /// Raft term.
    pub term: u64,
    /// Last log index applied to this coordinator's state machine.
    pub applied_index: u64,
    /// Voters: id to gRPC address.
    pub members: BTreeMap<u64, String>,
    /// Every route.
    pub routes: Vec<RouteStatus>,
    /// Every registered proxy.
    pub proxies: Vec<ProxyStatus>,
    /// Why this view may be stale, when it may: a leader that cannot reach
    /// a quorum, a follower that has not heard from a leader for longer
    /// than an election timeout.
    #[serde(default)]
    pub stale: Option<String>,
}

impl ClusterStatus {
    /// Whether the live proxies bound the port of `gateway`'s listener on
    /// `port` (see [`listener_port_state`]): what a listener's
    /// `Programmed` condition rests on.
    pub fn listener_port_state(&self, gateway: &ObjectName, port: u16) -> PortState {
        listener_port_state(&self.proxies, gateway, port)
    }
}

/// One route's generations and progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RouteStatus {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Generation proxies route by; `None` before the first commit.
    pub active_generation: Option<u64>,
    /// Generation waiting for readiness; `None` when none.
    pub pending_generation: Option<u64>,
    /// Policy of the pending transition, e.g. `all`.
    #[serde(default)]
    pub policy: Option<String>,
    /// Readiness evidence for the pending transition, e.g.
    /// `2 of 3 proxies ready (zone-a 1/1, zone-b 1/2)`. Known on the leader.
    #[serde(default)]
    pub evidence: Option<String>,
    /// How many live proxies serve the newest generation, e.g.
    /// `3 of 3 proxies at generation 7`.
    #[serde(default)]
    pub applied: Option<String>,
    /// True when every live proxy serves the newest generation and nothing
    /// is pending.
    #[serde(default)]
    pub ready: bool,
    /// Why the last transition ended without a commit, if it did.
    #[serde(default)]
    pub last_failure: Option<String>,
    /// True when the active generation was forced after its timeout.
    #[serde(default)]
    pub forced: bool,
    /// Why the route's newest spec is served nowhere, if it is not: each
    /// parentRef's Gateway API reason (the Gateway does not exist, is not
    /// ours, no listener allows it...). Such a route is never Ready.
    #[serde(default)]
    pub not_served: Option<String>,
}

/// One registered proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProxyStatus {
    /// Proxy id.
    pub id: String,
    /// Zone.
    pub zone: String,
    /// Admin address it reported.
    pub admin_address: String,
    /// Whether its lease is current (known on the leader only; followers
    /// report `true` for every registered proxy).
    pub live: bool,
    /// Its listener sockets as its latest readiness report gave them. `None`
    /// when unknown: a proxy older than this report, one not heard from
    /// since this leader took over, or a follower's view (the reports are
    /// the leader's soft state).
    #[serde(default)]
    pub listeners: Option<Vec<ListenerBinding>>,
}

/// One listener socket of a proxy (a `--listener` flag) and whether it is
/// bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ListenerBinding {
    /// The one Gateway this socket serves (`--listener NS/GATEWAY:PORT=…`);
    /// `None` when it serves every Gateway with a listener on `port`.
    #[serde(default)]
    pub gateway: Option<ObjectName>,
    /// The Gateway listener port it serves.
    pub port: u16,
    /// The local address: the bound one, or the one asked for.
    pub address: String,
    /// Whether the socket is bound and accepting.
    pub bound: bool,
    /// Why binding failed, while it does (the proxy keeps retrying).
    #[serde(default)]
    pub error: Option<String>,
}

impl ListenerBinding {
    /// Whether requests for `gateway`'s listener on `port` can arrive on
    /// this socket.
    pub fn serves(&self, gateway: &ObjectName, port: u16) -> bool {
        self.port == port && self.gateway.as_ref().is_none_or(|g| g == gateway)
    }
}
