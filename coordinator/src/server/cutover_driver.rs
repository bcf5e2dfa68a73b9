//! The leader loop: while this coordinator leads, keep a cutover engine,
//! and propose whatever it decides (commit, abandon, expire a proxy) — all
//! decisions of one pass in one Raft entry.
//!
//! Woken by evidence and state changes; a pass runs only when the engine
//! says it has something new to see (`crate::cutover` `pass`: a newer
//! entry, a fleet change, or a lease, report, grace or timeout falling
//! due), and the loop sleeps until the next such time. Besides, it looks
//! at least every [`QUORUM_CHECK`] whether it still leads with a quorum,
//! which costs a lock and a few comparisons. Losing leadership drops the
//! engine; losing the quorum while leading in the same term pauses it
//! (see `look`); gaining leadership — or leading again in a later term —
//! builds a fresh one (every lease renewed, no evidence). Decisions are
//! proposed on this node only, never forwarded: a decision is this
//! leader's, and the state machine would refuse it in another term anyway.
//! Each pass also refreshes the gauges of [`super::metrics`]. Commits an
//! apply carried in its own entry (`super::apply_commits`) are not this
//! loop's decisions; it is handed them to time them to Ready with its own.
//!
//! # The engine lock
//!
//! `Coordinator::engine` (a `std::sync::Mutex`, also taken by heartbeats,
//! readiness reports, deregistrations and status) covers the engine's soft
//! state: leases, registrations, evidence, applied generations, sockets,
//! first sightings and the pass bookkeeping. This loop holds it only for
//! O(P) steps (P = proxies): the leadership check, the registry sync and a
//! copy of the engine at the start of a pass (everything per proxy is
//! shared behind an `Arc`), and taking the pass's results back at its end.
//! The verdicts — the work that grows with pending routes — run on the
//! copy without the lock, so heartbeats never wait behind a pass.
//!
//! # A pass's cost
//!
//! A pass runs on a blocking thread (`spawn_blocking`), never on one of
//! the runtime's workers: at 10,000 pending routes and 200 proxies — a
//! bootstrap, every proxy reporting for the first time — one pass takes
//! long enough that holding a worker would delay Raft's heartbeats and
//! the proxies' leases on a small machine. And a pass starts no sooner
//! after the end of the previous one than that one took ([`pace`]), so
//! however many reports arrive, passes take at most about half of one
//! core; whatever changed meanwhile is judged together by the next. The
//! pause counts from the end of the long pass: a change arriving long
//! after it is judged at once.

use super::{Coordinator, now_ms};
use crate::cutover::{CutoverEngine, Decision};
use crate::raft::ProposeError;
use crate::state::ReplicatedState;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_proto::model::ObjectName;

/// Longest wait between two looks at leadership and quorum: a leader cut
/// off from its quorum must stop deciding well within a lease TTL.
const QUORUM_CHECK: Duration = Duration::from_millis(50);

/// How soon decisions whose proposal failed are made again.
const RETRY: u64 = 50;

/// Commits waiting for every live proxy to serve them, for the
/// apply-to-Ready histogram, checked a few at a time.
#[derive(Debug, Default)]
struct AwaitingReady {
    routes: BTreeMap<ObjectName, Awaiting>,
    /// The last route checked: the next check starts after it.
    cursor: Option<ObjectName>,
}

/// Commits awaiting Ready checked per look at most. Each check is O(P)
/// once its route's last proxy caught up (O(log) before, see
/// [`Awaiting::blocker`]): a bootstrap's 10,000 commits at 200 proxies
/// checked in one look took 0.4–0.6 s, and the next decision waited for
/// it. A commit is then seen Ready a few looks late at worst (the
/// histogram's error, for bulk commits only).
const AWAITING_CHECKS_PER_LOOK: usize = 512;

