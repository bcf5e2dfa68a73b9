//! Raft, abstractly: one committed log that only grows, coordinators that
//! each apply it in order with the real [`ReplicatedState::apply`] (some
//! lagging), and at most one leader — elected only while a majority is up,
//! always holding the whole log, keeping the real [`CutoverEngine`] as its
//! soft state.
//!
//! Not modelled: votes, terms on entries, uncommitted entries being
//! overwritten — the cores only ever see committed entries in order, which
//! is what openraft guarantees them.

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
}

/// The current leader's soft state.
#[derive(Debug, Clone)]
pub struct Leader {
    /// Which coordinator.
    pub id: usize,
    /// When it took over.
    pub since_ms: u64,
    /// The real engine.
    pub engine: CutoverEngine,
    /// Decisions decided but not yet proposed (the leader loop proposes one
    /// at a time; others' entries can land in between).
    pub deferred: Vec<Decision>,
    /// The reference lease model for this leadership.
    pub leases: LeaseModel,
}

/// The coordinator group.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// Committed entries; index `i` is `log[i - 1]`.
    pub log: Vec<Command>,
    /// Coordinators.
    pub coordinators: Vec<SimCoordinator>,
    /// The leader, if there is one.
    pub leader: Option<Leader>,
    /// Leaderships so far.
    pub elections: u64,
}

impl Cluster {
    /// `n` coordinators, all up and empty, no leader.
    pub fn new(n: usize) -> Self {
        Cluster {
            coordinators: vec![
                SimCoordinator {
                    up: true,
                    state: ReplicatedState::default(),
                };
                n
            ],
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

    /// The next entry coordinator `c` has to apply, with its index.
    pub fn next_entry(&self, c: usize) -> Option<(u64, &Command)> {
        let index = self.coordinators.get(c)?.state.last_index + 1;
        let entry = self.log.get(usize::try_from(index - 1).ok()?)?;
        Some((index, entry))
    }
}
