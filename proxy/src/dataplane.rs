//! [`DataPlane`]: the proxy's one stateful object. The control plane (or a
//! test) installs configurations and warming sets and reads readiness;
//! `serve` runs the listeners.
//!
//! Hot path: the route table and the backends it routes to are one
//! immutable `Served` snapshot behind `arc-swap` (each new table reuses
//! the previous one's unchanged routes: `RouteTable::compile_after`), so a request sees a
//! table and backends that belong together, without locks. Control path:
//! `install` and `set_warming` serialise on a mutex, bring backends in
//! *before* the new table is visible, and retire backends that left
//! *after*.
//!
//! Not here: talking to coordinators (the control module), routing rules
//! (the router), connection handling (the server).

use crate::access_log::{AccessLog, AccessLogTarget};
use crate::metrics::Metrics;
use crate::router::RouteTable;
use crate::server::sockets::{Listeners, SocketTable};
use crate::server::{self};
use crate::settings::DataPlaneSettings;
use crate::upstream::mirror::MirrorLimiter;
use crate::upstream::{Backend, Context, Upstreams};
use arc_swap::ArcSwapOption;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, HttpRoute, ListenerBinding, RouteKind};
use tokio::sync::watch;
use tracing::{debug, info, warn};

pub use crate::upstream::BackendReadiness;

/// What the proxy serves: the latest snapshot plus the one HTTPRoute
/// generation per route the control plane chose (routes whose backends the
/// proxy has warmed). `snapshot.routes` is not read.
#[derive(Debug, Clone)]
pub struct ServingConfig {
    /// Gateways, Services, EndpointSlices, grants, namespaces.
    pub snapshot: Arc<ConfigSnapshot>,
    /// The route specs to serve.
    pub routes: Vec<HttpRoute>,
}

/// One installed configuration as the hot path sees it.
#[derive(Debug)]
pub(crate) struct Served {
    /// Compiled routes.
    pub table: RouteTable,
    /// Every backend `table` can send traffic or mirrors to.
    pub backends: BTreeMap<BackendKey, Arc<Backend>>,
}

#[derive(Debug, Default)]
struct ControlState {
    snapshot: Option<Arc<ConfigSnapshot>>,
    served: BTreeSet<BackendKey>,
    warming: BTreeSet<BackendKey>,
    /// Backends spoken to as gRPC: those of the served GRPCRoutes and of
    /// the snapshot's GRPCRoute generations ([`grpc_backends`]).
    grpc: HashSet<BackendKey>,
}

/// Whether the leader counts this proxy, as far as the proxy knows, and
/// under which registration: the log index of its `Register` entry
/// (`RegisterReply.registration`; 0 before the first, and with no
/// coordinators). Cutovers committed before that entry went without this
/// proxy, so it serves for readiness only a configuration at least that
/// new ([`DataPlane::mark_served_through`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Registered, or never told otherwise: a proxy that cannot reach any
    /// coordinator keeps serving what it has.
    Counted { registration: u64 },
    /// The leader answered that it does not know this registration.
    Dropped { registration: u64 },
    /// Registered again after being dropped; counted once it serves every
    /// route at its committed generation in a configuration at least as
    /// new as the registration.
    Rejoined { registration: u64 },
}

impl Standing {
    /// The registration this standing is under.
    fn registration(self) -> u64 {
        match self {
            Standing::Counted { registration }
            | Standing::Dropped { registration }
            | Standing::Rejoined { registration } => registration,
        }
    }
}

/// The data plane. Create with [`DataPlane::new`], feed with
/// [`DataPlane::install`], run with [`DataPlane::serve`].
#[derive(Debug)]
pub struct DataPlane {
    ctx: Arc<Context>,
    upstreams: Upstreams,
    served: ArcSwapOption<Served>,
    control: Mutex<ControlState>,
    mirrors: MirrorLimiter,
    /// Turns true once the first configuration is served whole (see
    /// [`DataPlane::mark_synced`]); a watch so that sockets waiting to
    /// listen ([`Listeners::bind`]) learn of it.
    synced: watch::Sender<bool>,
    /// Whether the leader counts this proxy, as far as this proxy knows
    /// ([`Standing`]).
    standing: Mutex<Standing>,
    /// Which listener sockets `serve` bound.
    sockets: SocketTable,
    /// The access log, once opened; read per request.
    access_log: OnceLock<AccessLog>,
}