/// How long one look may spend on the commits awaiting Ready (after the
/// first, always checked): the decisions of the same look wait for it.
/// 512 checks at 200 proxies took tens of milliseconds on a busy 2-core
/// machine, and the first ten single-route changes after a bootstrap of
/// 10,000 routes waited 70–135 ms from their commit to their cutover for
/// it (the later ones 2–10 ms). Bulk commits then drain a few dozen per
/// look; a single one is checked at every look.
const AWAITING_CHECK_TIME: Duration = Duration::from_millis(2);

impl AwaitingReady {
    fn insert(&mut self, route: ObjectName, awaiting: Awaiting) {
        self.routes.insert(route, awaiting);
    }

    fn remove(&mut self, route: &ObjectName) {
        self.routes.remove(route);
    }

    fn get(&self, route: &ObjectName) -> Option<&Awaiting> {
        self.routes.get(route)
    }

    fn len(&self) -> usize {
        self.routes.len()
    }

    fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    fn clear(&mut self) {
        self.routes.clear();
        self.cursor = None;
    }

    /// Asks `keep` of at most `budget` routes, going round from where the
    /// last call stopped, and of no more once `until` has passed (the
    /// first is always asked); drops those it answers false for.
    fn check_some(
        &mut self,
        budget: usize,
        until: std::time::Instant,
        mut keep: impl FnMut(&ObjectName, &mut Awaiting) -> bool,
    ) {
        use std::ops::Bound::{Excluded, Unbounded};
        let names: Vec<ObjectName> = match self.cursor.take() {
            Some(after) => self
                .routes
                .range((Excluded(&after), Unbounded))
                .chain(self.routes.range(..=&after))
                .map(|(name, _)| name.clone())
                .take(budget)
                .collect(),
            None => self.routes.keys().take(budget).cloned().collect(),
        };
        let mut checked: usize = 0;
        for name in &names {
            if checked > 0 && std::time::Instant::now() >= until {
                break;
            }
            if let Some(awaiting) = self.routes.get_mut(name)
                && !keep(name, awaiting)
            {
                self.routes.remove(name);
            }
            checked += 1;
        }
        self.cursor = checked
            .checked_sub(1)
            .and_then(|last| names.get(last).cloned());
    }
}

/// One commit awaiting Ready.
#[derive(Debug)]
struct Awaiting {
    generation: u64,
    /// When this leader first saw it pending, by its own clock.
    seen_ms: u64,
    /// The proxy found not serving it at the last check, asked first at
    /// the next ([`CutoverEngine::ready_everywhere_past`]).
    blocker: Option<String>,
}

/// Runs until aborted.
pub(crate) async fn run(coordinator: Arc<Coordinator>) {
    let mut state_rx = coordinator.node.state();
    let mut awaiting_ready = AwaitingReady::default();
    let mut retry_at: Option<u64> = None;
    let mut gauges_seen = None;
    let mut last_pass = Duration::ZERO;
    let mut last_ended = std::time::Instant::now();
    loop {
        let wait = next_wait(&coordinator, retry_at);
        tokio::select! {
            _ = coordinator.wake.notified() => {}
            _ = state_rx.changed() => {}
            _ = tokio::time::sleep(wait) => {}
        }
        if retry_at.is_some_and(|t| t <= now_ms()) {
            retry_at = None;
            coordinator.with_engine(CutoverEngine::pass_again);
        }
        tokio::time::sleep(pace(last_pass, last_ended.elapsed())).await;
        let state = coordinator.node.state().borrow().clone();
        let started = std::time::Instant::now();
        let (decisions, pass_took) = decide(&coordinator, &state, &mut awaiting_ready).await;
        let look_took = started.elapsed();
        last_pass = pass_took;
        last_ended = std::time::Instant::now();
        if look_took >= SLOW_LOOK {
            tracing::info!(
                ms = look_took.as_millis() as u64,
                pass_ms = pass_took.as_millis() as u64,
                decisions = decisions.len(),
                awaiting_ready = awaiting_ready.len(),
                "slow decision look"
            );
        }
        let term = coordinator.node.metrics().borrow().current_term;
        if gauges_seen != Some((state.last_index, term)) || !decisions.is_empty() {
            gauges_seen = Some((state.last_index, term));
            refresh_gauges(&coordinator, &state);
        }
        if !propose(&coordinator, decisions, &mut awaiting_ready).await {
            retry_at = Some(now_ms() + RETRY);
        }
    }
}

