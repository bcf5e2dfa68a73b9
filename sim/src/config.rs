//! Knobs of a simulation run: the size of the world, timings, fault rates,
//! the two profiles (default and long), and the hooks the broken-core tests
//! use to flip a test-only switch in a fresh core.
//!
//! Every per-seed choice (how many coordinators, proxies, zones) is drawn
//! from these ranges by the run itself, so one seed fixes everything.

use switchyard_coordinator::cutover::CutoverEngine;
use switchyard_proxy::control::guard::ApplyGuard;

/// Called on every engine the simulation creates (each new leader).
pub type EngineHook = fn(&mut CutoverEngine);
/// Called on every guard the simulation creates (each proxy start).
pub type GuardHook = fn(&mut ApplyGuard);
/// Called once at the start of each seed, on the thread that runs it (the
/// state machine's test-only switches are per thread).
pub type StateHook = fn();

/// Everything that shapes a run besides its seed.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Profile name, for messages.
    pub profile: &'static str,
    /// Fault-phase steps per seed.
    pub steps: usize,
    /// Coordinator group sizes to choose from.
    pub coordinator_counts: &'static [usize],
    /// Fewest and most proxies.
    pub proxies: (usize, usize),
    /// Most zones (at least 1 is used).
    pub max_zones: usize,
    /// Routes, created together in the first log entry.
    pub routes: usize,
    /// Backends created in the first log entry.
    pub initial_backends: usize,
    /// Cap on backends, counting brand-new ones created by route changes.
    pub max_backends: usize,
    /// Lease TTL of the engine.
    pub lease_ttl_ms: u64,
    /// Longest a proxy message stays in flight (must stay below the TTL).
    pub max_delay_ms: u64,
    /// Fault phase: chance a message is lost, per mille.
    pub loss_permille: u32,
    /// Fault phase: chance a message is delivered twice, per mille.
    pub dup_permille: u32,
    /// The guard's local wait limit.
    pub guard_wait_limit_ms: u64,
    /// Shortest and longest cutover timeout a route change asks for.
    pub cutover_timeout_ms: (u64, u64),
    /// Longest a proxy takes to warm a backend after it is told to.
    pub max_warm_ms: u64,
    /// Clock advance of one heal round.
    pub heal_round_ms: u64,
    /// Installs faults in each new engine (broken-core tests only).
    pub engine_hook: Option<EngineHook>,
    /// Installs faults in each new guard (broken-core tests only).
    pub guard_hook: Option<GuardHook>,
    /// Installs faults in the state machine (broken-core tests only).
    pub state_hook: Option<StateHook>,
}

impl SimConfig {
    /// A few hundred steps on a small world: the per-commit profile.
    pub fn default_profile() -> Self {
        SimConfig {
            profile: "default",
            steps: 250,
            coordinator_counts: &[3, 3, 5],
            proxies: (2, 5),
            max_zones: 3,
            routes: 3,
            initial_backends: 4,
            max_backends: 10,
            lease_ttl_ms: 3_000,
            max_delay_ms: 800,
            loss_permille: 60,
            dup_permille: 30,
            guard_wait_limit_ms: 4_000,
            cutover_timeout_ms: (2_000, 9_000),
            max_warm_ms: 2_500,
            heal_round_ms: 250,
            engine_hook: None,
            guard_hook: None,
            state_hook: None,
        }
    }

    /// Longer schedules on a slightly bigger world.
    pub fn long_profile() -> Self {
        SimConfig {
            profile: "long",
            steps: 1_000,
            proxies: (2, 7),
            routes: 4,
            max_backends: 14,
            ..Self::default_profile()
        }
    }

    /// `long` when `SWITCHYARD_CHAOS_PROFILE=long`, else the default.
    pub fn from_env() -> Self {
        match std::env::var("SWITCHYARD_CHAOS_PROFILE").as_deref() {
            Ok("long") => Self::long_profile(),
            _ => Self::default_profile(),
        }
    }

    /// Time the heal phase runs: every deadline passes, every lease can
    /// expire and be renewed, every guard wait can run out, with margin.
    pub fn heal_ms(&self) -> u64 {
        self.cutover_timeout_ms.1 + 3 * self.lease_ttl_ms + self.guard_wait_limit_ms + 3_000
    }

    /// How old a fact may be and still count as current evidence for
    /// invariant 1: a report may be in flight for `max_delay_ms`, and the
    /// engine counts it for one lease TTL after it arrives.
    pub fn evidence_window_ms(&self) -> u64 {
        self.lease_ttl_ms + self.max_delay_ms
    }
}
