//! A simulated proxy: the real [`ApplyGuard`] around a model of the data
//! plane's warm-up, plus the control-plane client's choices (which
//! backends to keep warm and report, when to register).
//!
//! Mirrors `switchyard_proxy::control`: on a newer snapshot it keeps warm
//! the guard's `warming` set plus the served backends and reports on the
//! same set; it reports evidence, then heartbeats. One deliberate
//! difference: every snapshot the proxy receives — stale ones too — goes
//! through the guard, so the guard alone is tested for invariant 4 (the
//! real client also drops versions it has seen, a second line of defence).
//!
//! Not modelled: connection pools, load balancing, requests.

use super::config::{GuardHook, SimConfig};
use super::network::Message;
use super::rng::Rng;
use super::world::World;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use switchyard_coordinator::cutover::BackendEvidence;
use switchyard_proto::model::{BackendKey, ConfigSnapshot};
use switchyard_proxy::control::guard::{ApplyGuard, GuardReport};

/// Warm-up of one backend on one proxy.
#[derive(Debug, Clone)]
struct Warm {
    /// Endpoint generation being checked.
    target: u64,
    /// When the check of `target` completes.
    ready_at_ms: u64,
    /// What was known before (generation, passed), shown until then.
    before: (u64, bool),
    /// Endpoints in the set.
    endpoints: u32,
}

/// One proxy of the fleet.
#[derive(Debug, Clone)]
pub struct SimProxy {
    /// Proxy id (`p{n}`).
    pub id: String,
    /// Its zone.
    pub zone: String,
    /// Running (not crashed).
    pub up: bool,
    /// Stopped (`SIGSTOP`): sends nothing, receives nothing.
    pub paused: bool,
    /// Bumped on every restart.
    pub incarnation: u32,
    /// The real guard.
    pub guard: ApplyGuard,
    /// Newest snapshot version received.
    pub held_version: u64,
    /// Newest snapshot received.
    pub current: Option<Rc<ConfigSnapshot>>,
    /// Must (re)register before heartbeating.
    pub needs_register: bool,
    /// This run's registration (log index of its entry), 0 before one.
    pub registration: u64,
    /// Its monotonic clock reads the simulation's time plus this.
    pub clock_offset_ms: u64,
    warm: BTreeMap<BackendKey, Warm>,
    reported: BTreeSet<BackendKey>,
}

impl SimProxy {
    /// A started proxy that has nothing yet.
    pub fn new(n: usize, zone: String, config: &SimConfig, clock_offset_ms: u64) -> Self {
        SimProxy {
            id: format!("p{n}"),
            zone,
            up: true,
            paused: false,
            incarnation: 0,
            guard: new_guard(config.guard_wait_limit_ms, config.guard_hook),
            held_version: 0,
            current: None,
            needs_register: true,
            registration: 0,
            clock_offset_ms,
            warm: BTreeMap::new(),
            reported: BTreeSet::new(),
        }
    }

    /// Whether it takes part in anything right now.
    pub fn active(&self) -> bool {
        self.up && !self.paused
    }

    /// Crash: every piece of soft state is gone.
    pub fn crash(&mut self, config: &SimConfig) {
        self.up = false;
        self.paused = false;
        self.incarnation += 1;
        self.guard = new_guard(config.guard_wait_limit_ms, config.guard_hook);
        self.held_version = 0;
        self.current = None;
        self.registration = 0;
        self.warm.clear();
        self.reported.clear();
    }

    /// This proxy's clock at simulation time `now_ms`.
    pub fn clock(&self, now_ms: u64) -> u64 {
        now_ms + self.clock_offset_ms
    }

    /// Start again after a crash, from nothing.
    pub fn restart(&mut self) {
        self.up = true;
        self.needs_register = true;
    }

    /// What the data plane reports for `backend`: `None` unless it is kept
    /// warm.
    pub fn readiness(
        &self,
        backend: &BackendKey,
        world: &World,
        now_ms: u64,
    ) -> Option<BackendEvidence> {
        let w = self.warm.get(backend)?;
        let healthy = world.healthy(backend);
        let (generation, passed) = if now_ms < w.ready_at_ms {
            (w.before.0, w.before.1 && healthy)
        } else {
            (w.target, healthy)
        };
        Some(BackendEvidence {
            endpoints_generation: generation,
            healthy: if passed { w.endpoints } else { 0 },
            total: w.endpoints,
        })
    }