/// How long to sleep: until the engine's next due time or a retry, and
/// never longer than [`QUORUM_CHECK`].
fn next_wait(coordinator: &Coordinator, retry_at: Option<u64>) -> Duration {
    let now = now_ms();
    let due = coordinator
        .with_engine(|e| e.next_due_ms())
        .flatten()
        .into_iter()
        .chain(retry_at)
        .min();
    let until = due.map_or(QUORUM_CHECK, |t| {
        Duration::from_millis(t.saturating_sub(now))
    });
    until.min(QUORUM_CHECK)
}

/// What a look at the engine under its lock hands out.
enum Look {
    /// Nothing to do.
    Idle,
    /// A copy to check the commits awaiting Ready against; no pass.
    Awaiting(CutoverEngine),
    /// A pass to run on this copy.
    Pass(CutoverEngine),
}

/// Looks (a pass and the check of the commits awaiting Ready) at least
/// this long are logged (with the pass's own time, which the next look
/// waits as long again: [`pace`]).
const SLOW_LOOK: Duration = Duration::from_millis(200);

/// Passes shorter than this are not paced: a pass over a handful of
/// pending routes must not add latency to a cutover.
const UNPACED_PASS: Duration = Duration::from_millis(5);

/// How long to wait before a look that may start a pass, after one that
/// took `last` and ended `since` ago: until as long again has passed
/// since its end (passes then use at most about half of a core), unless
/// it was short. Counted from the end, not from now: before, the first
/// change after a bootstrap's long pass waited that pass's length again
/// however long ago it ran (773 ms at 10,000 routes).
fn pace(last: Duration, since: Duration) -> Duration {
    if last < UNPACED_PASS {
        Duration::ZERO
    } else {
        last.saturating_sub(since)
    }
}

