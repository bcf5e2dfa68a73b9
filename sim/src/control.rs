//! The control plane's side of a run: bootstrapping the log, appending and
//! applying entries (every apply checked by invariants 4, 8 and 9),
//! followers catching up, crashes, restarts, elections and deposed leaders,
//! messages reaching the leader's engine, and the leader loop (sync,
//! decide — checked by invariants 1, 6 and 10 — propose through the real
//! [`Decision::command`]), and users' applies — alone, or several in one
//! entry as the leader's group commit makes them — carrying the commits
//! the leader's engine finds ready with them (checked by invariants 1 and
//! 9).

use super::cluster::{Leader, LogEntry, Orphan};
use super::invariants::Check;
use super::invariants::no_commit_without_evidence::DecideContext;
use super::lease_model::LeaseModel;
use super::network::Message;
use super::run::Sim;
use super::world::World;
use std::collections::BTreeSet;
use std::rc::Rc;
use switchyard_coordinator::cutover::{CutoverEngine, Decision, EngineSettings};
use switchyard_coordinator::state::{
    Command, CommandError, CommandResponse, LogPosition, Outcome, ReplicatedState,
};
use switchyard_proto::model::{ConfigSnapshot, CutoverSettings, Resource, ResourceKey};

/// What a deposed leader's undelivered decision becomes.
const ORPHAN_FATES: &[u32] = &[
    3, // lost with the leader's connection
    2, // had reached a majority: committed in its own term
    3, // left in flight, re-proposed later in another term
];

