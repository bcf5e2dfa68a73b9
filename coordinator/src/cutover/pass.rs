//! When the leader loop runs a decision pass, and how a pass works on a
//! copy of the engine so the lock it lives under is held only for O(P)
//! steps, never while verdicts are worked out.
//!
//! A pass sees the replicated state, the fleet soft state and the clock.
//! The leader loop runs one only when one of them gives it something the
//! last pass did not see: a newer applied entry, a change to the fleet
//! soft state ([`CutoverEngine::heartbeat`] and [`CutoverEngine::report`]
//! say when theirs is one), or a time at which something flips — a lease
//! or a report running out, the new leader's grace ending, a pending
//! transition timing out. Otherwise it does nothing.
//!
//! A pass judges every pending route, except when the only thing new
//! since the last pass is evidence: then it judges the pending routes
//! that use a backend whose evidence changed ([`Scope`]) — nothing else
//! can have moved for the others (their evidence, the live set, the state
//! and the clock are as the last pass saw them). So 200 proxies reporting
//! one after the other while 10,000 routes are pending cost each route's
//! verdict once per change to its own backends' evidence, not a judgement
//! of every pending route per report.
//!
//! Owns: that bookkeeping, [`CutoverEngine::start_pass`] /
//! [`CutoverEngine::finish_pass`] and the applied-generation summaries.
//! Does not own: the judgement itself (`super::judge`).

use super::{CutoverEngine, Judgement, LiveProxies};
use crate::state::ReplicatedState;
use std::collections::BTreeSet;
use switchyard_proto::model::{BackendKey, ObjectName};

/// What a pass must judge.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Scope {
    /// Every pending route.
    #[default]
    Full,
    /// Only the pending routes that use one of these backends: nothing but
    /// their evidence changed since the last pass.
    Backends(BTreeSet<BackendKey>),
}

impl Scope {
    /// Something besides evidence changed: judge everything.
    pub(super) fn widen(&mut self) {
        *self = Scope::Full;
    }

    /// The evidence of `backends` changed.
    pub(super) fn narrow(&mut self, backends: impl IntoIterator<Item = BackendKey>) {
        if let Scope::Backends(set) = self {
            set.extend(backends);
        }
    }

    /// Whether a route needing `backends` must be judged.
    pub(super) fn covers<'a>(&self, mut backends: impl Iterator<Item = &'a BackendKey>) -> bool {
        match self {
            Scope::Full => true,
            Scope::Backends(set) => backends.any(|b| set.contains(b)),
        }
    }
}

/// What the passes have seen.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Passes {
    /// The last pass started: `None` before the first, or when a pass must
    /// run again whatever changed (a proposal failed).
    last: Option<Mark>,
    /// The earliest time a pending transition times out, from the last
    /// pass (state changes start a pass anyway, so it holds until then).
    next_timeout_ms: Option<u64>,
    /// No time-driven event falls due before this (engine clock): heartbeats
    /// and repeated reports only push leases and evidence later, so the
    /// bound computed after a pass stays safe until the next one.
    quiet_until_ms: Option<u64>,
}

/// What one pass saw when it started.
#[derive(Debug, Clone, Copy)]
struct Mark {
    state_index: u64,
    changes: u64,
    at_ms: u64,
}

impl CutoverEngine {
    /// Whether a pass at `now_ms` would see anything the last one did not.
    /// O(1) unless a due time is reached, then O(P).
    pub fn pass_due(&mut self, state: &ReplicatedState, now_ms: u64) -> bool {
        let Some(last) = self.passes.last else {
            self.scope.widen();
            return true;
        };
        if last.state_index != state.last_index {
            self.scope.widen();
            return true;
        }
        if last.changes != self.changes {
            // Whatever changed narrowed or widened the scope itself.
            return true;
        }
        if self.passes.quiet_until_ms.is_some_and(|t| t > now_ms) {
            return false;
        }
        let next = self.next_event_ms(state, last.at_ms);
        self.passes.quiet_until_ms = next;
        let due = next.is_some_and(|t| t <= now_ms);
        if due {
            // A lease, a report, the grace or a timeout ran out.
            self.scope.widen();
        }
        due
    }