/// Keeps the engine in step with leadership and, when a pass is due, runs
/// it on a copy of the engine outside the lock, on a blocking thread —
/// with a check of some of the commits awaiting Ready
/// ([`AWAITING_CHECKS_PER_LOOK`], [`AWAITING_CHECK_TIME`]). Returns the
/// decisions and how long the pass itself took.
async fn decide(
    coordinator: &Coordinator,
    state: &ReplicatedState,
    awaiting: &mut AwaitingReady,
) -> (Vec<Decision>, Duration) {
    let now = now_ms();
    for carried in coordinator.take_committed_with_apply() {
        awaiting.insert(
            carried.route,
            Awaiting {
                generation: carried.generation,
                seen_ms: carried.received_ms,
                blocker: None,
            },
        );
    }
    let look = look(coordinator, state, awaiting, now);
    let (mut copy, pass) = match look {
        Look::Idle => return (Vec::new(), Duration::ZERO),
        Look::Awaiting(copy) => (copy, false),
        Look::Pass(copy) => (copy, true),
    };
    // The four handles the blocking task updates (each an `Arc`), not a
    // copy of every metric.
    let apply_to_ready = coordinator.metrics.apply_to_ready.clone();
    let pass_seconds = coordinator.metrics.pass_seconds.clone();
    let pass_judged = coordinator.metrics.pass_judged.clone();
    let live_gauge = coordinator.metrics.live_gauge();
    let pass_state = state.clone();
    let mut waiting = std::mem::take(awaiting);
    let ran = tokio::task::spawn_blocking(move || {
        let until = std::time::Instant::now() + AWAITING_CHECK_TIME;
        let live = copy.live_proxies(&pass_state, now);
        if pass {
            live_gauge.set(&live);
        }
        waiting.check_some(AWAITING_CHECKS_PER_LOOK, until, |route, awaiting| {
            let still_active = pass_state
                .routes
                .get(route)
                .and_then(|r| r.active.as_ref())
                .is_some_and(|a| a.generation == awaiting.generation);
            if still_active
                && copy.ready_everywhere_past(&live, &pass_state, route, &mut awaiting.blocker)
            {
                let seconds = now.saturating_sub(awaiting.seen_ms) as f64 / 1000.0;
                apply_to_ready.observe(seconds);
                return false;
            }
            still_active
        });
        let started = std::time::Instant::now();
        let judgement = pass.then(|| {
            let judgement = copy.run_pass(&pass_state, now);
            pass_seconds.observe(started.elapsed().as_secs_f64());
            pass_judged.inc_by(judgement.evaluated as u64);
            judgement
        });
        let pass_took = if pass {
            started.elapsed()
        } else {
            Duration::ZERO
        };
        (copy, judgement, waiting, pass_took)
    })
    .await;
    let (copy, judgement, pass_took) = match ran {
        Ok((copy, judgement, waiting, pass_took)) => {
            *awaiting = waiting;
            (copy, judgement, pass_took)
        }
        Err(e) => {
            // A panic in the pass: the engine keeps its state and the
            // next look judges again (the commits awaiting Ready are lost
            // to the histogram, nothing else).
            tracing::error!(error = %e, "cutover decision pass failed");
            coordinator.with_engine(CutoverEngine::pass_again);
            return (Vec::new(), Duration::ZERO);
        }
    };
    let Some(judgement) = judgement else {
        return (Vec::new(), pass_took);
    };
    // Remember when each route about to be committed was first seen, for
    // the apply-to-commit and apply-to-Ready histograms.
    for decision in &judgement.decisions {
        if let Decision::Commit {
            route, generation, ..
        } = decision
            && let Some(seen) = copy.first_seen_ms(route, *generation)
        {
            awaiting.insert(
                route.clone(),
                Awaiting {
                    generation: *generation,
                    seen_ms: seen,
                    blocker: None,
                },
            );
        }
    }
    coordinator.with_engine(|e| e.finish_pass(state, copy, &judgement));
    (judgement.decisions, pass_took)
}

