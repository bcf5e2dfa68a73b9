//! The heal phase: faults stop — every coordinator and proxy runs, the
//! network delivers everything promptly, flappy backends settle, users
//! change nothing — and after enough time the system must have converged:
//! no transition left pending, every coordinator in the same state as the
//! leader, and every proxy serving the active generation of every route.
//! The invariant checkers keep running throughout.

use super::invariants::{Check, Violation};
use super::run::Sim;

const NAME: &str = "heal: convergence";

impl Sim {
    pub(super) fn heal(&mut self) -> Check {
        self.healing = true;
        self.note("heal phase starts: no more faults".into());
        for c in 0..self.cluster.coordinators.len() {
            self.restart_coordinator(c);
        }
        for p in 0..self.proxies.len() {
            self.restart_proxy(p);
            self.pause_proxy(p, false);
        }
        for backend in &mut self.world.backends {
            if backend.flappy {
                backend.healthy = true;
            }
        }
        let rounds = self.config.heal_ms() / self.config.heal_round_ms;
        for _ in 0..rounds {
            self.heal_round()?;
        }
        self.check_converged()
    }

    fn heal_round(&mut self) -> Check {
        self.step += 1;
        self.stats.steps += 1;
        self.now_ms += self.config.heal_round_ms;
        self.observe_all();
        self.deliver()?;
        self.elect(None)?;
        if self.cluster.leader.is_some() {
            self.flush_waiting_applies()?;
        }
        while !self.held_back.is_empty() && self.cluster.leader.is_some() {
            self.service_arrives()?;
        }
        for c in 0..self.cluster.coordinators.len() {
            self.catch_up(c, u64::MAX)?;
        }
        self.propose_deferred()?;
        self.leader_decide()?;
        let leader = self.cluster.leader.as_ref().map(|l| l.id);
        for p in 0..self.proxies.len() {
            self.proxy_round(p);
            if let Some(snapshot) = leader.and_then(|c| self.snapshot_of(c)) {
                self.proxies[p].receive(
                    snapshot,
                    &self.world,
                    self.now_ms,
                    &mut self.rng,
                    &self.config,
                );
            }
            self.guard_recheck(p)?;
        }
        self.observe_all();
        Ok(())
    }

    fn check_converged(&mut self) -> Check {
        let fail = |detail: String| Violation {
            invariant: NAME,
            detail,
        };
        for c in 0..self.cluster.coordinators.len() {
            self.catch_up(c, u64::MAX)?;
        }
        let state = self
            .cluster
            .leader_state()
            .ok_or_else(|| fail("no leader after healing".into()))?;
        for (name, record) in &state.routes {
            if let Some(pending) = &record.pending {
                return Err(fail(format!(
                    "{name}: generation {} still pending at t={} (timeout {}ms)",
                    pending.target.generation, self.now_ms, pending.settings.timeout_ms
                )));
            }
        }
        for (c, coordinator) in self.cluster.coordinators.iter().enumerate() {
            if &coordinator.state != state {
                return Err(fail(format!(
                    "coordinator {c} differs from the leader (applied {} of {})",
                    coordinator.state.last_index, state.last_index
                )));
            }
        }
        for proxy in &self.proxies {
            let served = proxy.guard.generations();
            if let Some(gone) = served.keys().find(|r| !state.routes.contains_key(*r)) {
                return Err(fail(format!(
                    "{} still serves {gone}, which was deleted",
                    proxy.id
                )));
            }
            for (name, record) in &state.routes {
                let Some(active) = &record.active else {
                    continue;
                };
                if served.get(name) != Some(&active.generation) {
                    return Err(fail(format!(
                        "{} serves {name} at {:?}, active is {}",
                        proxy.id,
                        served.get(name),
                        active.generation
                    )));
                }
            }
        }
        Ok(())
    }
}