impl Sim {
    /// First leader, then one entry creating every backend and route.
    pub(super) fn bootstrap(&mut self) -> Check {
        self.elect(None)?;
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
    ///
    /// As the leader's group commit does with applies that arrive while
    /// a group is in flight, an apply may wait and go in one entry
    /// (`Command::Applies`) with the next user's: outside the heal phase,
    /// with a chance of one in five. The answer is then the last entry's.
    pub(super) fn user_apply(
        &mut self,
        resources: Vec<Resource>,
    ) -> Result<Option<CommandResponse>, super::invariants::Violation> {
        if !self.healing && self.cluster.leader.is_some() && self.rng.chance(200) {
            self.waiting_applies.push(resources);
            return Ok(None);
        }
        let mut group = std::mem::take(&mut self.waiting_applies);
        group.push(resources);
        self.propose_applies(group)
    }

    /// Proposes applies that waited for a group, if any.
    pub(super) fn flush_waiting_applies(&mut self) -> Check {
        let group = std::mem::take(&mut self.waiting_applies);
        if group.is_empty() {
            return Ok(());
        }
        self.propose_applies(group).map(|_| ())
    }

    /// Proposes `group` (each element one user's apply) in order, in as
    /// few entries as the rule allows: an apply naming an object an
    /// earlier apply of the entry names starts the next entry. The
    /// answer to the last entry.
    fn propose_applies(
        &mut self,
        group: Vec<Vec<Resource>>,
    ) -> Result<Option<CommandResponse>, super::invariants::Violation> {
        let mut entries: Vec<Vec<Vec<Resource>>> = Vec::new();
        let mut named: BTreeSet<ResourceKey> = BTreeSet::new();
        for resources in group {
            let keys: Vec<ResourceKey> = resources.iter().map(Resource::key).collect();
            if entries.is_empty() || keys.iter().any(|k| named.contains(k)) {
                entries.push(Vec::new());
                named.clear();
            }
            named.extend(keys);
            entries.last_mut().expect("an entry").push(resources);
        }
        let mut last = None;
        for entry in entries {
            let applies = entry
                .iter()
                .map(|r| user_apply_command(r.clone()))
                .collect();
            let (command, decided_in) = self.with_commits(applies)?;
            last = self.append(Some(command), decided_in)?;
            match &last {
                Some(CommandResponse(Ok(outcome))) if entry.len() == 1 => {
                    self.world.note_stored(outcome.index, &entry[0]);
                }
                Some(CommandResponse(Ok(outcome))) => {
                    self.stats.grouped_applies += entry.len() as u64;
                    for (answer, resources) in outcome.decisions.iter().zip(&entry) {
                        if answer.is_ok() {
                            self.world.note_stored(outcome.index, resources);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(last)
    }

    /// `applies` (for one entry, in order) as the real leader proposes
    /// them: each with the commits its engine finds the fleet already
    /// ready for ([`CutoverEngine::commits_with_applies`], on a copy of
    /// the engine as the last look left it, as the coordinator's is),
    /// each checked by invariant 1 against the state the applies up to it
    /// leave, and the deciding term for invariant 9. One apply goes as
    /// itself, more as a `Command::Applies`.
    fn with_commits(
        &mut self,
        applies: Vec<Command>,
    ) -> Result<(Command, Option<u64>), super::invariants::Violation> {
        let one_entry = |mut commands: Vec<Command>| {
            if commands.len() == 1 {
                commands.pop().expect("one command")
            } else {
                Command::Applies { applies: commands }
            }
        };
        let Some(id) = self.cluster.leader.as_ref().map(|l| l.id) else {
            return Ok((one_entry(applies), None));
        };
        let now = self.cluster.clock(id, self.now_ms);
        let sim_now = self.now_ms;
        let cluster = &mut self.cluster;
        let state = &cluster.coordinators[id].state;
        let Some(leader) = cluster.leader.as_mut() else {
            return Ok((one_entry(applies), None));
        };
        let commits = leader
            .engine
            .clone()
            .commits_with_applies(state, &applies, now);
        if commits.iter().all(Vec::is_empty) {
            return Ok((one_entry(applies), None));
        }
        // The reference leases as the copy's registry sees them, kept
        // apart: the leader's own model moves only where its loop looks
        // (invariant 10 counts from there).
        let mut leases = leader.leases.clone();
        leases.sync(state, now);
        let term = leader.term;
        let mut after = state.clone();
        let next = LogPosition::new(state.last_index + 1, state.last_term);
        for (apply, carried) in applies.iter().zip(&commits) {
            let _ = after.apply(next, apply);
            if carried.is_empty() {
                continue;
            }
            let cx = DecideContext {
                state: &after,
                leases: &leases,
                truth: &self.truth,
                proxies: &self.proxies,
                registrations: &self.registrations,
                world: &self.world,
                leader_now_ms: now,
                sim_now_ms: sim_now,
                ttl_ms: self.config.lease_ttl_ms,
                window_ms: self.config.evidence_window_ms(),
            };
            self.checks.evidence.on_decide(&cx, carried)?;
            self.stats.commits_with_apply += carried.len() as u64;
            self.note(format!("leader commits with the apply {carried:?}"));
        }
        let commands = applies
            .into_iter()
            .zip(&commits)
            .map(|(apply, carried)| Decision::with_apply(apply, carried))
            .collect();
        Ok((one_entry(commands), Some(term)))
    }

    /// Appends a committed entry in the leader's term; the leader applies
    /// it at once. `decided_in` names the deciding term of a decision.
    pub(super) fn append(
        &mut self,
        command: Option<Command>,
        decided_in: Option<u64>,
    ) -> Result<Option<CommandResponse>, super::invariants::Violation> {
        let Some((leader, term)) = self.cluster.leader.as_ref().map(|l| (l.id, l.term)) else {
            return Ok(None);
        };
        self.cluster.log.push(LogEntry {
            term,
            command,
            decided_in,
        });
        self.apply_all(leader)
    }

    /// The leader applies what it has not yet; returns the answer to the
    /// last entry.
    fn apply_all(
        &mut self,
        c: usize,
    ) -> Result<Option<CommandResponse>, super::invariants::Violation> {
        let mut last = None;
        while let Some(response) = self.apply_next(c)? {
            last = Some(response);
        }
        if let Some(CommandResponse(result)) = &last {
            let index = self.cluster.log.len();
            match result {
                Ok(outcome) => {
                    let changes = outcome.changes.join("; ");
                    self.note(format!("log {index}: {changes}"));
                }
                Err(e) => self.note(format!("log {index}: rejected: {e}")),
            }
        }
        Ok(last)
    }

    /// Coordinator `c` applies its next entry, if any.
    pub(super) fn apply_next(
        &mut self,
        c: usize,
    ) -> Result<Option<CommandResponse>, super::invariants::Violation> {
        let Some((index, entry)) = self.cluster.next_entry(c) else {
            return Ok(None);
        };
        let entry = entry.clone();
        let at = LogPosition::new(index, entry.term);
        let state = &mut self.cluster.coordinators[c].state;
        let response = match &entry.command {
            Some(command) => state.apply(at, command),
            None => {
                state.note_entry(at);
                CommandResponse(Ok(Default::default()))
            }
        };
        self.checks.monotonic.on_apply(c, index, state)?;
        self.checks.one_spec.on_apply(c, index, state)?;
        // An apply's carried commits take effect only as their own
        // answers say; the apply itself always does.
        let took_effect = match &entry.command {
            Some(command) => decisions_took_effect(command, &response.0),
            None => response.0.is_ok(),
        };
        self.checks
            .decision_term
            .on_apply(c, index, &entry, took_effect)?;
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

    /// Elects a leader if there is none and a majority is up (never
    /// `excluded`, a leader just deposed): it holds the whole log, appends
    /// its term's blank entry, and starts a fresh engine on its own clock.
    pub(super) fn elect(&mut self, excluded: Option<usize>) -> Check {
        if self.cluster.leader.is_some() || !self.cluster.majority_up() {
            return Ok(());
        }
        let up: Vec<usize> = (0..self.cluster.coordinators.len())
            .filter(|c| self.cluster.coordinators[*c].up && Some(*c) != excluded)
            .collect();
        let Some(&id) = self.rng.pick(&up) else {
            return Ok(());
        };
        while self.apply_next(id)?.is_some() {}
        self.cluster.term += 1;
        let term = self.cluster.term;
        let now = self.cluster.clock(id, self.now_ms);
        let state = &self.cluster.coordinators[id].state;
        let settings = EngineSettings {
            lease_ttl_ms: self.config.lease_ttl_ms,
        };
        let mut engine = CutoverEngine::new(settings, state, now, term);
        if let Some(hook) = self.config.engine_hook {
            hook(&mut engine);
        }
        self.cluster.leader = Some(Leader {
            id,
            term,
            since_ms: now,
            engine,
            deferred: Vec::new(),
            leases: LeaseModel::new_leader(state, now),
        });
        self.cluster.elections += 1;
        self.note(format!("coordinator {id} becomes leader of term {term}"));
        // The new leader's first entry: everything before it is committed.
        self.append(None, None)?;
        if let Some(leader) = &self.cluster.leader {
            let state = &self.cluster.coordinators[id].state;
            self.checks.one_clock.new_leader(
                term,
                state,
                &leader.leases,
                now,
                self.config.lease_ttl_ms,
            );
        }
        Ok(())
    }

    /// Coordinator `c` crashes: a leader loses its soft state and its
    /// undelivered decisions; without a majority nobody leads.
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

    /// The leader is cut off from the majority, which elects another; its
    /// decisions not yet proposed are lost, committed in its own term, or
    /// left in flight.
    pub(super) fn depose_leader(&mut self) -> Check {
        let Some(old) = self.cluster.leader.as_ref().map(|l| l.id) else {
            return Ok(());
        };
        let others_up = (0..self.cluster.coordinators.len())
            .filter(|c| *c != old && self.cluster.coordinators[*c].up)
            .count();
        if others_up * 2 <= self.cluster.coordinators.len() {
            return Ok(());
        }
        // Cut off mid-pass: whatever it decides now is still in its hands.
        self.leader_decide_then(true)?;
        let Some(leader) = self.cluster.leader.take() else {
            return Ok(());
        };
        self.stats.depositions += 1;
        self.note(format!(
            "coordinator {old} (term {}) is cut off and deposed with {} decisions in hand",
            leader.term,
            leader.deferred.len()
        ));
        let mut committed = Vec::new();
        for decision in &leader.deferred {
            match self.rng.weighted(ORPHAN_FATES) {
                0 => {}
                1 => committed.push(decision.command()),
                _ => self.cluster.orphans.push(Orphan {
                    command: decision.command(),
                    decided_in: leader.term,
                }),
            }
        }
        // Entries that had reached a majority in the old term come before
        // the new leader's blank entry.
        for command in committed {
            self.cluster.log.push(LogEntry {
                term: leader.term,
                command: Some(command),
                decided_in: Some(leader.term),
            });
        }
        self.elect(Some(old))
    }

    /// A deposed leader's decision reaches the log again — forwarded to
    /// the new leader, or retried — in the current term.
    pub(super) fn repropose_orphan(&mut self) -> Check {
        if self.cluster.orphans.is_empty() || self.cluster.leader.is_none() {
            return Ok(());
        }
        let i = self.rng.index(self.cluster.orphans.len());
        let orphan = self.cluster.orphans.swap_remove(i);
        self.stats.reproposals += 1;
        self.note(format!(
            "a term-{} decision is re-proposed: {:?}",
            orphan.decided_in, orphan.command
        ));
        self.append(Some(orphan.command), Some(orphan.decided_in))
            .map(|_| ())
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
    /// message's delay beyond the network's bound — read on the leader's
    /// own clock.
    pub(super) fn deliver(&mut self) -> Check {
        for (at_ms, message) in self.network.due(self.now_ms) {
            let Some(leader) = self.cluster.leader.as_ref().map(|l| l.id) else {
                continue;
            };
            let p = message.proxy();
            let (id, zone) = (self.proxies[p].id.clone(), self.proxies[p].zone.clone());
            let now = self.cluster.clock(leader, at_ms);
            let known = match message {
                Message::Register { incarnation, .. } => {
                    let response = self.append(
                        Some(Command::RegisterProxy {
                            id,
                            zone,
                            admin_address: format!("10.9.0.{p}:9901"),
                        }),
                        None,
                    )?;
                    if let Some(CommandResponse(Ok(outcome))) = response {
                        self.registrations.insert(outcome.index, (p, incarnation));
                        // The reply reaches the run that asked, if it is
                        // still the running one.
                        let proxy = &mut self.proxies[p];
                        if proxy.incarnation == incarnation && proxy.up {
                            proxy.registration = outcome.index;
                            proxy.needs_register = false;
                        }
                    }
                    continue;
                }
                Message::Heartbeat {
                    registration,
                    applied,
                    ..
                } => {
                    let cluster = &mut self.cluster;
                    let state = &cluster.coordinators[leader].state;
                    let Some(l) = cluster.leader.as_mut() else {
                        continue;
                    };
                    l.leases.heard(state, &id, registration, now);
                    l.engine.heartbeat(state, &id, registration, applied, now)
                }
                Message::Report {
                    registration,
                    backends,
                    ..
                } => {
                    let cluster = &mut self.cluster;
                    let state = &cluster.coordinators[leader].state;
                    let Some(l) = cluster.leader.as_mut() else {
                        continue;
                    };
                    l.leases.heard(state, &id, registration, now);
                    l.engine.report(state, &id, registration, backends, now)
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
        let defer = !self.healing && self.rng.chance(200);
        self.leader_decide_then(defer)
    }

    /// One pass of the leader loop that proposes at once unless `defer`.
    fn leader_decide_then(&mut self, defer: bool) -> Check {
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
        let now = self.cluster.clock(id, self.now_ms);
        let sim_now = self.now_ms;
        let cluster = &mut self.cluster;
        let state = &cluster.coordinators[id].state;
        let Some(leader) = cluster.leader.as_mut() else {
            return Ok(());
        };
        leader.engine.sync(state, now);
        leader.leases.sync(state, now);
        self.checks.one_clock.observe(
            leader.term,
            state,
            &leader.leases,
            now,
            self.config.lease_ttl_ms,
        );
        let decisions = leader.engine.decide(state, now);
        let cx = DecideContext {
            state,
            leases: &leader.leases,
            truth: &self.truth,
            proxies: &self.proxies,
            registrations: &self.registrations,
            world: &self.world,
            leader_now_ms: now,
            sim_now_ms: sim_now,
            ttl_ms: self.config.lease_ttl_ms,
            window_ms: self.config.evidence_window_ms(),
        };
        self.checks.evidence.on_decide(&cx, &decisions)?;
        self.checks
            .isolation
            .on_decide(&leader.engine, state, now, leader.since_ms, &decisions)?;
        self.checks.one_clock.on_decide(
            leader.term,
            state,
            &leader.leases,
            now,
            self.config.lease_ttl_ms,
            &decisions,
        )?;
        if decisions.is_empty() {
            return Ok(());
        }
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

    /// The leader proposes the decisions it holds, each as the command the
    /// real leader loop writes.
    pub(super) fn propose_deferred(&mut self) -> Check {
        let Some(leader) = self.cluster.leader.as_mut() else {
            return Ok(());
        };
        let term = leader.term;
        let decisions = std::mem::take(&mut leader.deferred);
        for decision in decisions {
            match &decision {
                Decision::Abandon { .. } => self.stats.abandons += 1,
                Decision::ExpireProxy { .. } => self.stats.expiries += 1,
                Decision::Commit { .. } => {}
            }
            let response = self.append(Some(decision.command()), Some(term))?;
            let accepted = matches!(response, Some(CommandResponse(Ok(_))));
            if let Decision::ExpireProxy { id, .. } = &decision
                && accepted
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

/// A user's `Command::Apply` of `resources`, as a coordinator makes it.
fn user_apply_command(resources: Vec<Resource>) -> Command {
    Command::Apply {
        resources,
        defaults: CutoverSettings::default(),
        limits: None,
        validation: Some(switchyard_proto::model::ValidationRules::CURRENT_REVISION),
    }
}

/// Whether the decisions `command` carries took effect, by its answer:
/// an apply's carried commits only as their own answers say (the apply
/// itself always does), those of an entry of applies as each apply's
/// answer says.
fn decisions_took_effect(command: &Command, result: &Result<Outcome, CommandError>) -> bool {
    match (command, result) {
        (Command::ApplyAndCommit { .. }, Ok(outcome)) => {
            outcome.decisions.iter().any(Result::is_ok)
        }
        (Command::Applies { applies }, Ok(outcome)) => {
            applies
                .iter()
                .zip(&outcome.decisions)
                .any(|(apply, answer)| {
                    matches!(apply, Command::ApplyAndCommit { .. })
                        && decisions_took_effect(apply, answer)
                })
        }
        (_, result) => result.is_ok(),
    }
}