/// Under the engine lock (O(P)): leadership, the engine's term, and
/// whether there is anything to do.
fn look(
    coordinator: &Coordinator,
    state: &ReplicatedState,
    awaiting: &mut AwaitingReady,
    now: u64,
) -> Look {
    let term = coordinator.node.metrics().borrow().current_term;
    let mut guard = coordinator.engine.lock().unwrap_or_else(|e| e.into_inner());
    // A leader without a quorum acknowledgement within an election
    // timeout decides nothing: it could commit nothing anyway, and the
    // fleet's calls to it are refused meanwhile.
    //
    // While it still leads in the same term it keeps its engine, paused:
    // Raft allows one leader per term, so nobody else decided in the
    // meantime, and a quorum acknowledging this term again means no later
    // term was started without it. On a loaded machine (a failover with
    // hundreds of proxies sending their whole sets) acknowledgements can
    // lag for a moment; starting afresh each time would drop every
    // proxy's evidence and applied set and make them all send them again,
    // feeding the very load that delayed the acknowledgements. When it no
    // longer leads, or leads in a later term, nothing carries over.
    if !coordinator.leads_with_quorum() {
        let paused_in_term =
            coordinator.node.is_leader() && guard.as_ref().is_some_and(|e| e.term() == term);
        match guard.as_mut() {
            Some(engine) if paused_in_term => {
                let starts = engine.pause_for_quorum(now);
                if starts {
                    tracing::info!(
                        term,
                        "leading without a quorum acknowledgement: decisions paused, the engine is kept while this term lasts"
                    );
                    coordinator
                        .status_changes
                        .send_modify(|v| *v = v.wrapping_add(1));
                }
            }
            Some(_) => {
                *guard = None;
                tracing::info!("lost leadership: cutover engine stopped");
                coordinator
                    .status_changes
                    .send_modify(|v| *v = v.wrapping_add(1));
            }
            None => {}
        }
        awaiting.clear();
        return Look::Idle;
    }
    if guard.as_ref().is_some_and(|e| e.term() != term) {
        // Leading again, in a later term: nothing of the earlier term's
        // soft state may carry over.
        *guard = None;
        awaiting.clear();
    }
    if let Some(paused_ms) = guard.as_mut().and_then(|e| e.resume_after_quorum(now)) {
        tracing::info!(
            term,
            paused_ms,
            "quorum acknowledgements back: decisions resumed, every proxy lease renewed"
        );
        coordinator
            .status_changes
            .send_modify(|v| *v = v.wrapping_add(1));
    }
    let engine = guard.get_or_insert_with(|| {
        tracing::info!(
            term,
            proxies = state.proxies.len(),
            "became leader: cutover engine started, every proxy lease renewed"
        );
        CutoverEngine::leading(coordinator.engine_settings(), state, now, term)
    });
    if let Some(waited_ms) = engine.grace_just_ended(state, now) {
        tracing::info!(
            term,
            waited_ms,
            proxies = state.proxies.len(),
            "grace over: every registered proxy heard from since becoming leader (or a lease TTL passed); judging readiness"
        );
    }
    if engine.pass_due(state, now) {
        Look::Pass(engine.start_pass(state, now))
    } else if !awaiting.is_empty() {
        Look::Awaiting(engine.clone())
    } else {
        Look::Idle
    }
}

fn refresh_gauges(coordinator: &Coordinator, state: &ReplicatedState) {
    let m = &coordinator.metrics;
    let raft = coordinator.node.metrics().borrow().clone();
    m.term.set(raft.current_term as i64);
    m.leader.set(raft.current_leader.unwrap_or(0) as i64);
    m.is_leader.set(i64::from(coordinator.node.is_leader()));
    m.last_log_index
        .set(raft.last_log_index.unwrap_or(0) as i64);
    // Both from the published state, never the applied index from Raft's
    // metrics: those move on their own schedule, and a pair read from two
    // sources can show a commit's "nothing pending" beside the index of
    // the apply before it — and stay so while the leader idles.
    m.applied_index.set(state.last_index as i64);
    m.pending_transitions.set(state.pending_count() as i64);
}

/// Proposes every decision of one pass in one entry. False when the
/// proposal failed in a way worth retrying (the decisions are then made
/// again shortly).
async fn propose(
    coordinator: &Coordinator,
    decisions: Vec<Decision>,
    awaiting: &mut AwaitingReady,
) -> bool {
    let Some(command) = Decision::batch(&decisions) else {
        return true;
    };
    for decision in &decisions {
        log_decision(decision);
    }
    let response = match coordinator.propose_decision(command).await {
        Ok(response) => response,
        Err(ProposeError::NotLeader { .. }) => {
            // Deposed between deciding and proposing: the decisions were
            // this leader's and go with it.
            tracing::info!("no longer leader: decisions dropped, the next leader decides afresh");
            forget_commits(&decisions, awaiting);
            return true;
        }
        Err(e) => {
            tracing::warn!(error = %e, decisions = decisions.len(), "could not propose decisions; will decide again");
            return false;
        }
    };
    let answers = Decision::answers(&decisions, response);
    for (decision, answer) in decisions.into_iter().zip(answers) {
        if let Err(e) = answer {
            // A decision raced with a newer apply (superseded, endpoints
            // moved on) or outlived its term: harmless, the engine decides
            // again.
            tracing::debug!(error = %e, "decision no longer applies");
            forget_commits(std::slice::from_ref(&decision), awaiting);
            continue;
        }
        carried_out(coordinator, decision, awaiting);
    }
    true
}

