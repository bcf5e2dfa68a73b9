//! The control plane's side of a run: bootstrapping the log, appending and
//! applying entries (every apply checked by invariant 4), followers
//! catching up, crashes, restarts and elections, messages reaching the
//! leader's engine, and the leader loop (sync, decide — checked by
//! invariants 1 and 6 — propose).

use super::cluster::Leader;
use super::invariants::Check;
use super::invariants::no_commit_without_evidence::DecideContext;
use super::lease_model::LeaseModel;
use super::network::Message;
use super::run::Sim;
use super::world::World;
use std::rc::Rc;
use switchyard_coordinator::cutover::{CutoverEngine, Decision, EngineSettings};
use switchyard_coordinator::state::{Command, CommandResponse, ReplicatedState};
use switchyard_proto::model::{ConfigSnapshot, CutoverSettings, Resource};

impl Sim {
    /// First leader, then one entry creating every backend and route.
    pub(super) fn bootstrap(&mut self) -> Check {
        self.elect()?;
        let mut resources: Vec<Resource> = Vec::new();
        for _ in 0..self.config.initial_backends {
            let (_, r) = self.world.add_backend(&mut self.rng);
            resources.extend(r);
        }
        for r in 0..self.config.routes {
            let backend = self.rng.index(self.config.initial_backends);
            resources.push(World::route(
                r,
                &[(backend, 1)],
                &mut self.rng,
                self.config.cutover_timeout_ms,
            ));
        }
        self.user_apply(resources).map(|_| ())
    }

    /// A user's apply through the leader; `None` without a leader (the
    /// client would retry elsewhere; the simulation just moves on).
    pub(super) fn user_apply(
        &mut self,
        resources: Vec<Resource>,
    ) -> Result<Option<CommandResponse>, super::invariants::Violation> {
        let command = Command::Apply {
            resources,
            now_ms: self.now_ms,
            defaults: CutoverSettings::default(),
            limits: None,
        };
        self.append(command)
    }

    /// Appends a committed entry; the leader applies it at once.
    pub(super) fn append(
        &mut self,
        command: Command,
    ) -> Result<Option<CommandResponse>, super::invariants::Violation> {
        let Some(leader) = self.cluster.leader.as_ref().map(|l| l.id) else {
            return Ok(None);
        };
        self.cluster.log.push(command);
        let response = self.apply_next(leader)?;
        if let Some(CommandResponse(result)) = &response {
            let index = self.cluster.log.len();
            match result {
                Ok(outcome) => {
                    let changes = outcome.changes.join("; ");
                    self.note(format!("log {index}: {changes}"));
                }
                Err(e) => self.note(format!("log {index}: rejected: {e}")),
            }
        }
        Ok(response)
    }

    /// Coordinator `c` applies its next entry, if any.
    pub(super) fn apply_next(
        &mut self,
        c: usize,
    ) -> Result<Option<CommandResponse>, super::invariants::Violation> {
        let Some((index, command)) = self.cluster.next_entry(c) else {
            return Ok(None);
        };
        let command = command.clone();
        let state = &mut self.cluster.coordinators[c].state;
        let response = state.apply(index, &command);
        self.checks.monotonic.on_apply(c, index, state)?;
        Ok(Some(response))
    }

