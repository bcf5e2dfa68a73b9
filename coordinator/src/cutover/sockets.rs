//! The listener sockets each proxy last reported (with its readiness
//! reports): which `--listener` sockets it bound, and why the others are
//! not. Leader soft state like the evidence: a new leader starts without
//! it and learns it from the next report of each proxy.
//!
//! Owns: keeping the latest report per proxy, replacing it whole, and
//! dropping it with the proxy's registration. Does not own: liveness (the
//! leases), nor what a report means for a Gateway listener
//! (`gateway_api::listener_port_state`, which the status readers call).

use super::CutoverEngine;
use imbl::OrdMap;
use switchyard_proto::model::ListenerBinding;

impl CutoverEngine {
    /// The listener sockets `proxy` reported with its readiness report
    /// (see [`FleetSockets::record`]); kept only for its current
    /// registration (call it after [`CutoverEngine::report`] said yes).
    /// Whether they differ from what was held.
    pub fn record_sockets(&mut self, proxy: &str, sockets: Option<Vec<ListenerBinding>>) -> bool {
        self.registrations.contains_key(proxy) && self.sockets.record(proxy, sockets)
    }

    /// `proxy`'s listener sockets as last reported; `None` when unknown.
    pub fn sockets_of(&self, proxy: &str) -> Option<&[ListenerBinding]> {
        self.sockets.of(proxy)
    }
}

/// Per proxy id: its sockets as last reported. A persistent map: copies
/// of the engine share it (see `CutoverEngine`).
#[derive(Debug, Clone, Default)]
pub struct FleetSockets {
    by_proxy: OrdMap<String, Vec<ListenerBinding>>,
}

impl FleetSockets {
    /// Records `proxy`'s report. `None` (a proxy older than the report, or
    /// one not serving yet) makes its sockets unknown again rather than
    /// keeping an older answer. Whether that changed what is held.
    pub fn record(&mut self, proxy: &str, sockets: Option<Vec<ListenerBinding>>) -> bool {
        if self.by_proxy.get(proxy) == sockets.as_ref() {
            return false;
        }
        match sockets {
            Some(sockets) => self.by_proxy.insert(proxy.to_string(), sockets),
            None => self.by_proxy.remove(proxy),
        };
        true
    }

    /// `proxy`'s sockets as last reported, `None` when unknown.
    pub fn of(&self, proxy: &str) -> Option<&[ListenerBinding]> {
        self.by_proxy.get(proxy).map(Vec::as_slice)
    }

    /// Forgets `proxy` (it left, expired or registered again).
    pub fn forget(&mut self, proxy: &str) {
        self.by_proxy.remove(proxy);
    }
}
