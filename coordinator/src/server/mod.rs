//! The coordinator process: one gRPC listener (mutual TLS unless
//! `--insecure`) serving `RaftService` to coordinators, `FleetService` to
//! proxies and `AdminService` to admins, plus the leader loop that turns
//! cutover decisions into Raft commands.
//!
//! Owns: wiring, the shared [`Coordinator`] handle, and `run`. Does not own:
//! Raft storage and networking (`crate::raft`), the replicated state
//! (`crate::state`) or the decision logic (`crate::cutover`).

mod admin;
mod apply_commits;
mod apply_group;
mod cutover_driver;
mod errors;
mod fleet;
mod journal;
pub mod metrics;
mod pacing;
mod status;

use crate::cutover::{CutoverEngine, EngineSettings};
use crate::raft::{Node, NodeConfig, ProposeError};
use crate::state::{Command, CommandError, CommandResponse, StoreLimits};
use metrics::CoordinatorMetrics;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use switchyard_proto::model::{
    ClusterStatus, CutoverSettings, Resource, ResourceKey, ValidationRules,
};
use switchyard_proto::pb::admin_service_server::AdminServiceServer;
use switchyard_proto::pb::fleet_service_server::FleetServiceServer;
use switchyard_tls::authz::{self, Needed};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tonic::service::interceptor::InterceptedService;
use tracing::Instrument;

/// How often a held fleet call looks again for a live leader
/// ([`Coordinator::await_live_leader`]).
const LEADER_POLL: Duration = Duration::from_millis(10);

/// Limits on what clients may send and on how much the store may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest gRPC message accepted, in bytes.
    pub max_message_bytes: usize,
    /// Most resources in one apply or delete.
    pub max_objects_per_apply: usize,
    /// Most HTTPRoutes stored at once; applies adding more are refused.
    pub max_routes: usize,
    /// Most endpoint addresses stored at once, over all EndpointSlices.
    pub max_endpoints: usize,
    /// Largest object in an apply, as JSON bytes.
    pub max_object_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 4 * 1024 * 1024,
            max_objects_per_apply: 1_000,
            max_routes: 10_000,
            max_endpoints: 100_000,
            max_object_bytes: 1024 * 1024,
        }
    }
}

impl Limits {
    /// The store-wide part, as `Command::Apply` carries it. The
    /// configuration as a whole is not bounded: watch streams send it in
    /// chunks well under one message (`journal::chunk_bytes`), so
    /// `max_config_bytes` stays unset (the field remains for entries
    /// written before).
    pub fn store(&self) -> StoreLimits {
        StoreLimits {
            max_routes: self.max_routes,
            max_endpoints: self.max_endpoints,
            max_object_bytes: Some(self.max_object_bytes),
            max_config_bytes: None,
        }
    }
}

/// Everything a coordinator needs to start.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// The Raft node: id, peers, data dir, timings.
    pub node: NodeConfig,
    /// Lease length for proxies.
    pub lease_ttl: Duration,
    /// How often proxies are told to heartbeat.
    pub heartbeat_interval: Duration,
    /// Cutover settings for routes without annotations.
    pub defaults: CutoverSettings,
    /// Client limits.
    pub limits: Limits,
    /// The fleet's heartbeats a second the leader paces to while applies
    /// pile up (0: never paced); see `pacing`.
    pub paced_fleet_calls_per_second: u32,
}

/// The shared handle every service holds.
pub struct Coordinator {
    node: Node,
    config: CoordinatorConfig,
    /// The cutover engine while this coordinator leads; `None` otherwise.
    engine: Mutex<Option<CutoverEngine>>,
    /// Woken when evidence or state changes, so the leader loop decides at
    /// once instead of on its next tick.
    wake: Notify,
    /// Bumped whenever something status shows may have changed.
    status_changes: watch::Sender<u64>,
    /// Prometheus metrics.
    metrics: CoordinatorMetrics,
    /// The configuration journal every watch stream reads from.
    journal: Arc<journal::Journal>,
    /// Commits carried by applies, until the leader loop takes them for
    /// its apply-to-Ready histogram (`apply_commits`).
    committed_with_apply: Mutex<Vec<apply_commits::CommittedWithApply>>,
    /// Applies waiting for the group commit (`apply_group`).
    applies: apply_group::ApplyQueue,
    /// The leader's address as this coordinator knows it, changed only
    /// when that changes: every watch stream tells its proxy (see
    /// [`announce_leaders`]).
    leader_news: watch::Sender<Option<String>>,
    /// Whether heartbeat answers are held, and how long (`pacing`).
    pacing: pacing::FleetPacing,
    /// Bumped whenever the leader took a proxy's set whole: calls waiting
    /// for a set named by digest try again (see `fleet`).
    whole_sets_taken: watch::Sender<u64>,
}