    /// Up coordinator `c` applies up to `entries` more entries.
    pub(super) fn catch_up(&mut self, c: usize, entries: u64) -> Check {
        if !self.cluster.coordinators[c].up {
            return Ok(());
        }
        for _ in 0..entries {
            if self.apply_next(c)?.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// Elects a leader if there is none and a majority is up: it holds the
    /// whole log, and starts a fresh engine.
    pub(super) fn elect(&mut self) -> Check {
        if self.cluster.leader.is_some() || !self.cluster.majority_up() {
            return Ok(());
        }
        let up: Vec<usize> = (0..self.cluster.coordinators.len())
            .filter(|c| self.cluster.coordinators[*c].up)
            .collect();
        let Some(&id) = self.rng.pick(&up) else {
            return Ok(());
        };
        while self.apply_next(id)?.is_some() {}
        let state = &self.cluster.coordinators[id].state;
        let settings = EngineSettings {
            lease_ttl_ms: self.config.lease_ttl_ms,
        };
        let mut engine = CutoverEngine::new(settings, state, self.now_ms);
        if let Some(hook) = self.config.engine_hook {
            hook(&mut engine);
        }
        self.cluster.leader = Some(Leader {
            id,
            since_ms: self.now_ms,
            engine,
            deferred: Vec::new(),
            leases: LeaseModel::new_leader(state, self.now_ms),
        });
        self.cluster.elections += 1;
        self.note(format!("coordinator {id} becomes leader"));
        Ok(())
    }

    /// Coordinator `c` crashes: a leader loses its soft state; without a
    /// majority nobody leads.
    pub(super) fn crash_coordinator(&mut self, c: usize) {
        if !self.cluster.coordinators[c].up {
            return;
        }
        self.cluster.coordinators[c].up = false;
        self.stats.coordinator_crashes += 1;
        let was_leader = self.cluster.leader.as_ref().is_some_and(|l| l.id == c);
        if was_leader || !self.cluster.majority_up() {
            self.cluster.leader = None;
        }
        self.note(format!(
            "coordinator {c} crashes (was leader: {was_leader})"
        ));
    }

    /// Coordinator `c` restarts and replays the log from the start as it
    /// catches up.
    pub(super) fn restart_coordinator(&mut self, c: usize) {
        let coordinator = &mut self.cluster.coordinators[c];
        if coordinator.up {
            return;
        }
        coordinator.up = true;
        coordinator.state = ReplicatedState::default();
        self.note(format!("coordinator {c} restarts, replays the log"));
    }

    /// Messages due now reach the leader's engine (or nobody), each at the
    /// time it arrives — never later, so a clock jump does not stretch a
    /// message's delay beyond the network's bound.
    pub(super) fn deliver(&mut self) -> Check {
        for (at_ms, message) in self.network.due(self.now_ms) {
            let Some(leader) = self.cluster.leader.as_ref().map(|l| l.id) else {
                continue;
            };
            let p = message.proxy();
            let (id, zone) = (self.proxies[p].id.clone(), self.proxies[p].zone.clone());
            let known = match message {
                Message::Register { .. } => {
                    self.append(Command::RegisterProxy {
                        id,
                        zone,
                        admin_address: format!("10.9.0.{p}:9901"),
                    })?;
                    self.proxies[p].needs_register = false;
                    continue;
                }
                Message::Heartbeat { applied, .. } => {
                    let now = at_ms;
                    let cluster = &mut self.cluster;
                    let state = &cluster.coordinators[leader].state;
                    let Some(l) = cluster.leader.as_mut() else {
                        continue;
                    };
                    l.leases.heard(state, &id, now);
                    l.engine.heartbeat(state, &id, applied, now)
                }
                Message::Report { backends, .. } => {
                    let now = at_ms;
                    let cluster = &mut self.cluster;
                    let state = &cluster.coordinators[leader].state;
                    let Some(l) = cluster.leader.as_mut() else {
                        continue;
                    };
                    l.leases.heard(state, &id, now);
                    l.engine.report(state, &id, backends, now)
                }
            };
            if !known && self.proxies[p].up {
                self.proxies[p].needs_register = true;
            }
        }
        Ok(())
    }

    /// One pass of the leader loop: sync, decide, check, propose (now, or
    /// deferred to a later step).
    pub(super) fn leader_decide(&mut self) -> Check {
        let Some(id) = self.cluster.leader.as_ref().map(|l| l.id) else {
            return Ok(());
        };
        if self
            .cluster
            .leader
            .as_ref()
            .is_some_and(|l| !l.deferred.is_empty())
        {
            // The real loop proposes everything before deciding again.
            return Ok(());
        }
        let snapshot = self.snapshot_of(id);
        let now = self.now_ms;
        let cluster = &mut self.cluster;
        let state = &cluster.coordinators[id].state;
        let Some(leader) = cluster.leader.as_mut() else {
            return Ok(());
        };
        leader.engine.sync(state, now);
        leader.leases.sync(state, now);
        let decisions = leader.engine.decide(state, now);
        let empty = ConfigSnapshot::default();
        let cx = DecideContext {
            state,
            snapshot: snapshot.as_deref().unwrap_or(&empty),
            leases: &leader.leases,
            truth: &self.truth,
            proxies: &self.proxies,
            world: &self.world,
            now_ms: now,
            ttl_ms: self.config.lease_ttl_ms,
            window_ms: self.config.evidence_window_ms(),
        };
        self.checks.evidence.on_decide(&cx, &decisions)?;
        self.checks
            .isolation
            .on_decide(&leader.engine, state, now, leader.since_ms, &decisions)?;
        if decisions.is_empty() {
            return Ok(());
        }
        let defer = !self.healing && self.rng.chance(200);
        let line = format!(
            "leader decides {decisions:?}{}",
            if defer { " (proposed later)" } else { "" }
        );
        leader.deferred = decisions;
        self.note(line);
        if defer {
            Ok(())
        } else {
            self.propose_deferred()
        }
    }

    /// The leader proposes the decisions it holds.
    pub(super) fn propose_deferred(&mut self) -> Check {
        let Some(leader) = self.cluster.leader.as_mut() else {
            return Ok(());
        };
        let decisions = std::mem::take(&mut leader.deferred);
        for decision in decisions {
            let command = match &decision {
                Decision::Commit {
                    route,
                    generation,
                    forced,
                    ..
                } => Command::CommitTransition {
                    route: route.clone(),
                    generation: *generation,
                    forced: *forced,
                },
                Decision::Abandon {
                    route,
                    generation,
                    reason,
                } => {
                    self.stats.abandons += 1;
                    Command::AbandonTransition {
                        route: route.clone(),
                        generation: *generation,
                        reason: reason.clone(),
                    }
                }
                Decision::ExpireProxy { id } => {
                    self.stats.expiries += 1;
                    Command::RemoveProxy {
                        id: id.clone(),
                        reason: "lease expired".into(),
                    }
                }
            };
            self.append(command)?;
            if let Decision::ExpireProxy { id } = &decision
                && let Some(leader) = self.cluster.leader.as_mut()
            {
                leader.engine.forget(id);
                leader.leases.forget(id);
            }
        }
        Ok(())
    }

    /// Coordinator `c`'s configuration snapshot; `None` before it has
    /// applied anything (a proxy never takes version 0).
    pub(super) fn snapshot_of(&mut self, c: usize) -> Option<Rc<ConfigSnapshot>> {
        let state = &self.cluster.coordinators[c].state;
        if state.last_index == 0 {
            return None;
        }
        Some(
            self.snapshots
                .entry(state.last_index)
                .or_insert_with(|| Rc::new(state.config_snapshot()))
                .clone(),
        )
    }
}
