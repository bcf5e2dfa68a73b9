//! One seeded run: the simulated world, the fault-phase step loop, and the
//! conversion of a broken invariant (or a panic in a core) into a
//! [`Failure`] carrying the seed and the trace.
//!
//! Each step: the clock moves, due messages reach the leader, background
//! activity happens with fixed chances (proxy rounds, snapshot deliveries,
//! followers catching up, the leader deciding and proposing), then one
//! weighted random event (a user change or a fault). Checkers run inside
//! those actions, so a run stops at the step that broke something.

use super::cluster::Cluster;
use super::config::SimConfig;
use super::invariants::{Check, Checkers};
use super::network::{Conditions, Network};
use super::proxy::SimProxy;
use super::rng::Rng;
use super::trace::{Failure, Trace};
use super::truth::Truth;
use super::world::World;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use switchyard_proto::model::{ConfigSnapshot, Resource};

/// Simulated epoch: far from 0 so no subtraction sits at the edge.
const START_MS: u64 = 1_000_000;
/// Machines' clocks differ by up to this much (a day).
const CLOCK_SPREAD_MS: u64 = 86_400_000;

/// What a run (or many) exercised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Seeds run.
    pub seeds: u64,
    /// Steps and heal rounds.
    pub steps: u64,
    /// Commit decisions on evidence (each checked by invariant 1).
    pub commits: u64,
    /// Commit decisions forced by a timeout.
    pub forced_commits: u64,
    /// Of `commits`, those carried by their apply's own entry.
    pub commits_with_apply: u64,
    /// Transitions abandoned.
    pub abandons: u64,
    /// Route changes applied (each supersedes any pending one).
    pub route_changes: u64,
    /// Guard applies with every backend warm.
    pub guard_applies: u64,
    /// Guard applies through the local wait limit.
    pub guard_forced: u64,
    /// Proxy crashes.
    pub proxy_crashes: u64,
    /// Coordinator crashes (leaders included).
    pub coordinator_crashes: u64,
    /// Leaderships.
    pub elections: u64,
    /// Proxies expired by a leader.
    pub expiries: u64,
    /// Messages lost.
    pub lost: u64,
    /// Messages duplicated.
    pub duplicated: u64,
    /// Leaders deposed while holding decisions.
    pub depositions: u64,
    /// Deposed leaders' decisions re-proposed in a later term.
    pub reproposals: u64,
    /// Routes deleted (and later created again).
    pub route_deletes: u64,
    /// EndpointSlices deleted.
    pub slice_deletes: u64,
    /// Services that reached the store after the route using them.
    pub late_services: u64,
    /// Users' applies that went in an entry with others.
    pub grouped_applies: u64,
}

impl SimStats {
    /// Adds another run's counts.
    pub fn add(&mut self, o: &SimStats) {
        self.seeds += o.seeds;
        self.steps += o.steps;
        self.commits += o.commits;
        self.forced_commits += o.forced_commits;
        self.commits_with_apply += o.commits_with_apply;
        self.abandons += o.abandons;
        self.route_changes += o.route_changes;
        self.guard_applies += o.guard_applies;
        self.guard_forced += o.guard_forced;
        self.proxy_crashes += o.proxy_crashes;
        self.coordinator_crashes += o.coordinator_crashes;
        self.elections += o.elections;
        self.expiries += o.expiries;
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.depositions += o.depositions;
        self.reproposals += o.reproposals;
        self.route_deletes += o.route_deletes;
        self.slice_deletes += o.slice_deletes;
        self.late_services += o.late_services;
        self.grouped_applies += o.grouped_applies;
    }
}

/// The random events of the fault phase, with their weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    RouteChange,
    EndpointChange,
    Flap,
    StaleSnapshot,
    GuardRecheck,
    ProxyCrash,
    ProxyRestart,
    ProxyPause,
    ProxyResume,
    CoordinatorCrash,
    LeaderCrash,
    CoordinatorRestart,
    Elect,
    Depose,
    Repropose,
    RouteDelete,
    SliceDelete,
    ServiceArrives,
    ClockJump,
    Quiet,
}

