//! `switchyard coordinator`: flags, validation, then
//! `switchyard_coordinator::server::run`.

use anyhow::{Context, bail};
use clap::Args;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use switchyard_coordinator::raft::{NodeConfig, RaftSettings};
use switchyard_coordinator::server::metrics::CoordinatorMetrics;
use switchyard_coordinator::server::{CoordinatorConfig, Limits};
use switchyard_proto::model::{CutoverSettings, OnTimeout, ReadinessPolicy, parse_duration};

/// Flags of `switchyard coordinator`.
#[derive(Debug, Args)]
pub struct CoordinatorArgs {
    /// This coordinator's Raft id (a positive integer, unique in the group).
    #[arg(long, env = "SWITCHYARD_ID")]
    pub id: u64,
    /// Address to serve gRPC on (Raft, fleet and admin), HOST:PORT; port 0 picks a free one.
    #[arg(long, env = "SWITCHYARD_LISTEN", default_value = "127.0.0.1:7000")]
    pub listen: SocketAddr,
    /// The initial group, ID=HOST:PORT,... including this coordinator. Used to form the cluster on
    /// first start; on restart the stored membership wins. Omit with --join.
    #[arg(long, env = "SWITCHYARD_PEERS", value_delimiter = ',', value_parser = parse_peer)]
    pub peers: Vec<(u64, String)>,
    /// Start without forming a cluster; wait to be added with the admin API (AddCoordinator).
    #[arg(long, conflicts_with = "peers")]
    pub join: bool,
    /// Address other coordinators reach this one at (default: this id's --peers entry, else the bound address).
    #[arg(long, env = "SWITCHYARD_ADVERTISE")]
    pub advertise: Option<String>,
    /// Directory for the sled store (log, vote, state machine, snapshots).
    #[arg(long, env = "SWITCHYARD_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Raft leader heartbeat interval.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub heartbeat_interval: Duration,
    /// Raft election timeout, lower bound.
    #[arg(long, default_value = "400ms", value_parser = parse_duration)]
    pub election_timeout_min: Duration,
    /// Raft election timeout, upper bound.
    #[arg(long, default_value = "800ms", value_parser = parse_duration)]
    pub election_timeout_max: Duration,
    /// Deadline of every Raft RPC.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub rpc_timeout: Duration,
    /// Take a snapshot (and compact the log) after this many entries.
    #[arg(long, default_value_t = 5_000)]
    pub snapshot_after_logs: u64,
    /// A proxy silent for this long stops counting toward readiness and is expired.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub proxy_lease_ttl: Duration,
    /// How often proxies are asked to heartbeat.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub proxy_heartbeat_interval: Duration,
    /// Readiness policy for routes without the switchyard.io/readiness-policy annotation:
    /// all, majority, N, P%, optionally prefixed per-zone:.
    #[arg(long, default_value = "all", value_parser = ReadinessPolicy::parse)]
    pub default_policy: ReadinessPolicy,
    /// Cutover timeout for routes without the switchyard.io/cutover-timeout annotation.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub default_cutover_timeout: Duration,
    /// What a timed-out cutover does without the switchyard.io/on-timeout annotation: keep-old or force.
    #[arg(long, default_value = "keep-old", value_parser = OnTimeout::parse)]
    pub default_on_timeout: OnTimeout,
    /// Address of /metrics (Prometheus text) and /ready; port 0 picks a free one.
    #[arg(long, env = "SWITCHYARD_ADMIN_LISTEN", default_value = "127.0.0.1:0")]
    pub admin_listen: SocketAddr,
    /// Largest gRPC message accepted, in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    pub max_message_bytes: usize,
    /// Most objects in one apply or delete.
    #[arg(long, default_value_t = 1_000)]
    pub max_objects_per_apply: usize,
    /// Most HTTPRoutes stored at once. An apply that would add routes past it is refused whole
    /// (updates and deletes always work).
    ///
    /// Every proxy compiles and holds every route, and a proxy that joins or falls behind receives
    /// the whole configuration, so this bounds proxy memory and snapshot size. 10000 is well above what one Gateway
    /// fleet serves in practice, low enough that a runaway generator is stopped early.
    #[arg(long, default_value_t = 10_000)]
    pub max_routes: usize,
    /// Most endpoint addresses stored at once, summed over all EndpointSlices. An apply that would
    /// add addresses past it is refused whole (shrinking slices and deletes always work).
    ///
    /// Proxies health-check and keep connection pools per endpoint, so this bounds their work and
    /// memory. 100000 is ten endpoints per route at the --max-routes default.
    #[arg(long, default_value_t = 100_000)]
    pub max_endpoints: usize,
    /// Largest object an apply may carry, as JSON bytes (an HTTPRoute with 2 MB of annotations,
    /// say). Larger ones are refused with the object's name.
    ///
    /// One object must never be able to make the configuration undeliverable: proxies receive it
    /// as one gRPC message, and an apply that would take it past 90% of --max-message-bytes is
    /// refused too. Kubernetes itself keeps objects under about 1.5 MiB.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_object_bytes: usize,
    /// While clients' applies pile up, the proxies' heartbeats a second the leader paces the
    /// fleet to (0: never).
    ///
    /// Each committed change costs the leader a heartbeat from every proxy. While applies arrive
    /// faster than they commit one at a time (they are grouped, by the leader or by a follower
    /// that forwards them, and the leader wrote a group in the last second), it holds each heartbeat's
    /// answer for proxies ÷ this (at most 250 ms), so each proxy's next round comes later and
    /// carries more. Evidence and leases are taken at once; only the answers wait, and applies
    /// sent one at a time are never paced. Counted in switchyard_coordinator_fleet_paced_answers.
    #[arg(long, default_value_t = 2_000)]
    pub paced_fleet_calls_per_second: u32,
    /// Live Kubernetes clusters as the configuration source (`--kubernetes`).
    #[command(flatten)]
    pub kube: super::kube::KubeArgs,
    #[command(flatten)]
    pub tls: super::tls::TlsArgs,
}

