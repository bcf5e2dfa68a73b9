//! Ground truth: which proxy really had which backend warm, at which
//! endpoint generation, and until when — recorded by the simulation from
//! its own model of the data plane, never from what any core believes.

use super::proxy::SimProxy;
use super::world::World;
use std::collections::BTreeMap;
use switchyard_proto::model::BackendKey;

/// For each (proxy, incarnation, backend): endpoint generation to the last
/// time that run of the proxy really had it warm at that generation. A
/// restarted proxy has warmed nothing, whatever its previous run did.
#[derive(Debug, Default)]
pub struct Truth {
    last_warm: BTreeMap<(usize, u32, BackendKey), BTreeMap<u64, u64>>,
}

impl Truth {
    /// Records what proxy `n` has warm at `now_ms`. Called whenever time
    /// moves and before anything that can take warmth away.
    pub fn observe(&mut self, n: usize, proxy: &SimProxy, world: &World, now_ms: u64) {
        if !proxy.up {
            return;
        }
        for (backend, evidence) in proxy.warm_backends(world, now_ms) {
            if evidence.healthy > 0 {
                self.last_warm
                    .entry((n, proxy.incarnation, backend.clone()))
                    .or_default()
                    .insert(evidence.endpoints_generation, now_ms);
            }
        }
    }

    /// Whether run `incarnation` of proxy `n` really had `backend` warm at
    /// `generation` or newer at some time since `since_ms`.
    pub fn warm_since(
        &self,
        n: usize,
        incarnation: u32,
        backend: &BackendKey,
        generation: u64,
        since_ms: u64,
    ) -> bool {
        self.last_warm
            .get(&(n, incarnation, backend.clone()))
            .is_some_and(|by_gen| {
                by_gen
                    .range(generation..)
                    .any(|(_, last)| *last >= since_ms)
            })
    }

    /// The last time run `incarnation` of proxy `n` had `backend` warm at
    /// `generation` or newer.
    pub fn last_warm(
        &self,
        n: usize,
        incarnation: u32,
        backend: &BackendKey,
        generation: u64,
    ) -> Option<u64> {
        self.last_warm
            .get(&(n, incarnation, backend.clone()))
            .and_then(|by_gen| by_gen.range(generation..).map(|(_, last)| *last).max())
    }
}