/// How long the access log's last flush may take when `serve` returns.
const ACCESS_LOG_FINAL_FLUSH: Duration = Duration::from_secs(5);

impl DataPlane {
    /// Creates a data plane with no configuration (it answers 503 until
    /// the first [`install`](Self::install)) and registers its metrics.
    /// Background tasks run on the current Tokio runtime if there is one,
    /// else on whichever runtime later calls `install`.
    pub fn new(settings: DataPlaneSettings, registry: &mut Registry) -> Arc<DataPlane> {
        let metrics = Arc::new(Metrics::register(registry));
        let mirrors = MirrorLimiter::new(settings.max_mirrors_in_flight);
        let runtime = tokio::runtime::Handle::try_current().ok();
        let ctx = Arc::new(Context::new(settings, metrics, runtime));
        Arc::new(DataPlane {
            upstreams: Upstreams::new(Arc::clone(&ctx)),
            ctx,
            served: ArcSwapOption::empty(),
            control: Mutex::new(ControlState::default()),
            mirrors,
            synced: watch::Sender::new(false),
            standing: Mutex::new(Standing::Counted { registration: 0 }),
            sockets: SocketTable::default(),
            access_log: OnceLock::new(),
        })
    }

    /// Starts the access log: one JSON line per request to `target` (see
    /// [`crate::access_log`]). Off until called; call it before
    /// [`serve`](Self::serve). Fails if the file cannot be opened or an
    /// access log is open already.
    pub fn open_access_log(&self, target: &AccessLogTarget) -> io::Result<()> {
        let log = AccessLog::open(target, &self.ctx.metrics)?;
        self.access_log.set(log).map_err(|_| {
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the access log is open already",
            )
        })
    }

    /// Compiles `config`, brings its backends (and the warming ones) up to
    /// date, swaps the route table atomically, then retires backends that
    /// are neither served nor warming (they drain).
    pub fn install(&self, config: ServingConfig) {
        let started = std::time::Instant::now();
        let previous = self.served.load_full();
        let table = RouteTable::compile_after(
            previous.as_deref().map(|s| &s.table),
            &config.snapshot,
            &config.routes,
        );
        drop(previous);
        let stats = table.compile_stats();
        self.ctx
            .metrics
            .routes_compiled
            .inc_by(stats.compiled as u64);
        self.ctx.metrics.routes_reused.inc_by(stats.reused as u64);
        for note in table.notes() {
            debug!(route = %note.route, note = %note.message, "route compile note");
        }
        let version = config.snapshot.version;
        let served_keys = table.backends();
        let mut control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        let wanted: BTreeSet<BackendKey> = served_keys.union(&control.warming).cloned().collect();
        // Backends tracked only for the previous warming set (until
        // `set_warming` replaces it) keep the protocol they were resolved
        // with: requests routed by the previous table may still reach them.
        let mut grpc = grpc_backends(&config);
        grpc.extend(
            control
                .warming
                .iter()
                .filter(|b| control.grpc.contains(*b))
                .cloned(),
        );
        control.grpc = grpc;
        let retired = self
            .upstreams
            .sync(&config.snapshot, &wanted, &control.grpc);
        let backends = self.upstreams.lookup(&served_keys);
        self.served
            .store(Some(Arc::new(Served { table, backends })));
        control.snapshot = Some(config.snapshot);
        control.served = served_keys;
        retired.retire();
        drop(control);
        self.ctx
            .metrics
            .config_version
            .set(i64::try_from(version).unwrap_or(i64::MAX));
        let seconds = started.elapsed().as_secs_f64();
        self.ctx.metrics.install_seconds.observe(seconds);
        info!(
            version,
            routes = config.routes.len(),
            compiled = stats.compiled,
            reused = stats.reused,
            seconds,
            "configuration installed"
        );
    }

    /// Backends to keep warm besides the served ones (pending
    /// transitions): pools and health checks run for them. Takes effect
    /// with the latest installed snapshot; before the first `install`, it
    /// is remembered for it.
    pub fn set_warming(&self, backends: BTreeSet<BackendKey>) {
        let mut control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        control.warming = backends;
        let Some(snapshot) = control.snapshot.clone() else {
            return;
        };
        let wanted: BTreeSet<BackendKey> =
            control.served.union(&control.warming).cloned().collect();
        // Served backends are in `wanted`, so the served table's backends
        // stay the same objects; only warming ones come and go.
        self.upstreams
            .sync(&snapshot, &wanted, &control.grpc)
            .retire();
    }

    /// Readiness of one backend (served or warming) through the real data
    /// path; `None` when the backend is neither.
    pub fn readiness(&self, backend: &BackendKey) -> Option<BackendReadiness> {
        self.upstreams.readiness(backend)
    }

    /// Readiness of every backend served or warming.
    pub fn readiness_all(&self) -> Vec<(BackendKey, BackendReadiness)> {
        self.upstreams.readiness_all()
    }

    /// Distinct upstream endpoints the proxy keeps (one health check and one
    /// pool each): one per `ip:port` and health path, however many
    /// Services list it.
    pub fn endpoint_count(&self) -> usize {
        self.upstreams.endpoint_count()
    }

    /// Changes whenever any backend's readiness changes.
    pub fn readiness_changes(&self) -> watch::Receiver<u64> {
        self.ctx.readiness_changes()
    }

    /// Mirror copies in flight (they run detached from the requests that
    /// caused them).
    pub fn mirrors_in_flight(&self) -> usize {
        self.mirrors.in_flight()
    }

    /// Whether a configuration has been installed.
    pub fn has_config(&self) -> bool {
        self.served.load().is_some()
    }

    /// Records that every route of the configuration is now served at its
    /// committed generation (none waits for warm-up): from here on the
    /// proxy is ready for traffic. It stays ready through later cutovers,
    /// during which the previous generation keeps serving.
    /// Called only with a configuration installed: by a proxy without
    /// coordinators directly, with them through
    /// [`DataPlane::mark_served_through`].
    pub fn mark_synced(&self) {
        // Called after every apply round; only the first one is news.
        self.synced
            .send_if_modified(|synced| !std::mem::replace(synced, true));
    }

    /// Records that every route of the configuration at version `through`
    /// is served at its committed generation. Counts for readiness only
    /// if that configuration is at least as new as the proxy's
    /// registration ([`DataPlane::mark_registered`]): then the proxy is synced
    /// ([`DataPlane::mark_synced`]) and, if it had registered again after
    /// the leader dropped it, counted again — returns true then, which is
    /// news.
    pub fn mark_served_through(&self, through: u64) -> bool {
        let mut standing = self.standing();
        let registration = standing.registration();
        if through < registration {
            return false;
        }
        self.mark_synced();
        match *standing {
            Standing::Rejoined { registration } => {
                *standing = Standing::Counted { registration };
                true
            }
            // A dropped proxy waits to be registered again.
            Standing::Dropped { .. } | Standing::Counted { .. } => false,
        }
    }

    /// Records that the proxy is registered, by the log entry at
    /// `registration` (`RegisterReply.registration`): the least version a
    /// configuration must have to count for readiness from here on. A
    /// proxy the leader had dropped is registered again, not yet counted.
    pub fn mark_registered(&self, registration: u64) {
        let mut standing = self.standing();
        *standing = match *standing {
            Standing::Counted { .. } => Standing::Counted { registration },
            Standing::Dropped { .. } | Standing::Rejoined { .. } => {
                Standing::Rejoined { registration }
            }
        };
    }

    /// Records that the leader answered that it does not know this
    /// proxy's registration: its lease ran out (a long pause, an overloaded
    /// node), so cutovers may have been committed without its evidence, and
    /// routes it still serves at their previous generation may point at
    /// backends already gone. `/ready` answers 503 — a load balancer takes
    /// the proxy out — until it is registered again
    /// ([`DataPlane::mark_registered`]) and serves every route at its
    /// committed generation in a configuration at least as new as that
    /// registration ([`DataPlane::mark_served_through`]).
    pub fn mark_dropped(&self) {
        let mut standing = self.standing();
        let registration = standing.registration();
        *standing = Standing::Dropped { registration };
    }

    fn standing(&self) -> std::sync::MutexGuard<'_, Standing> {
        self.standing.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What `/ready` answers: a configuration is installed and, at least
    /// once, every route in it was served — so a proxy started while routes
    /// exist never says ready and then answers 404 for one of them — and
    /// the leader has not dropped this proxy since (or it caught up after:
    /// [`DataPlane::mark_dropped`]). Coordinators that cannot be reached
    /// change nothing here: with all of them down, no cutover can commit,
    /// and the proxies keep serving (static stability).
    pub fn is_ready(&self) -> bool {
        self.has_config()
            && *self.synced.borrow()
            && matches!(*self.standing(), Standing::Counted { .. })
    }

    /// Resolves once [`is_ready`](Self::is_ready) holds (it then holds
    /// for good). Sockets from [`Listeners::bind`] start listening then.
    pub async fn ready(&self) {
        let mut synced = self.synced.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = synced.wait_for(|synced| *synced && self.has_config()).await;
    }

    /// Serves until `shutdown` resolves, then drains gracefully: stop
    /// accepting, finish in-flight requests, close HTTP/1.1 keep-alive
    /// connections between requests (`Connection: close` on their last
    /// response) and HTTP/2 ones with GOAWAY; returns when all are closed
    /// (or the drain timeout passed). Sockets from [`Listeners::bind`]
    /// listen only once the data plane is [ready](Self::ready); those not
    /// bound yet are retried until they bind.
    /// With an access log, its lines are flushed before this returns.
    pub async fn serve(
        self: Arc<Self>,
        listeners: impl Into<Listeners>,
        shutdown: impl Future<Output = ()>,
    ) -> io::Result<()> {
        let served = server::serve(Arc::clone(&self), listeners.into(), shutdown).await;
        // Every connection is closed, so every response has sent its line.
        if let Some(log) = self.access_log.get()
            && !log.flush(ACCESS_LOG_FINAL_FLUSH).await
        {
            warn!(timeout = ?ACCESS_LOG_FINAL_FLUSH, "access log not flushed at stop: its output is stuck");
        }
        served
    }

    /// Every listener socket and whether it is bound (the last bind error
    /// if not), as the control client reports them; `None` before
    /// [`DataPlane::serve`] started.
    pub fn listener_sockets(&self) -> Option<Vec<ListenerBinding>> {
        self.sockets.snapshot()
    }

    /// Changes whenever a listener socket is bound or its error changes.
    pub fn listener_socket_changes(&self) -> watch::Receiver<u64> {
        self.sockets.changes()
    }

    pub(crate) fn sockets(&self) -> &SocketTable {
        &self.sockets
    }

    /// What compiling the served table noted — routes and listeners not
    /// served, and why — as text.
    pub fn compile_notes(&self) -> Vec<String> {
        self.served
            .load()
            .as_ref()
            .map(|s| s.table.notes().iter().map(ToString::to_string).collect())
            .unwrap_or_default()
    }

    pub(crate) fn served(&self) -> Option<Arc<Served>> {
        self.served.load_full()
    }

    pub(crate) fn settings(&self) -> &DataPlaneSettings {
        &self.ctx.settings
    }

    /// The data plane's metrics, as registered by [`DataPlane::new`].
    pub fn metrics(&self) -> &Metrics {
        &self.ctx.metrics
    }

    pub(crate) fn metrics_arc(&self) -> &Arc<Metrics> {
        &self.ctx.metrics
    }

    pub(crate) fn access_log(&self) -> Option<&AccessLog> {
        self.access_log.get()
    }

    pub(crate) fn mirror_limiter(&self) -> &MirrorLimiter {
        &self.mirrors
    }
}

