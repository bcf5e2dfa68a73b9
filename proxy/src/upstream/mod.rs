//! The upstream side: every backend the proxy serves or warms, their
//! endpoints, and how a request reaches one.
//!
//! Layering, from the request's point of view:
//!
//! 1. [`Backend::select`] — which endpoint: healthy by the proxy's own
//!    checks, not ejected, not tried yet; power of two choices on
//!    outstanding requests ([`balance`]).
//! 2. [`endpoint::Endpoint::checkout`] — a keep-alive connection to it,
//!    obtained before the request is handed over so a connect failure can
//!    be retried elsewhere.
//! 3. [`forward::forward`] — send with the request timeout, retry only
//!    what never left, feed outcomes to outlier ejection, return the
//!    connection to the pool when the response body ends.
//!
//! [`Upstreams`] keeps the set of tracked backends equal to "served ∪
//! warming" and their endpoints equal to the snapshot ([`discovery`]);
//! health checks ([`health`]) run for each endpoint — one per `ip:port`
//! and health path, shared by every backend listing it (`shared`). It does not route:
//! which backend a request goes to is the router's decision.

pub mod balance;
pub mod discovery;
pub mod endpoint;
pub mod forward;
mod grpc_health;
pub mod health;
pub mod mirror;
pub mod outlier;
mod shared;
mod tls;

use crate::metrics::{BackendLabels, Metrics, RequestCounterCache, backend_labels};
use crate::settings::DataPlaneSettings;
use arc_swap::ArcSwap;
use discovery::EndpointSet;
use endpoint::Endpoint;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use switchyard_proto::model::gateway_api::BackendTransport;
use switchyard_proto::model::{BackendKey, ConfigSnapshot};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, warn};

/// A backend's readiness as this proxy's data path sees it: the model's
/// readiness evidence (what the proxy reports to the leader).
pub type BackendReadiness = switchyard_proto::model::BackendEvidence;

/// What every upstream component shares: settings, metrics, the readiness
/// change signal, and where to spawn tasks.
#[derive(Debug)]
pub struct Context {
    /// Data plane settings.
    pub settings: DataPlaneSettings,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    readiness: watch::Sender<u64>,
    runtime: Option<Handle>,
}

impl Context {
    /// Builds the context; `runtime` is where health checks and connection
    /// tasks run (the current runtime when `None`).
    pub fn new(
        settings: DataPlaneSettings,
        metrics: Arc<Metrics>,
        runtime: Option<Handle>,
    ) -> Self {
        Context {
            settings,
            metrics,
            readiness: watch::channel(0).0,
            runtime,
        }
    }

    /// A receiver that changes whenever some backend's readiness does.
    pub fn readiness_changes(&self) -> watch::Receiver<u64> {
        self.readiness.subscribe()
    }

    pub(crate) fn notify_readiness(&self) {
        self.readiness.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Spawns a background task; `None` (and a warning) outside a runtime.
    pub(crate) fn spawn<F>(&self, fut: F) -> Option<tokio::task::AbortHandle>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        if let Some(handle) = &self.runtime {
            return Some(handle.spawn(fut).abort_handle());
        }
        match Handle::try_current() {
            Ok(handle) => Some(handle.spawn(fut).abort_handle()),
            Err(_) => {
                warn!("no Tokio runtime: background task not started");
                None
            }
        }
    }
}

/// Identity of a backend, as its endpoints know their users.
#[derive(Debug)]
pub struct BackendInfo {
    /// `namespace/name:port`.
    pub key: BackendKey,
    /// Metric labels, built once.
    pub labels: BackendLabels,
}

/// One tracked backend and its current endpoints.
#[derive(Debug)]
pub struct Backend {
    info: Arc<BackendInfo>,
    ctx: Arc<Context>,
    endpoints: ArcSwap<Vec<Arc<Endpoint>>>,
    generation: AtomicU64,
    /// Whether it was last resolved as a GRPCRoute's backend.
    grpc: AtomicBool,
    request_counters: RequestCounterCache,
    /// Its series of the upstream latency histogram, resolved on first use
    /// (families never drop a series, so the handle stays the exported
    /// one): no label hashing per request.
    latency: std::sync::OnceLock<prometheus_client::metrics::histogram::Histogram>,
}

impl Backend {
    fn new(key: BackendKey, ctx: Arc<Context>) -> Backend {
        Backend {
            info: Arc::new(BackendInfo {
                labels: backend_labels(&key),
                key,
            }),
            ctx,
            endpoints: ArcSwap::from_pointee(Vec::new()),
            generation: AtomicU64::new(0),
            grpc: AtomicBool::new(false),
            request_counters: RequestCounterCache::default(),
            latency: std::sync::OnceLock::new(),
        }
    }

    /// Request counters of this backend, by route and status class.
    pub fn request_counters(&self) -> &RequestCounterCache {
        &self.request_counters
    }

    /// Records one upstream response time.
    pub fn observe_latency(&self, seconds: f64) {
        self.latency
            .get_or_init(|| {
                self.ctx
                    .metrics
                    .upstream_latency
                    .get_or_create(&self.info.labels)
                    .clone()
            })
            .observe(seconds);
    }

