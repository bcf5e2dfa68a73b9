//! Raft, abstractly: one committed log that only grows, each entry stamped
//! with the term of the leader that appended it; coordinators that each
//! apply it in order with the real [`ReplicatedState::apply`] (some
//! lagging); at most one leader per term — elected only while a majority is
//! up, holding the whole log, appending its blank entry first, and keeping
//! the real [`CutoverEngine`] as its soft state, timed by its own clock.
//!
//! A leader can be *deposed* without crashing (cut off from the majority):
//! its decisions not yet proposed are then lost, committed in its own term
//! (they had reached a majority before the new leader's blank entry), or
//! left in flight to be re-proposed later in whatever term is current —
//! which is what openraft's "forward to the leader" did to a truncated
//! entry. The state machine's fence must make the last harmless.
//!
//! Not modelled: votes and uncommitted entries being overwritten — the
//! cores only ever see committed entries in order, which is what openraft
//! guarantees them.

use super::lease_model::LeaseModel;
use switchyard_coordinator::cutover::{CutoverEngine, Decision};
use switchyard_coordinator::state::{Command, ReplicatedState};

/// One coordinator.
#[derive(Debug, Clone, Default)]
pub struct SimCoordinator {
    /// Running.
    pub up: bool,
    /// Its state machine; `last_index` is how far it has applied.
    pub state: ReplicatedState,
    /// Its monotonic clock reads the simulation's time plus this (each
    /// machine started at another moment, so readings of two machines are
    /// never comparable).
    pub clock_offset_ms: u64,
}

/// The current leader's soft state.
#[derive(Debug, Clone)]
pub struct Leader {
    /// Which coordinator.
    pub id: usize,
    /// Its term.
    pub term: u64,
    /// When it took over, by its own clock.
    pub since_ms: u64,
    /// The real engine.
    pub engine: CutoverEngine,
    /// Decisions decided but not yet proposed (the leader loop proposes one
    /// at a time; others' entries can land in between).
    pub deferred: Vec<Decision>,
    /// The reference lease model for this leadership (leader's clock).
    pub leases: LeaseModel,
}

/// One committed entry.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// Term of the leader that appended it.
    pub term: u64,
    /// The command; `None` for a new leader's blank entry.
    pub command: Option<Command>,
    /// For a leader's decision: the term of the leader that decided it.
    pub decided_in: Option<u64>,
}

/// A deposed leader's decision still travelling (forwarded or retried).
#[derive(Debug, Clone)]
pub struct Orphan {
    /// The decision's command, exactly as the deciding leader built it.
    pub command: Command,
    /// The term it was decided in.
    pub decided_in: u64,
}

/// The coordinator group.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// Committed entries; index `i` is `log[i - 1]`.
    pub log: Vec<LogEntry>,
    /// Coordinators.
    pub coordinators: Vec<SimCoordinator>,
    /// The leader, if there is one.
    pub leader: Option<Leader>,
    /// The newest term any leader had.
    pub term: u64,
    /// Deposed leaders' decisions in flight.
    pub orphans: Vec<Orphan>,
    /// Leaderships so far.
    pub elections: u64,
}

impl Cluster {
    /// `n` coordinators, all up and empty, no leader; `offsets` are their
    /// clock offsets.
    pub fn new(offsets: Vec<u64>) -> Self {
        Cluster {
            coordinators: offsets
                .into_iter()
                .map(|clock_offset_ms| SimCoordinator {
                    up: true,
                    state: ReplicatedState::default(),
                    clock_offset_ms,
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Whether more than half are up.
    pub fn majority_up(&self) -> bool {
        let up = self.coordinators.iter().filter(|c| c.up).count();
        up * 2 > self.coordinators.len()
    }

    /// The leader's state.
    pub fn leader_state(&self) -> Option<&ReplicatedState> {
        let leader = self.leader.as_ref()?;
        self.coordinators.get(leader.id).map(|c| &c.state)
    }

    /// Coordinator `c`'s clock at simulation time `now_ms`.
    pub fn clock(&self, c: usize, now_ms: u64) -> u64 {
        now_ms + self.coordinators.get(c).map_or(0, |c| c.clock_offset_ms)
    }

    /// The next entry coordinator `c` has to apply, with its index.
    pub fn next_entry(&self, c: usize) -> Option<(u64, &LogEntry)> {
        let index = self.coordinators.get(c)?.state.last_index + 1;
        let entry = self.log.get(usize::try_from(index - 1).ok()?)?;
        Some((index, entry))
    }
}
