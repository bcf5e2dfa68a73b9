//! A reference model of proxy liveness, written from the design text
//! rather than from the engine: a new leader starts every registered
//! proxy's lease afresh; a registration the leader learns of (a new one,
//! or a proxy registering again) starts one; a heartbeat or report from a
//! proxy's *current* registration renews it; a lease lasts a TTL; an
//! expired or removed proxy is forgotten. All times are the leader's own
//! clock.
//!
//! The invariant-1 checker counts readiness over this model's live set, so
//! a commit is judged against who should count, not who the engine counts.

use std::collections::BTreeMap;
use switchyard_coordinator::state::ReplicatedState;

/// Last-heard times as the current leader should have them.
#[derive(Debug, Default, Clone)]
pub struct LeaseModel {
    /// Proxy id to (registration, last heard).
    last_heard: BTreeMap<String, (u64, u64)>,
}

impl LeaseModel {
    /// A new leader at `now_ms`: every registered proxy gets a full lease.
    pub fn new_leader(state: &ReplicatedState, now_ms: u64) -> Self {
        LeaseModel {
            last_heard: state
                .proxies
                .values()
                .map(|p| (p.id.clone(), (p.registered_index, now_ms)))
                .collect(),
        }
    }

    /// A heartbeat or report from `id`'s `registration` reached the leader.
    pub fn heard(&mut self, state: &ReplicatedState, id: &str, registration: u64, now_ms: u64) {
        if state
            .proxies
            .get(id)
            .is_some_and(|p| p.registered_index == registration)
        {
            let seen = self
                .last_heard
                .entry(id.to_string())
                .or_insert((registration, now_ms));
            if seen.0 != registration {
                *seen = (registration, now_ms);
            }
            seen.1 = seen.1.max(now_ms);
        }
    }

    /// The leader looked at the registry: newcomers get a lease, proxies
    /// that left lose theirs.
    pub fn sync(&mut self, state: &ReplicatedState, now_ms: u64) {
        for p in state.proxies.values() {
            let seen = self
                .last_heard
                .entry(p.id.clone())
                .or_insert((p.registered_index, now_ms));
            if seen.0 != p.registered_index {
                *seen = (p.registered_index, now_ms);
            }
        }
        self.last_heard
            .retain(|id, _| state.proxies.contains_key(id));
    }

    /// When the leader last heard from `id` (its current registration).
    pub fn last_heard(&self, id: &str) -> Option<u64> {
        self.last_heard.get(id).map(|(_, seen)| *seen)
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
                self.last_heard.get(&p.id).is_some_and(|(r, seen)| {
                    *r == p.registered_index && now_ms.saturating_sub(*seen) < ttl_ms
                })
            })
            .map(|p| (p.id.clone(), p.zone.clone()))
            .collect()
    }
}