fn parse_peer(text: &str) -> Result<(u64, String), String> {
    let (id, addr) = text
        .split_once('=')
        .ok_or_else(|| format!("peer {text:?} must look like ID=HOST:PORT"))?;
    let id: u64 = id
        .trim()
        .parse()
        .map_err(|_| format!("peer {text:?}: id must be a positive integer"))?;
    let addr = addr.trim();
    if id == 0 || !addr.contains(':') {
        return Err(format!(
            "peer {text:?} must look like ID=HOST:PORT with ID >= 1"
        ));
    }
    Ok((id, addr.to_string()))
}

impl CoordinatorArgs {
    /// Checks the flags together and builds the config; `bound` is the
    /// address the listener actually got.
    fn into_config(
        self,
        bound: SocketAddr,
        security: switchyard_tls::Security,
    ) -> anyhow::Result<CoordinatorConfig> {
        if self.id == 0 {
            bail!("--id must be a positive integer");
        }
        let mut peers = BTreeMap::new();
        for (id, addr) in &self.peers {
            if peers.insert(*id, addr.clone()).is_some() {
                bail!("--peers names coordinator {id} twice");
            }
        }
        if !self.join && peers.is_empty() {
            bail!(
                "give --peers ID=HOST:PORT,... (the initial group, including this one) or --join"
            );
        }
        if !self.join && !peers.contains_key(&self.id) {
            bail!("--peers must include this coordinator's own id {}", self.id);
        }
        if self.election_timeout_min <= self.heartbeat_interval
            || self.election_timeout_max <= self.election_timeout_min
        {
            bail!("need --heartbeat-interval < --election-timeout-min < --election-timeout-max");
        }
        for (flag, value) in [
            ("--max-routes", self.max_routes),
            ("--max-endpoints", self.max_endpoints),
            ("--max-object-bytes", self.max_object_bytes),
        ] {
            if value == 0 {
                bail!("{flag} must be at least 1");
            }
        }
        let advertise = self
            .advertise
            .or_else(|| peers.get(&self.id).cloned())
            .unwrap_or_else(|| bound.to_string());
        Ok(CoordinatorConfig {
            node: NodeConfig {
                id: self.id,
                peers,
                advertise_addr: advertise,
                data_dir: self.data_dir,
                raft: RaftSettings {
                    heartbeat_interval: self.heartbeat_interval,
                    election_timeout_min: self.election_timeout_min,
                    election_timeout_max: self.election_timeout_max,
                    rpc_timeout: self.rpc_timeout,
                    snapshot_after_logs: self.snapshot_after_logs,
                    ..RaftSettings::default()
                },
                // Raft traffic leaves from the address this coordinator
                // listens on, so peers (and firewalls) see who is talking.
                source_ip: Some(bound.ip()).filter(|ip| !ip.is_unspecified()),
                security,
            },
            lease_ttl: self.proxy_lease_ttl,
            heartbeat_interval: self.proxy_heartbeat_interval,
            defaults: CutoverSettings {
                policy: self.default_policy,
                timeout_ms: self.default_cutover_timeout.as_millis() as u64,
                on_timeout: self.default_on_timeout,
            },
            paced_fleet_calls_per_second: self.paced_fleet_calls_per_second,
            limits: Limits {
                max_message_bytes: self.max_message_bytes,
                max_objects_per_apply: self.max_objects_per_apply,
                max_routes: self.max_routes,
                max_endpoints: self.max_endpoints,
                max_object_bytes: self.max_object_bytes,
            },
        })
    }
}