    /// When the leader loop should look again at the latest (engine
    /// clock), `None` when only a change can give a pass anything to do.
    pub fn next_due_ms(&self) -> Option<u64> {
        match self.passes.last {
            None => Some(0),
            Some(_) => self.passes.quiet_until_ms,
        }
    }

    /// Makes the next [`CutoverEngine::pass_due`] say yes (a proposal
    /// failed and its decisions must be made again).
    pub fn pass_again(&mut self) {
        self.passes.last = None;
    }

    /// The leader this engine serves has no quorum acknowledgement: it
    /// decides nothing until [`CutoverEngine::resume_after_quorum`]. True
    /// when this starts a pause.
    pub fn pause_for_quorum(&mut self, now_ms: u64) -> bool {
        let starts = self.quorum_lost_ms.is_none();
        self.quorum_lost_ms.get_or_insert(now_ms);
        starts
    }

    /// The same leader, in the same term, has its quorum again: every
    /// lease is renewed (the fleet's calls were refused meanwhile, so
    /// silence says nothing about a proxy), what the proxies said before
    /// is kept (evidence still counts only within a lease TTL of its
    /// arrival), and the next pass judges everything. How long the pause
    /// lasted, if there was one.
    pub fn resume_after_quorum(&mut self, now_ms: u64) -> Option<u64> {
        let since = self.quorum_lost_ms.take()?;
        self.leases.renew_all(now_ms);
        self.changes += 1;
        self.pass_again();
        Some(now_ms.saturating_sub(since))
    }

    /// Starts a pass at `now_ms`: brings the registry half of the soft
    /// state in line with `state` and returns a copy of the engine to judge
    /// with, outside whatever lock guards this one. O(P): everything per
    /// proxy is shared, not copied, and the routes are left to the copy.
    pub fn start_pass(&mut self, state: &ReplicatedState, now_ms: u64) -> CutoverEngine {
        self.sync_registry(state, now_ms);
        self.passes.last = Some(Mark {
            state_index: state.last_index,
            changes: self.changes,
            at_ms: now_ms,
        });
        let copy = self.clone();
        // The copy judges what the scope says; from here on, only what
        // changes after this point needs judging again.
        self.scope = Scope::Backends(BTreeSet::new());
        copy
    }

    /// The pass's own half, on the copy [`CutoverEngine::start_pass`]
    /// returned: brings the pending routes' timeouts in line with `state`
    /// and judges. O(pending routes) plus their verdicts.
    pub fn run_pass(&mut self, state: &ReplicatedState, now_ms: u64) -> Judgement {
        self.sync_routes(state, now_ms);
        self.judge_within(state, now_ms, &self.scope)
    }