/// The backends of GRPCRoutes, spoken to over HTTP/2 as gRPC: those the
/// served generations send calls to — which may lag the snapshot while a
/// committed generation waits for its backends here — and those of the
/// snapshot's active and pending GRPCRoute generations (warming). A
/// backend leaves the set only when no generation of either kind names
/// it, so one is never re-resolved as HTTP/1.1 while calls still reach it.
fn grpc_backends(config: &ServingConfig) -> HashSet<BackendKey> {
    let mut out = crate::upstream::discovery::grpc_backends(&config.snapshot);
    for route in config.routes.iter().filter(|r| r.kind == RouteKind::Grpc) {
        out.extend(route.reached_backends());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::testkit::{World, prefix, route, rule, svc};
    use switchyard_proto::model::{
        Endpoint, EndpointPort, EndpointSlice, ObjectMeta, ObjectName, RouteGeneration,
        RouteRecord, SERVICE_NAME_LABEL, Transition, UpstreamProtocol,
    };

    /// A GRPCRoute `infra/calls` sending every call to `backend`.
    fn grpc_to(backend: &str) -> HttpRoute {
        let mut r = route(
            "infra",
            "calls",
            vec![rule(prefix("/"), vec![svc(backend, 1)])],
        );
        r.kind = RouteKind::Grpc;
        r
    }

    fn slice(service: &str, port: u16) -> EndpointSlice {
        let mut meta = ObjectMeta::named("infra", format!("{service}-1"));
        meta.labels
            .insert(SERVICE_NAME_LABEL.to_string(), service.to_string());
        EndpointSlice {
            meta,
            address_type: "IPv4".into(),
            ports: vec![EndpointPort { name: None, port }],
            endpoints: vec![Endpoint {
                addresses: vec!["127.0.0.1".into()],
                ready: true,
                serving: true,
                terminating: false,
                zone: None,
            }],
            cluster: None,
        }
    }

    /// The snapshot of a GRPCRoute with `active` committed and `pending`
    /// in transition, and Services v1 and v2 with an endpoint each.
    fn config(active: &str, pending: Option<&str>) -> ServingConfig {
        let mut world = World::new();
        world.snapshot.endpoint_slices = vec![slice("v1", 1), slice("v2", 2)];
        world.snapshot.routes = vec![RouteRecord {
            name: ObjectName::new("infra", "calls"),
            active: Some(RouteGeneration {
                generation: 1,
                spec: grpc_to(active),
            }),
            pending: pending.map(|p| Transition {
                target: RouteGeneration {
                    generation: 2,
                    spec: grpc_to(p),
                },
                settings: Default::default(),
            }),
            last_failure: None,
            forced: false,
            active_since: 0,
        }];
        ServingConfig {
            snapshot: Arc::new(world.snapshot),
            routes: vec![grpc_to(active)],
        }
    }

    fn protocols(dp: &DataPlane, backend: &BackendKey) -> Vec<UpstreamProtocol> {
        let found = dp.upstreams.lookup(&BTreeSet::from([backend.clone()]));
        found[backend]
            .endpoints()
            .iter()
            .map(|e| e.protocol())
            .collect()
    }

    #[tokio::test]
    async fn a_grpc_backend_left_by_a_cutover_keeps_speaking_grpc_until_it_is_retired() {
        let dp = DataPlane::new(DataPlaneSettings::default(), &mut Registry::default());
        let (v1, v2) = (
            BackendKey::new("infra", "v1", 8080),
            BackendKey::new("infra", "v2", 8080),
        );
        // Serving v1, warming v2 for the pending generation.
        dp.install(config("v1", Some("v2")));
        dp.set_warming(BTreeSet::from([v1.clone(), v2.clone()]));
        assert_eq!(protocols(&dp, &v1), [UpstreamProtocol::Grpc]);
        assert_eq!(protocols(&dp, &v2), [UpstreamProtocol::Grpc]);
        // The cutover: the snapshot and the served routes name only v2,
        // while the previous warming set still holds v1 until
        // `set_warming` replaces it — requests routed by the previous
        // table may reach v1 meanwhile, and must not be sent HTTP/1.1.
        dp.install(config("v2", None));
        assert_eq!(protocols(&dp, &v1), [UpstreamProtocol::Grpc]);
        assert_eq!(protocols(&dp, &v2), [UpstreamProtocol::Grpc]);
        dp.set_warming(BTreeSet::from([v2.clone()]));
        assert!(dp.upstreams.lookup(&BTreeSet::from([v1])).is_empty());
    }
}