/// A coordinator's metrics and the registry its `/metrics` serves: everything
/// a coordinator process exports. `run` starts from it, and
/// `tests/grafana_dashboard.rs` reads the exported metric names from it.
pub fn coordinator_metrics() -> (CoordinatorMetrics, Registry) {
    let mut registry = Registry::default();
    let metrics = CoordinatorMetrics::register(&mut registry);
    (metrics, registry)
}

/// Runs a coordinator until SIGTERM.
pub async fn run(args: CoordinatorArgs) -> anyhow::Result<ExitCode> {
    let security = args.tls.security("coordinator")?;
    super::tls::check_identity(&security, &switchyard_tls::Identity::Coordinator(args.id))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let bound = listener.local_addr()?;
    let admin = tokio::net::TcpListener::bind(args.admin_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.admin_listen))?;
    let admin_address = admin.local_addr()?;
    let id = args.id;
    // Before anything starts: a bad kubeconfig is a configuration error.
    let live = super::kube::LiveSync::connect(&args.kube).await?;
    let config = args.into_config(bound, security)?;
    let (metrics, registry) = coordinator_metrics();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    // /ready answers 200 once a leader is known (read from the metrics).
    let leader = metrics.clone();
    let admin_task = tokio::spawn(switchyard_admin_http::serve(
        admin,
        std::sync::Arc::new(registry),
        move || leader.leader_known(),
        stopped(stop_rx.clone()),
    ));
    tracing::info!(id, grpc = %bound, advertise = %config.node.advertise_addr, peers = ?config.node.peers, "coordinator starting");
    let mut live_task = None;
    let ready = |b: &switchyard_coordinator::server::Bound| {
        println!("LISTENING grpc={} admin={admin_address}", b.grpc);
        let _ = std::io::stdout().flush();
        live_task = live.map(|live| live.spawn(b.coordinator.clone()));
    };
    // Installed now, before `ready` says LISTENING.
    let signal = super::shutdown_signal();
    let shutdown = async move {
        signal.await;
        let _ = stop_tx.send(true);
    };
    let served =
        switchyard_coordinator::server::run(config, listener, metrics, ready, shutdown).await;
    // It holds the coordinator handle: stop it with the server.
    if let Some(task) = live_task {
        task.abort();
    }
    let _ = admin_task.await;
    served?;
    tracing::info!(id, "coordinator stopped");
    Ok(ExitCode::SUCCESS)
}