/// Keeps `news` at the leader's address as Raft's metrics on this
/// coordinator name it, until the node stops. Wakes on every metrics
/// change (O(1) each: a comparison); watchers wake only when the leader
/// changes.
async fn announce_leaders(node: Node, news: watch::Sender<Option<String>>) {
    let mut metrics = node.metrics();
    loop {
        metrics.borrow_and_update();
        let leader = node.leader().map(|(_, address)| address);
        news.send_if_modified(|known| {
            let moved = *known != leader;
            if moved {
                known.clone_from(&leader);
            }
            moved
        });
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// This process's monotonic clock in milliseconds (since the first call):
/// the only clock the cutover engine is given. It never jumps when the wall
/// clock is set or skewed, and it never leaves this machine — no command
/// or reply carries it (design invariant 10).
pub(crate) fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl Coordinator {
    /// The Raft node.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Proposes a command and waits for its answer. A refusal for a store
    /// limit is counted here, on the coordinator that took the request
    /// (every replica applies the entry, but only this one gets the
    /// answer), so each refused request counts once.
    pub(crate) async fn propose(&self, command: Command) -> Result<CommandResponse, ProposeError> {
        let response = self.node.propose(command).await;
        if let Ok(response) = &response {
            self.count_refusal(response);
        }
        self.changed();
        response
    }

    /// Counts a refusal for a store limit (see [`Coordinator::propose`]).
    pub(crate) fn count_refusal(&self, response: &CommandResponse) {
        match &response.0 {
            Err(CommandError::OverLimit { limit, .. }) => self.metrics.limit_hit(limit.label()),
            Err(CommandError::ObjectTooLarge { .. }) => self.metrics.limit_hit("object_bytes"),
            _ => {}
        }
    }

    /// Proposes one of the leader's own decisions on this node only (never
    /// forwarded; see [`Node::propose_here`]).
    pub(crate) async fn propose_decision(
        &self,
        command: Command,
    ) -> Result<CommandResponse, ProposeError> {
        let response = self.node.propose_here(command).await;
        self.changed();
        response
    }

    /// `Command::Apply` for `resources`, with this coordinator's cutover
    /// defaults and store limits.
    pub(crate) fn apply_command(&self, resources: Vec<Resource>) -> Command {
        Command::Apply {
            resources,
            defaults: self.config.defaults,
            limits: Some(self.config.limits.store()),
            validation: Some(ValidationRules::CURRENT_REVISION),
        }
    }

    /// Something changed: wake the leader loop and status watchers.
    pub(crate) fn changed(&self) {
        self.wake.notify_one();
        self.status_changes.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Runs `f` on the cutover engine if this coordinator leads.
    pub(crate) fn with_engine<T>(&self, f: impl FnOnce(&mut CutoverEngine) -> T) -> Option<T> {
        let mut guard = self.engine.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_mut().map(f)
    }

    /// Whether this coordinator leads *and* a quorum acknowledged it
    /// recently. A leader cut off from the others still believes it leads
    /// until it hears of a newer term; proxies must not keep their leases
    /// alive with it, or the majority side's new leader would see them
    /// all silent. (Public for the binary's live-cluster sync, which
    /// writes nothing back to Kubernetes from such a leader.)
    pub fn leads_with_quorum(&self) -> bool {
        if !self.node.is_leader() {
            return false;
        }
        // Borrowed, not cloned: every heartbeat and report asks.
        let metrics = self.node.metrics();
        let metrics = metrics.borrow();
        let voters = metrics.membership_config.membership().voter_ids().count();
        let bound = self.config.node.raft.election_timeout_max.as_millis() as u64;
        voters <= 1 || metrics.millis_since_quorum_ack.is_some_and(|ms| ms < bound)
    }

    /// Holds a fleet call, at most an election timeout, until this
    /// coordinator knows a live leader: itself leading with a quorum and
    /// its engine started, or another coordinator it heard from within two
    /// heartbeat intervals. Right after a leader dies its followers still
    /// name it (until their election timeout runs out) and then name
    /// nobody until the election ends; answering at once then sends the
    /// caller to the dead leader or leaves it to retry blind, after a
    /// back-off that by then has grown to most of a second — for every
    /// proxy, each of which the new leader must hear from before it
    /// judges. Held, the call is served or pointed at the new leader the
    /// moment there is one. The caller's own deadline (a proxy's is one
    /// second by default) still applies.
    pub(crate) async fn await_live_leader(&self) {
        let deadline = tokio::time::Instant::now() + self.config.node.raft.election_timeout_max;
        while !self.knows_live_leader() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(LEADER_POLL).await;
        }
    }

    /// Whether this coordinator leads with a quorum and a running engine,
    /// or follows a leader it heard from within two heartbeat intervals.
    pub(crate) fn knows_live_leader(&self) -> bool {
        if self.node.is_leader() {
            return self.leads_with_quorum() && self.with_engine(|_| ()).is_some();
        }
        let fresh = self.config.node.raft.heartbeat_interval * 2;
        self.node.leader().is_some()
            && self
                .node
                .since_leader_contact()
                .is_some_and(|since| since < fresh)
    }

    fn engine_settings(&self) -> EngineSettings {
        EngineSettings {
            lease_ttl_ms: self.config.lease_ttl.as_millis() as u64,
        }
    }
}

/// A running coordinator: its addresses and its handle.
#[derive(Debug, Clone)]
pub struct Bound {
    /// The gRPC address (all three services).
    pub grpc: std::net::SocketAddr,
    /// The coordinator itself, for tasks the binary runs beside the
    /// services (the live-cluster sync): it reads leadership and stored
    /// state from [`Coordinator::node`] and writes through
    /// [`Coordinator::apply_resources`] without a gRPC round trip to itself.
    pub coordinator: Arc<Coordinator>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("id", &self.config.node.id)
            .finish_non_exhaustive()
    }
}

/// In-process access for the binary's own tasks: the same writes and
/// status the `AdminService` offers, without JSON or a socket. Additive;
/// the services do not use it.
impl Coordinator {
    /// Stores `resources` through Raft as one apply, with this
    /// coordinator's cutover defaults and store limits, exactly as the
    /// admin `Apply` RPC does (a follower forwards to the leader; the
    /// leader commits with it every route the fleet is already ready
    /// for). The caller keeps each call within
    /// [`Limits::max_objects_per_apply`].
    pub async fn apply_resources(
        &self,
        resources: Vec<Resource>,
    ) -> Result<CommandResponse, ProposeError> {
        self.propose_apply(resources).await
    }

    /// Removes `keys` through Raft as one `Command::Delete`, as the admin
    /// `Delete` RPC does.
    pub async fn delete_resources(
        &self,
        keys: Vec<ResourceKey>,
    ) -> Result<CommandResponse, ProposeError> {
        self.propose(Command::Delete { keys }).await
    }

    /// The status the admin `Status` RPC answers: replicated facts, plus
    /// evidence, applied generations and proxy liveness on the leader.
    pub fn status(&self) -> ClusterStatus {
        status::cluster_status(self, &status::StatusScope::default())
    }

    /// Ticks whenever something [`Coordinator::status`] shows may have
    /// changed (it also moves with time: leases, timeouts).
    pub fn status_changes(&self) -> watch::Receiver<u64> {
        self.status_changes.subscribe()
    }

    /// The client limits this coordinator enforces.
    pub fn limits(&self) -> Limits {
        self.config.limits
    }
}

/// Starts the Raft node and serves every gRPC service on `listener` until
/// `shutdown` resolves, updating `metrics` as it goes. `ready` is called once the node has started and the
/// services are about to accept calls (the binary prints its `LISTENING`
/// line there). `config.node.advertise_addr` must be the address peers
/// reach `listener` at.
pub async fn run(
    config: CoordinatorConfig,
    listener: TcpListener,
    metrics: CoordinatorMetrics,
    ready: impl FnOnce(&Bound),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let grpc = listener
        .local_addr()
        .map_err(|e| ServeError::Start(format!("listener has no address: {e}")))?;
    let node = Node::start(config.node.clone())
        .await
        .map_err(|e| ServeError::Start(e.to_string()))?;
    let (status_changes, _) = watch::channel(0);
    let journal = Arc::new(journal::Journal::new(
        node.state().borrow().clone(),
        journal::chunk_bytes(config.limits.max_message_bytes),
        metrics.clone(),
    ));
    let journal_task = tokio::spawn(
        journal::follow(journal.clone(), node.state())
            .instrument(tracing::info_span!("journal", node_id = config.node.id)),
    );
    let (leader_news, _) = watch::channel(None);
    let announcer = tokio::spawn(announce_leaders(node.clone(), leader_news.clone()));
    let (applies, queued_applies) = tokio::sync::mpsc::unbounded_channel();
    let coordinator = Arc::new(Coordinator {
        applies,
        pacing: pacing::FleetPacing::new(config.paced_fleet_calls_per_second),
        leader_news,
        node: node.clone(),
        config: config.clone(),
        engine: Mutex::new(None),
        committed_with_apply: Mutex::new(Vec::new()),
        wake: Notify::new(),
        status_changes,
        whole_sets_taken: watch::channel(0).0,
        metrics,
        journal,
    });
    // Every line the driver logs (decisions, leadership) names this
    // coordinator; each decision's line names its route or proxy too.
    let leader_loop = tokio::spawn(cutover_driver::run(coordinator.clone()).instrument(
        tracing::info_span!("cutover_driver", node_id = config.node.id),
    ));
    let apply_group = tokio::spawn(
        apply_group::run(
            coordinator.clone(),
            queued_applies,
            config.limits.max_objects_per_apply,
        )
        .instrument(tracing::info_span!("apply_group", node_id = config.node.id)),
    );
    let max = config.limits.max_message_bytes;
    let admin = AdminServiceServer::new(admin::Admin::new(coordinator.clone()))
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    let fleet = FleetServiceServer::new(fleet::Fleet::new(coordinator.clone()))
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    // TLS (unless --insecure) and TCP_NODELAY on every accepted socket;
    // each request then carries the caller's identity for authorization.
    let incoming = switchyard_tls::server::incoming(listener, config.node.security.clone());
    let raft = InterceptedService::new(
        node.raft_service(),
        authz::require(Needed::Coordinator, "RaftService"),
    );
    let admin = InterceptedService::new(admin, authz::require(Needed::Admin, "AdminService"));
    ready(&Bound {
        grpc,
        coordinator: coordinator.clone(),
    });
    // On the way out, in this order: stop deciding (a stopping leader
    // records nothing — no lease expiry for proxies it can no longer
    // hear), stop Raft (the others elect a new leader within an election
    // timeout instead of waiting for this process to drain its streams),
    // then stop serving.
    let stopping = coordinator.clone();
    let leader_loop_abort = leader_loop.abort_handle();
    let apply_group_abort = apply_group.abort_handle();
    let shutdown = async move {
        shutdown.await;
        leader_loop_abort.abort();
        apply_group_abort.abort();
        *stopping.engine.lock().unwrap_or_else(|e| e.into_inner()) = None;
        stopping.node.shutdown().await;
        tracing::info!("Raft stopped; draining gRPC streams");
    };
    let served = tonic::transport::Server::builder()
        .add_service(raft)
        .add_service(fleet)
        .add_service(admin)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    leader_loop.abort();
    apply_group.abort();
    journal_task.abort();
    announcer.abort();
    node.shutdown().await;
    served.map_err(|e| ServeError::Serve(e.to_string()))
}

/// Why a coordinator stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The Raft node could not start (store locked, bad peers...).
    #[error("coordinator could not start: {0}")]
    Start(String),
    /// The gRPC server failed.
    #[error("gRPC server failed: {0}")]
    Serve(String),
}