    /// Backends kept warm, with what each reports now.
    pub fn warm_backends<'a>(
        &'a self,
        world: &'a World,
        now_ms: u64,
    ) -> impl Iterator<Item = (&'a BackendKey, BackendEvidence)> + 'a {
        self.warm
            .keys()
            .filter_map(move |b| self.readiness(b, world, now_ms).map(|r| (b, r)))
    }

    /// The guard's notion of warm, from the data plane: a backend missing
    /// from `snapshot` counts as warm (the router answers 500 for it).
    pub fn is_warm(
        &self,
        snapshot: &ConfigSnapshot,
        backend: &BackendKey,
        world: &World,
        now_ms: u64,
    ) -> bool {
        match snapshot.endpoint_generation(backend) {
            None => true,
            Some(generation) => self
                .readiness(backend, world, now_ms)
                .is_some_and(|r| r.ready_at(generation)),
        }
    }

    /// Takes a snapshot from the watch stream. Returns true when it is
    /// newer than anything held (it becomes the current one).
    pub fn receive(
        &mut self,
        snapshot: Rc<ConfigSnapshot>,
        world: &World,
        now_ms: u64,
        rng: &mut Rng,
        config: &SimConfig,
    ) -> bool {
        if snapshot.version <= self.held_version {
            return false;
        }
        self.held_version = snapshot.version;
        self.current = Some(snapshot);
        self.keep_warm(world, now_ms, rng, config);
        true
    }

    /// Runs the guard on `snapshot`. The caller checks the report against
    /// ground truth, then calls [`SimProxy::keep_warm`] if it applied
    /// anything (as the real client re-installs after an apply).
    pub fn run_guard(
        &mut self,
        snapshot: &ConfigSnapshot,
        world: &World,
        now_ms: u64,
    ) -> GuardReport {
        // The guard is taken out so the warmth closure can borrow the rest.
        let mut guard = std::mem::take(&mut self.guard);
        let this = &*self;
        let warm = |b: &BackendKey| this.is_warm(snapshot, b, world, now_ms);
        // The guard runs on this proxy's own clock.
        let report = guard.decide(snapshot, &warm, self.clock(now_ms));
        self.guard = guard;
        report
    }

    /// What one round of the membership loop sends.
    pub fn round(&self, world: &World, now_ms: u64) -> Vec<Message> {
        let proxy = self.number();
        if self.needs_register {
            return vec![Message::Register {
                proxy,
                incarnation: self.incarnation,
            }];
        }
        let registration = self.registration;
        let backends: Vec<(BackendKey, BackendEvidence)> = self
            .reported
            .iter()
            .filter_map(|b| self.readiness(b, world, now_ms).map(|r| (b.clone(), r)))
            .collect();
        // Like the real client: a report even when empty (each replaces the
        // previous one on the leader), then a heartbeat.
        vec![
            Message::Report {
                proxy,
                registration,
                backends,
            },
            Message::Heartbeat {
                proxy,
                registration,
                applied: self.guard.generations(),
            },
        ]
    }

    fn number(&self) -> usize {
        self.id[1..].parse().unwrap_or(usize::MAX)
    }

    /// Served backends plus the guard's warming set of the current
    /// snapshot: start warming new ones, re-check changed endpoint sets,
    /// retire the rest (which then report nothing).
    pub fn keep_warm(&mut self, world: &World, now_ms: u64, rng: &mut Rng, config: &SimConfig) {
        let Some(snapshot) = self.current.clone() else {
            return;
        };
        let mut wanted = self.guard.warming(&snapshot);
        for route in self.guard.routes() {
            wanted.extend(route.traffic_backends());
        }
        self.warm.retain(|b, _| wanted.contains(b));
        for backend in &wanted {
            // A backend without a Service has no pool to warm.
            let Some(generation) = snapshot.endpoint_generation(backend) else {
                continue;
            };
            let endpoints = world
                .backends
                .get(World::number(backend).unwrap_or(usize::MAX))
                .map_or(1, |b| b.endpoints);
            let ready_at_ms = now_ms + rng.range(0, config.max_warm_ms + 1);
            let before = self
                .readiness(backend, world, now_ms)
                .map_or((0, false), |r| (r.endpoints_generation, r.healthy > 0));
            match self.warm.get_mut(backend) {
                Some(w) if w.target == generation => {}
                Some(w) => {
                    *w = Warm {
                        target: generation,
                        ready_at_ms,
                        before,
                        endpoints,
                    }
                }
                None => {
                    self.warm.insert(
                        backend.clone(),
                        Warm {
                            target: generation,
                            ready_at_ms,
                            before: (0, false),
                            endpoints,
                        },
                    );
                }
            }
        }
        self.reported = wanted;
    }
}

fn new_guard(wait_limit_ms: u64, hook: Option<GuardHook>) -> ApplyGuard {
    let mut guard = ApplyGuard::new(wait_limit_ms);
    if let Some(hook) = hook {
        hook(&mut guard);
    }
    guard
}