    /// `namespace/name:port`.
    pub fn key(&self) -> &BackendKey {
        &self.info.key
    }

    /// Metric labels.
    pub fn labels(&self) -> &BackendLabels {
        &self.info.labels
    }

    /// Shared context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Current endpoints.
    pub fn endpoints(&self) -> Arc<Vec<Arc<Endpoint>>> {
        self.endpoints.load_full()
    }

    /// Picks an endpoint for one attempt, skipping `tried`. Candidates are
    /// healthy endpoints not ejected; when outlier ejection has taken out
    /// every healthy one, the healthy ones are used anyway (ejecting a whole
    /// backend would turn a partial failure into a total one).
    pub fn select(&self, tried: &[SocketAddr]) -> Option<Arc<Endpoint>> {
        // Counted, then the two drawn found by position: no list of
        // candidates or loads is allocated per request.
        let endpoints = self.endpoints.load();
        let now = Instant::now();
        let healthy = |e: &Arc<Endpoint>| e.is_healthy() && !tried.contains(&e.addr);
        let active = |e: &Arc<Endpoint>| healthy(e) && !e.is_ejected(now);
        let mut eligible: &dyn Fn(&Arc<Endpoint>) -> bool = &active;
        let (mut n, mut first) = count_first(&endpoints, &active);
        if n == 0 {
            eligible = &healthy;
            (n, first) = count_first(&endpoints, &healthy);
        }
        // One candidate (the common case of a one-endpoint backend, or the
        // last one standing): no second pass, which would take each
        // endpoint's outlier lock again.
        if n == 1 {
            return first.cloned();
        }
        let nth = |i: usize| endpoints.iter().filter(|e| eligible(e)).nth(i);
        let pick = balance::p2c_by(n, rand::random(), |i| {
            nth(i).map_or(usize::MAX, |e| e.outstanding())
        })?;
        nth(pick).cloned()
    }

    /// Readiness as of now.
    pub fn readiness(&self) -> BackendReadiness {
        let endpoints = self.endpoints.load();
        // Evidence: healthy by a probe of its own (a seeded endpoint takes
        // traffic before, see `Endpoint::is_vouched`).
        let healthy = endpoints
            .iter()
            .filter(|e| e.is_healthy() && e.is_vouched())
            .count();
        BackendReadiness {
            endpoints_generation: self.generation.load(Ordering::Relaxed),
            healthy: u32::try_from(healthy).unwrap_or(u32::MAX),
            total: u32::try_from(endpoints.len()).unwrap_or(u32::MAX),
        }
    }

    /// Makes the endpoint list equal to `set`: endpoints that stay keep
    /// their pools and health; new ones come from `shared` (an endpoint
    /// another backend already checks is used as it is, a new one starts
    /// unchecked with a health task); gone ones are let go (the last user
    /// retires them: they drain).
    fn update(&self, set: EndpointSet, shared: &shared::SharedEndpoints) {
        let current = self.endpoints.load_full();
        let mut next = Vec::with_capacity(set.addrs.len());
        let mut changed = false;
        for addr in &set.addrs {
            let same_addr = current.iter().find(|e| e.addr == *addr);
            if let Some(existing) = same_addr.filter(|e| {
                e.health_path() == set.health_path
                    && e.protocol() == set.protocol
                    && *e.transport() == set.transport
            }) {
                next.push(Arc::clone(existing));
                continue;
            }
            // Health carries over to a new health path, protocol or
            // transport of the same address, so an active route keeps
            // sending traffic there; it counts as readiness evidence only
            // once a probe over the new data path passed (`is_vouched`).
            // Never to an endpoint that will not be connected to.
            let seed = same_addr.filter(|_| !matches!(set.transport, BackendTransport::Refused(_)));
            let ep = shared.acquire(&self.ctx, *addr, &set, &self.info, seed.map(|e| &**e));
            changed |= !(ep.is_healthy() && ep.is_vouched()) || same_addr.is_none();
            next.push(ep);
        }
        changed |= next.len() != current.len()
            || self.generation.load(Ordering::Relaxed) != set.generation;
        let kept = |e: &Arc<Endpoint>| next.iter().any(|n| Arc::ptr_eq(n, e));
        let gone: Vec<Arc<Endpoint>> = current.iter().filter(|e| !kept(e)).cloned().collect();
        self.endpoints.store(Arc::new(next));
        self.generation.store(set.generation, Ordering::Relaxed);
        for gone in gone {
            debug!(backend = %self.info.key, endpoint = %gone.addr, "endpoint removed");
            gone.remove_user(&self.info);
            changed = true;
        }
        if changed {
            self.ctx.notify_readiness();
        }
    }

    /// Stops health checks and closes idle connections. Requests that still
    /// hold the backend (routed by the previous table) complete; their
    /// connections close when they end.
    fn retire(&self) {
        for ep in self.endpoints.load().iter() {
            ep.remove_user(&self.info);
        }
        self.ctx.metrics.healthy_endpoints.remove(&self.info.labels);
    }
}