    /// Takes back what a pass on `copy` learnt (the pending routes' first
    /// sightings) and when the next one falls due. Does nothing when this
    /// engine is not the one the copy was made from (leadership changed
    /// meanwhile). O(P).
    pub fn finish_pass(
        &mut self,
        state: &ReplicatedState,
        copy: CutoverEngine,
        judgement: &Judgement,
    ) {
        if copy.term != self.term || copy.leader_since_ms != self.leader_since_ms {
            return;
        }
        self.first_seen = copy.first_seen;
        self.paused_at_ms = copy.paused_at_ms;
        self.passes.next_timeout_ms = match copy.scope {
            Scope::Full => judgement.next_timeout_ms,
            // The routes not judged keep the timeouts the last pass saw
            // (one of them committed meanwhile only wakes a pass early).
            Scope::Backends(_) => match (self.passes.next_timeout_ms, judgement.next_timeout_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        };
        if let Some(last) = self.passes.last {
            self.passes.quiet_until_ms = self.next_event_ms(state, last.at_ms);
        }
    }

    /// The earliest time after `after_ms` at which a pass would see
    /// something flip: a lease or a report running out, the grace ending,
    /// a pending transition timing out. O(P).
    fn next_event_ms(&self, state: &ReplicatedState, after_ms: u64) -> Option<u64> {
        let ttl = self.settings.lease_ttl_ms;
        let leases = self
            .leases
            .ids()
            .filter_map(|id| self.leases.last_seen_ms(id))
            .map(|seen| seen + ttl);
        let reports = self.evidence.values().map(|r| r.received_ms + ttl);
        let grace = self
            .in_grace(state, after_ms)
            .then_some(self.leader_since_ms + ttl);
        leases
            .chain(reports)
            .chain(grace)
            .chain(self.passes.next_timeout_ms)
            .filter(|t| *t > after_ms)
            .min()
    }

    /// Whether every one of the `live` proxies (from
    /// [`CutoverEngine::live_proxies`]) serves `route`'s newest generation
    /// and nothing of it is pending: [`CutoverEngine::applied_summary_among`]'s
    /// answer without its summary, stopping at the first proxy behind. O(P).
    pub fn ready_everywhere(
        &self,
        live: &LiveProxies<'_>,
        state: &ReplicatedState,
        route: &ObjectName,
    ) -> bool {
        self.ready_everywhere_past(live, state, route, &mut None)
    }

    /// [`CutoverEngine::ready_everywhere`], asked again and again of one
    /// route: `blocker` remembers the proxy found behind last time, and
    /// while it is live and still behind the answer is no at O(log) cost;
    /// only when it caught up (or left) are the others looked at again,
    /// O(P). A bootstrap's 10,000 commits awaiting Ready were each checked
    /// against every proxy on every look of the leader: 2 million lookups
    /// per look at 200 proxies, half a second the next decision waited.
    pub fn ready_everywhere_past(
        &self,
        live: &LiveProxies<'_>,
        state: &ReplicatedState,
        route: &ObjectName,
        blocker: &mut Option<String>,
    ) -> bool {
        let Some(record) = state.routes.get(route) else {
            return false;
        };
        if record.pending.is_some() || live.is_empty() {
            return false;
        }
        let generation = record.newest_generation();
        let serves = |proxy: &str| {
            self.applied
                .get(proxy)
                .is_some_and(|a| a.serves(route, record, generation))
        };
        if let Some(behind) = blocker.as_deref()
            && live.contains_key(behind)
            && !serves(behind)
        {
            return false;
        }
        match live.keys().find(|p| !serves(p)) {
            Some(behind) => {
                *blocker = Some((*behind).to_string());
                false
            }
            None => true,
        }
    }

    /// "n of m proxies at generation g" for a route's newest generation, and
    /// whether every live proxy is there.
    pub fn applied_summary(
        &self,
        state: &ReplicatedState,
        route: &ObjectName,
        now_ms: u64,
    ) -> Option<(String, bool)> {
        self.applied_summary_among(&self.live_proxies(state, now_ms), state, route)
    }

    /// [`CutoverEngine::applied_summary`] among `live` proxies (from
    /// [`CutoverEngine::live_proxies`]), for callers asking about many
    /// routes at once. O(P).
    pub fn applied_summary_among(
        &self,
        live: &LiveProxies<'_>,
        state: &ReplicatedState,
        route: &ObjectName,
    ) -> Option<(String, bool)> {
        let record = state.routes.get(route)?;
        let generation = record.newest_generation();
        let at = live
            .keys()
            .filter(|p| {
                self.applied
                    .get(**p)
                    .is_some_and(|a| a.serves(route, record, generation))
            })
            .count();
        let ready = record.pending.is_none() && !live.is_empty() && at == live.len();
        Some((
            format!("{at} of {} proxies at generation {generation}", live.len()),
            ready,
        ))
    }
}