const EVENTS: &[(Event, u32)] = &[
    (Event::RouteChange, 3),
    (Event::EndpointChange, 1),
    (Event::Flap, 2),
    (Event::StaleSnapshot, 3),
    (Event::GuardRecheck, 4),
    (Event::ProxyCrash, 1),
    (Event::ProxyRestart, 2),
    (Event::ProxyPause, 1),
    (Event::ProxyResume, 2),
    (Event::CoordinatorCrash, 1),
    (Event::LeaderCrash, 1),
    (Event::CoordinatorRestart, 2),
    (Event::Elect, 3),
    (Event::Depose, 2),
    (Event::Repropose, 4),
    (Event::RouteDelete, 1),
    (Event::SliceDelete, 1),
    (Event::ServiceArrives, 2),
    (Event::ClockJump, 1),
    (Event::Quiet, 12),
];

/// The whole simulated world of one seed.
pub(super) struct Sim {
    pub seed: u64,
    pub config: SimConfig,
    pub rng: Rng,
    pub now_ms: u64,
    pub step: usize,
    pub healing: bool,
    pub world: World,
    pub cluster: Cluster,
    pub proxies: Vec<SimProxy>,
    pub network: Network,
    pub truth: Truth,
    pub checks: Checkers,
    pub trace: Trace,
    pub stats: SimStats,
    /// Snapshots by version (equal indexes give equal states, which
    /// invariant 4 checks), for fresh and stale deliveries alike.
    pub snapshots: BTreeMap<u64, Rc<ConfigSnapshot>>,
    /// Which run of which proxy each registration (log index) was for.
    pub registrations: BTreeMap<u64, (usize, u32)>,
    /// New backends' Services and slices not yet in the store.
    pub held_back: Vec<Vec<Resource>>,
    /// Users' applies waiting to go in one entry with the next user's
    /// (the leader's group commit).
    pub waiting_applies: Vec<Vec<Resource>>,
}

/// Runs one seed; `test` names the test binary for the reproduce line.
pub fn run_seed(seed: u64, config: &SimConfig, test: &str) -> Result<SimStats, Box<Failure>> {
    let mut sim = Sim::new(seed, config.clone());
    let outcome = catch_unwind(AssertUnwindSafe(|| sim.run()));
    let (invariant, detail) = match outcome {
        Ok(Ok(())) => return Ok(sim.final_stats()),
        Ok(Err(v)) => (v.invariant, v.detail),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic".into());
            ("panic in a core or the simulation", message)
        }
    };
    Err(Box::new(Failure {
        seed,
        profile: config.profile,
        invariant,
        step: sim.step,
        at_ms: sim.now_ms - START_MS,
        detail,
        trace: sim.trace.events(),
        test: test.to_string(),
    }))
}

impl Sim {
    fn new(seed: u64, config: SimConfig) -> Self {
        let mut rng = Rng::new(seed);
        let coordinators = rng.pick(config.coordinator_counts).copied().unwrap_or(3);
        let proxies = rng.range(config.proxies.0 as u64, config.proxies.1 as u64 + 1) as usize;
        let zones = 1 + rng.index(config.max_zones.min(proxies).max(1));
        // Every machine's monotonic clock started at another moment: no
        // two readings of different machines are comparable.
        let mut offset = || rng.range(0, CLOCK_SPREAD_MS);
        let offsets: Vec<u64> = (0..coordinators).map(|_| offset()).collect();
        let proxy_offsets: Vec<u64> = (0..proxies).map(|_| offset()).collect();
        let proxies = (0..proxies)
            .map(|n| SimProxy::new(n, format!("z{}", n % zones), &config, proxy_offsets[n]))
            .collect();
        Sim {
            seed,
            rng,
            now_ms: START_MS,
            step: 0,
            healing: false,
            world: World::default(),
            cluster: Cluster::new(offsets),
            proxies,
            network: Network::default(),
            truth: Truth::default(),
            checks: Checkers::default(),
            trace: Trace::default(),
            stats: SimStats::default(),
            snapshots: BTreeMap::new(),
            registrations: BTreeMap::new(),
            held_back: Vec::new(),
            waiting_applies: Vec::new(),
            config,
        }
    }

    fn run(&mut self) -> Check {
        if let Some(hook) = self.config.state_hook {
            hook();
        }
        self.note(format!(
            "seed {}: {} coordinators, {} proxies",
            self.seed,
            self.cluster.coordinators.len(),
            self.proxies.len()
        ));
        self.bootstrap()?;
        for _ in 0..self.config.steps {
            self.fault_step()?;
        }
        self.heal()
    }