fn log_decision(decision: &Decision) {
    match decision {
        Decision::Commit {
            route,
            generation,
            forced,
            summary,
            ..
        } => {
            tracing::info!(route = %route, generation, forced, evidence = %summary, "committing cutover");
        }
        Decision::Abandon {
            route,
            generation,
            reason,
            ..
        } => {
            tracing::warn!(route = %route, generation, reason = %reason, "abandoning cutover, old backend keeps serving");
        }
        Decision::ExpireProxy { id, .. } => {
            tracing::warn!(proxy = %id, "proxy lease expired: it no longer counts toward readiness");
        }
    }
}

fn forget_commits(decisions: &[Decision], awaiting: &mut AwaitingReady) {
    for decision in decisions {
        if let Decision::Commit { route, .. } = decision {
            awaiting.remove(route);
        }
    }
}

/// Counts an accepted decision.
fn carried_out(coordinator: &Coordinator, decision: Decision, awaiting: &AwaitingReady) {
    let m = &coordinator.metrics;
    match decision {
        Decision::Commit {
            route, generation, ..
        } => {
            m.commits.inc();
            if let Some(awaiting) = awaiting.get(&route)
                && awaiting.generation == generation
            {
                m.apply_to_commit
                    .observe(now_ms().saturating_sub(awaiting.seen_ms) as f64 / 1000.0);
            }
        }
        Decision::Abandon { .. } => {
            m.abandons.inc();
        }
        Decision::ExpireProxy { id, .. } => {
            m.expired_proxies.inc();
            coordinator.with_engine(|e| e.forget(&id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(i: usize) -> ObjectName {
        ObjectName::new("ns", format!("r{i:02}"))
    }

    #[test]
    fn commits_awaiting_ready_are_checked_a_budget_at_a_time_going_round() {
        let mut awaiting = AwaitingReady::default();
        for i in 0..5 {
            let commit = Awaiting {
                generation: 1,
                seen_ms: 0,
                blocker: None,
            };
            awaiting.insert(name(i), commit);
        }
        let mut seen = Vec::new();
        let later = std::time::Instant::now() + Duration::from_secs(3600);
        // Two per check; r01 turns out Ready and is dropped.
        for _ in 0..3 {
            awaiting.check_some(2, later, |route, _| {
                seen.push(route.name.clone());
                route.name != "r01"
            });
        }
        assert_eq!(seen, ["r00", "r01", "r02", "r03", "r04", "r00"]);
        assert_eq!(awaiting.len(), 4);
        assert!(awaiting.get(&name(1)).is_none());
        // Round again from after r00, past the gap.
        seen.clear();
        awaiting.check_some(3, later, |route, _| {
            seen.push(route.name.clone());
            true
        });
        assert_eq!(seen, ["r02", "r03", "r04"]);
        // Out of time: one only, and the next look goes on after it.
        seen.clear();
        let past = std::time::Instant::now();
        awaiting.check_some(3, past, |route, _| {
            seen.push(route.name.clone());
            true
        });
        awaiting.check_some(3, past, |route, _| {
            seen.push(route.name.clone());
            true
        });
        assert_eq!(seen, ["r00", "r02"]);
    }

    #[test]
    fn a_long_pass_delays_the_next_look_only_until_as_long_again_has_passed_since_it_ended() {
        let ms = Duration::from_millis;
        // A short pass: no pause.
        assert_eq!(pace(ms(2), ms(0)), Duration::ZERO);
        // A long pass just ended: as long again.
        assert_eq!(pace(ms(700), ms(0)), ms(700));
        // Part of that has passed: the rest.
        assert_eq!(pace(ms(700), ms(500)), ms(200));
        // Long ago: at once.
        assert_eq!(pace(ms(700), ms(1_800)), Duration::ZERO);
    }
}