/// How many of `endpoints` pass `eligible`, and the first that does.
fn count_first<'e>(
    endpoints: &'e [Arc<Endpoint>],
    eligible: &dyn Fn(&Arc<Endpoint>) -> bool,
) -> (usize, Option<&'e Arc<Endpoint>>) {
    let mut first = None;
    let mut n = 0;
    for e in endpoints.iter().filter(|e| eligible(e)) {
        first.get_or_insert(e);
        n += 1;
    }
    (n, first)
}

/// Every backend the proxy tracks (served or warming).
#[derive(Debug)]
pub struct Upstreams {
    ctx: Arc<Context>,
    backends: Mutex<BTreeMap<BackendKey, Arc<Backend>>>,
    shared: shared::SharedEndpoints,
}

/// Backends that left the tracked set in a [`Upstreams::sync`]; retire them
/// with [`Retired::retire`] once no new request can be routed to them.
#[derive(Debug, Default)]
#[must_use = "retire the removed backends after swapping the route table"]
pub struct Retired(Vec<Arc<Backend>>);

impl Retired {
    /// Retires them (drain: in-flight requests finish).
    pub fn retire(self) {
        for backend in self.0 {
            debug!(backend = %backend.key(), "backend no longer served or warming");
            backend.retire();
        }
        // Readiness of the removed backends disappeared.
    }
}

impl Upstreams {
    /// No backends yet.
    pub fn new(ctx: Arc<Context>) -> Upstreams {
        Upstreams {
            ctx,
            backends: Mutex::new(BTreeMap::new()),
            shared: shared::SharedEndpoints::default(),
        }
    }

    /// Shared context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Tracks exactly `wanted`, with endpoints from `snapshot`, speaking
    /// gRPC to those in `grpc`; returns the backends that are no longer
    /// wanted.
    pub fn sync(
        &self,
        snapshot: &ConfigSnapshot,
        wanted: &BTreeSet<BackendKey>,
        grpc: &HashSet<BackendKey>,
    ) -> Retired {
        // Built only if some backend needs resolving: an install that moved
        // no endpoint indexes nothing.
        let mut discovery = None;
        let mut backends = self.backends.lock().unwrap_or_else(PoisonError::into_inner);
        for key in wanted {
            let backend = match backends.get(key) {
                Some(backend) => backend,
                None => backends
                    .entry(key.clone())
                    .or_insert_with(|| Arc::new(Backend::new(key.clone(), Arc::clone(&self.ctx)))),
            };
            // The coordinators bump a Service's endpoint generation on every
            // change to it or to any of its slices: the same non-zero
            // generation is the same endpoint set. (0 is a configuration
            // from a file, which carries no generations: always resolved.)
            // A backend a GRPCRoute starts or stops using changes protocol
            // with the same endpoints.
            let generation = snapshot.endpoint_generations.of(&key.service);
            let is_grpc = grpc.contains(key);
            if generation != 0
                && backend.generation.load(Ordering::Relaxed) == generation
                && backend.grpc.load(Ordering::Relaxed) == is_grpc
            {
                continue;
            }
            let discovery = discovery.get_or_insert_with(|| discovery::Discovery::new(snapshot));
            backend.grpc.store(is_grpc, Ordering::Relaxed);
            backend.update(discovery.resolve(key, is_grpc), &self.shared);
        }
        let gone: Vec<BackendKey> = backends
            .keys()
            .filter(|k| !wanted.contains(*k))
            .cloned()
            .collect();
        let retired: Vec<Arc<Backend>> = gone.iter().filter_map(|k| backends.remove(k)).collect();
        if !retired.is_empty() {
            self.ctx.notify_readiness();
        }
        self.shared.sweep();
        Retired(retired)
    }

    /// Distinct endpoints alive: one per `ip:port` and health path, however
    /// many backends list it.
    pub fn endpoint_count(&self) -> usize {
        self.shared.len()
    }

    /// The tracked backends among `keys`.
    pub fn lookup(&self, keys: &BTreeSet<BackendKey>) -> BTreeMap<BackendKey, Arc<Backend>> {
        let backends = self.backends.lock().unwrap_or_else(PoisonError::into_inner);
        keys.iter()
            .filter_map(|k| backends.get(k).map(|b| (k.clone(), Arc::clone(b))))
            .collect()
    }

    /// Readiness of one tracked backend.
    pub fn readiness(&self, key: &BackendKey) -> Option<BackendReadiness> {
        let backends = self.backends.lock().unwrap_or_else(PoisonError::into_inner);
        backends.get(key).map(|b| b.readiness())
    }

    /// Readiness of every tracked backend.
    pub fn readiness_all(&self) -> Vec<(BackendKey, BackendReadiness)> {
        let backends = self.backends.lock().unwrap_or_else(PoisonError::into_inner);
        backends
            .iter()
            .map(|(k, b)| (k.clone(), b.readiness()))
            .collect()
    }
}