    /// Records an event in the trace, stamped with step and time.
    pub fn note(&mut self, event: String) {
        let line = format!("[{} t=+{}] {event}", self.step, self.now_ms - START_MS);
        self.trace.push(line);
    }

    /// Network conditions of the current phase.
    pub fn conditions(&self) -> Conditions {
        if self.healing {
            Conditions {
                loss_permille: 0,
                dup_permille: 0,
                max_delay_ms: self.config.max_delay_ms.min(200),
            }
        } else {
            Conditions {
                loss_permille: self.config.loss_permille,
                dup_permille: self.config.dup_permille,
                max_delay_ms: self.config.max_delay_ms,
            }
        }
    }

    /// Ground truth catches up with the clock.
    pub fn observe_all(&mut self) {
        for (n, proxy) in self.proxies.iter().enumerate() {
            self.truth.observe(n, proxy, &self.world, self.now_ms);
        }
    }

    fn fault_step(&mut self) -> Check {
        self.step += 1;
        self.stats.steps += 1;
        let dt = if self.rng.chance(800) {
            self.rng.range(0, 150)
        } else {
            self.rng.range(150, 700)
        };
        self.now_ms += dt;
        self.observe_all();
        self.deliver()?;
        for p in 0..self.proxies.len() {
            if self.rng.chance(300) {
                self.proxy_round(p);
            }
            if self.rng.chance(200) {
                self.deliver_snapshot(p, false)?;
            }
        }
        for c in 0..self.cluster.coordinators.len() {
            if self.rng.chance(400) {
                let entries = self.rng.range(1, 4);
                self.catch_up(c, entries)?;
            }
        }
        if self.rng.chance(400) {
            self.leader_decide()?;
        }
        if self.rng.chance(500) {
            self.propose_deferred()?;
        }
        let weights: Vec<u32> = EVENTS.iter().map(|(_, w)| *w).collect();
        let event = EVENTS[self.rng.weighted(&weights)].0;
        self.event(event)?;
        self.observe_all();
        Ok(())
    }

    fn event(&mut self, event: Event) -> Check {
        let proxy = self.rng.index(self.proxies.len());
        let coordinator = self.rng.index(self.cluster.coordinators.len());
        match event {
            Event::RouteChange => self.route_change(),
            Event::EndpointChange => self.endpoint_change(),
            Event::Flap => {
                self.flap();
                Ok(())
            }
            Event::StaleSnapshot => self.deliver_snapshot(proxy, true),
            Event::GuardRecheck => self.guard_recheck(proxy),
            Event::ProxyCrash => {
                self.crash_proxy(proxy);
                Ok(())
            }
            Event::ProxyRestart => {
                self.restart_proxy(proxy);
                Ok(())
            }
            Event::ProxyPause => {
                self.pause_proxy(proxy, true);
                Ok(())
            }
            Event::ProxyResume => {
                self.pause_proxy(proxy, false);
                Ok(())
            }
            Event::CoordinatorCrash => {
                self.crash_coordinator(coordinator);
                Ok(())
            }
            Event::LeaderCrash => {
                if let Some(leader) = &self.cluster.leader {
                    let id = leader.id;
                    self.crash_coordinator(id);
                }
                Ok(())
            }
            Event::CoordinatorRestart => {
                self.restart_coordinator(coordinator);
                Ok(())
            }
            Event::Elect => self.elect(None),
            Event::Depose => self.depose_leader(),
            Event::Repropose => self.repropose_orphan(),
            Event::RouteDelete => self.route_delete(),
            Event::SliceDelete => self.slice_delete(),
            Event::ServiceArrives => self.service_arrives(),
            Event::ClockJump => {
                // Within lease bounds: a pause shorter than a TTL.
                let jump = self.rng.range(1_000, self.config.lease_ttl_ms);
                self.now_ms += jump;
                self.note(format!("clock jumps {jump}ms"));
                Ok(())
            }
            Event::Quiet => Ok(()),
        }
    }

    fn final_stats(&self) -> SimStats {
        let mut stats = self.stats.clone();
        stats.seeds = 1;
        stats.commits = self.checks.evidence.commits;
        stats.forced_commits = self.checks.evidence.forced;
        stats.guard_applies = self.checks.serving.warm_applies;
        stats.guard_forced = self.checks.serving.forced_applies;
        stats.elections = self.cluster.elections;
        stats.lost = self.network.lost;
        stats.duplicated = self.network.duplicated;
        stats
    }
}
