//! A reference model of proxy liveness, written from the design text
//! rather than from the engine: a new leader starts every registered
//! proxy's lease afresh; a registration the leader learns of starts one; a
//! heartbeat or report from a registered proxy renews it; a lease lasts a
//! TTL; an expired or removed proxy is forgotten.
//!
//! The invariant-1 checker counts readiness over this model's live set, so
//! a commit is judged against who should count, not who the engine counts.

use std::collections::BTreeMap;
use switchyard_coordinator::state::ReplicatedState;

/// Last-heard times as the current leader should have them.
#[derive(Debug, Default, Clone)]
pub struct LeaseModel {
    last_heard: BTreeMap<String, u64>,
}

impl LeaseModel {
    /// A new leader at `now_ms`: every registered proxy gets a full lease.
    pub fn new_leader(state: &ReplicatedState, now_ms: u64) -> Self {
        LeaseModel {
            last_heard: state
                .proxies
                .keys()
                .map(|id| (id.clone(), now_ms))
                .collect(),
        }
    }

    /// A heartbeat or report from `id` reached the leader.
    pub fn heard(&mut self, state: &ReplicatedState, id: &str, now_ms: u64) {
        if state.proxies.contains_key(id) {
            let seen = self.last_heard.entry(id.to_string()).or_insert(now_ms);
            *seen = (*seen).max(now_ms);
        }
    }

    /// The leader looked at the registry: newcomers get a lease, proxies
    /// that left lose theirs.
    pub fn sync(&mut self, state: &ReplicatedState, now_ms: u64) {
        for id in state.proxies.keys() {
            self.last_heard.entry(id.clone()).or_insert(now_ms);
        }
        self.last_heard
            .retain(|id, _| state.proxies.contains_key(id));
    }

    /// The leader forgot `id` (expired or deregistered).
    pub fn forget(&mut self, id: &str) {
        self.last_heard.remove(id);
    }

    /// Registered proxies whose lease is current, id to zone.
    pub fn live(
        &self,
        state: &ReplicatedState,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BTreeMap<String, String> {
        state
            .proxies
            .values()
            .filter(|p| {
                self.last_heard
                    .get(&p.id)
                    .is_some_and(|seen| now_ms.saturating_sub(*seen) < ttl_ms)
            })
            .map(|p| (p.id.clone(), p.zone.clone()))
            .collect()
    }
}
