//! The fleet's side of a run: membership rounds onto the network, snapshot
//! deliveries (fresh from some coordinator, or an old one replayed), guard
//! runs (every one checked by invariants 3 and 4), and proxy crashes,
//! restarts and pauses.

use super::invariants::Check;
use super::run::Sim;
use std::rc::Rc;
use switchyard_proto::model::ConfigSnapshot;

impl Sim {
    /// One membership round of proxy `p`, if it is running.
    pub(super) fn proxy_round(&mut self, p: usize) {
        if !self.proxies[p].active() {
            return;
        }
        let conditions = self.conditions();
        for message in self.proxies[p].round(&self.world, self.now_ms) {
            self.network
                .send(message, self.now_ms, conditions, &mut self.rng);
        }
    }

    /// Proxy `p` receives a snapshot — from a random running coordinator
    /// (maybe lagging), or, when `stale`, any version seen so far — and
    /// runs its guard on it.
    pub(super) fn deliver_snapshot(&mut self, p: usize, stale: bool) -> Check {
        if !self.proxies[p].active() {
            return Ok(());
        }
        let snapshot = if stale {
            let versions: Vec<u64> = self.snapshots.keys().copied().collect();
            self.rng
                .pick(&versions)
                .and_then(|v| self.snapshots.get(v).cloned())
        } else {
            let up: Vec<usize> = (0..self.cluster.coordinators.len())
                .filter(|c| self.cluster.coordinators[*c].up)
                .collect();
            match self.rng.pick(&up).copied() {
                Some(c) => self.snapshot_of(c),
                None => None,
            }
        };
        let Some(snapshot) = snapshot else {
            return Ok(());
        };
        let newer = self.proxies[p].receive(
            snapshot.clone(),
            &self.world,
            self.now_ms,
            &mut self.rng,
            &self.config,
        );
        if stale && !newer {
            self.note(format!(
                "{} gets old snapshot v{}",
                self.proxies[p].id, snapshot.version
            ));
        }
        self.run_guard(p, &snapshot)
    }

    /// Proxy `p` re-runs its guard on its current snapshot (warm-up moved,
    /// or the local wait limit may have run out).
    pub(super) fn guard_recheck(&mut self, p: usize) -> Check {
        if !self.proxies[p].active() {
            return Ok(());
        }
        match self.proxies[p].current.clone() {
            Some(snapshot) => self.run_guard(p, &snapshot),
            None => Ok(()),
        }
    }

    fn run_guard(&mut self, p: usize, snapshot: &Rc<ConfigSnapshot>) -> Check {
        let before = self.proxies[p].guard.generations();
        let report = self.proxies[p].run_guard(snapshot, &self.world, self.now_ms);
        self.checks.serving.on_guard(
            p,
            &before,
            &self.proxies[p],
            snapshot,
            &report,
            &self.world,
            self.now_ms,
            self.config.guard_wait_limit_ms,
        )?;
        let after = self.proxies[p].guard.generations();
        let id = self.proxies[p].id.clone();
        self.checks.monotonic.on_guard(p, &id, snapshot, after)?;
        if !report.applied.is_empty() {
            self.note(format!(
                "{id} routes by {:?} (forced {:?}) from snapshot v{}",
                report.applied, report.forced, snapshot.version
            ));
            self.proxies[p].keep_warm(&self.world, self.now_ms, &mut self.rng, &self.config);
        }
        Ok(())
    }

    /// Proxy `p` crashes, losing everything.
    pub(super) fn crash_proxy(&mut self, p: usize) {
        if !self.proxies[p].up {
            return;
        }
        // Record what was warm up to the crash, then lose it.
        self.truth
            .observe(p, &self.proxies[p], &self.world, self.now_ms);
        self.proxies[p].crash(&self.config);
        self.checks.proxy_restarted(p);
        self.stats.proxy_crashes += 1;
        self.note(format!("{} crashes", self.proxies[p].id));
    }

    /// Proxy `p` starts again from nothing.
    pub(super) fn restart_proxy(&mut self, p: usize) {
        if self.proxies[p].up {
            return;
        }
        self.proxies[p].restart();
        self.note(format!("{} restarts", self.proxies[p].id));
    }

    /// Proxy `p` stops (`SIGSTOP`) or continues.
    pub(super) fn pause_proxy(&mut self, p: usize, pause: bool) {
        let proxy = &mut self.proxies[p];
        if !proxy.up || proxy.paused == pause {
            return;
        }
        proxy.paused = pause;
        let line = format!("{} {}", proxy.id, if pause { "pauses" } else { "resumes" });
        self.note(line);
    }
}
