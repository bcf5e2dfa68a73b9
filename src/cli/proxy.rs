//! `switchyard proxy`: flags, validation, then the data plane, its admin
//! endpoint and the control-plane client, all stopped by one SIGTERM.

use anyhow::{Context, bail};
use clap::Args;
use prometheus_client::registry::Registry;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use switchyard_proto::model::{
    ConfigSnapshot, HttpRoute, ObjectName, Resource, RouteGeneration, RouteRecord, parse_duration,
};
use switchyard_proxy::control::coordinators::CoordinatorAddress;
use switchyard_proxy::control::{self, ControlConfig, ControlMetrics};
use switchyard_proxy::router::ListenerKey;
use switchyard_proxy::server::handoff;
use switchyard_proxy::settings::{EncodedSlashes, PathSettings};
use switchyard_proxy::{
    AccessLogTarget, DataPlane, DataPlaneSettings, ListenerSpec, Listeners, ServingConfig,
    bind_reuseport,
};
use tokio::sync::watch;

/// Flags of `switchyard proxy`.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// This replica's id, unique in the fleet (a pod name, say).
    #[arg(long, env = "SWITCHYARD_PROXY_ID")]
    pub id: String,
    /// Failure domain this replica runs in; per-zone readiness policies count by it.
    #[arg(long, env = "SWITCHYARD_ZONE", default_value = "default")]
    pub zone: String,
    /// Read the zone from this file instead of --zone (which it excludes), once at start-up: in
    /// Kubernetes the file `switchyard node-zone` wrote from the node's topology label.
    #[arg(
        long,
        env = "SWITCHYARD_ZONE_FILE",
        value_name = "FILE",
        conflicts_with = "zone"
    )]
    pub zone_file: Option<PathBuf>,
    /// Coordinator gRPC addresses, [ZONE=]HOST:PORT,...; those in this proxy's zone are tried first.
    #[arg(long, env = "SWITCHYARD_COORDINATORS", value_delimiter = ',', value_parser = CoordinatorAddress::parse,
          required_unless_present = "config")]
    pub coordinators: Vec<CoordinatorAddress>,
    /// Serve a fixed configuration from this YAML file instead of watching coordinators
    /// (every route is served as written; for benchmarks and tests).
    #[arg(long, conflicts_with = "coordinators")]
    pub config: Option<PathBuf>,
    /// A Gateway listener port bound to a local address: [NAMESPACE/GATEWAY:]PORT=HOST:PORT.
    /// Repeatable. Without a Gateway the socket serves every Gateway's listeners on PORT, told
    /// apart by hostname. One that cannot be bound is retried and reported to the coordinators
    /// (left out of the LISTENING line); with --config it stops the proxy. Sockets are bound at
    /// start but accept connections only once /ready says 200 (at once with --config).
    #[arg(long = "listener", required = true, value_parser = parse_listener)]
    pub listeners: Vec<(String, ListenerKey, SocketAddr)>,
    /// Address of /metrics and /ready.
    #[arg(
        long,
        env = "SWITCHYARD_ADMIN_LISTEN",
        default_value = "127.0.0.1:9901"
    )]
    pub admin_listen: SocketAddr,
    /// Upper bound on connecting to an upstream endpoint.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Upper bound from sending a request upstream to its response head (then 504).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// How long a client may take to send a request head (slow clients are cut off);
    /// also bounds the TLS handshake on HTTPS listeners.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// Largest request head accepted, in bytes (larger gets 431).
    #[arg(long, default_value_t = 64 * 1024)]
    pub max_header_bytes: usize,
    /// Most client connections open at once, over all listeners. Beyond it a new connection is
    /// closed right after accept, without a response; open ones are unaffected.
    ///
    /// Bounds the file descriptors and memory idle or slow clients can pin (each client
    /// connection may also hold an upstream one). 10000 is far above what one replica serves
    /// well and far below the descriptor limits containers usually get.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,
    /// After SIGTERM, how long requests in flight may take to finish before their connections
    /// are closed. Keep a pod's terminationGracePeriodSeconds above its preStop delay plus this.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// Time between two health checks of one endpoint.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub health_interval: Duration,
    /// Upper bound on one health check.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub health_timeout: Duration,
    /// Longest a committed route generation waits for this proxy to warm its backends
    /// before it is applied anyway (counted in switchyard_proxy_forced_applies).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub apply_wait_limit: Duration,
    /// Deadline of every unary call to a coordinator.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub rpc_timeout: Duration,
    /// How long a client's request body may pause before the request is given up as the
    /// client's fault (408, or a cut response if it had started; counted as the client's).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub request_body_idle_timeout: Duration,
    /// Proxies in front of this one whose X-Forwarded-For / Forwarded entries are believed:
    /// the last N entries are kept, earlier ones (a client's claims) dropped, and the peer
    /// appended. 0 (the default) means this proxy is the edge.
    #[arg(long, default_value_t = 0)]
    pub trusted_hops: usize,
    /// What an encoded slash (%2F) or backslash (%5C) in a request path gets: `reject` (400,
    /// the default: a backend that decodes them would read another path than was routed) or
    /// `keep` (kept encoded, never a separator).
    #[arg(long, default_value = "reject", value_parser = parse_encoded_slashes)]
    pub encoded_slashes: EncodedSlashes,
    /// Keep runs of `/` in request paths as they are instead of merging them (`//admin` is
    /// `/admin` by default).
    #[arg(long)]
    pub keep_double_slashes: bool,
    /// Tell clients why a request got 404/500/503 in detail (route, Service names). Off by
    /// default: clients get a generic reason, operators the details in debug logs and metrics.
    #[arg(long)]
    pub expose_reasons: bool,
    /// Write one JSON line per request to this file (created if missing, appended to), or to
    /// standard output with `-`: listener, route, backend, endpoint, status, bytes, durations,
    /// errors (README, "Access log"). Off by default.
    ///
    /// Lines are written by a thread of their own and never slow a request: when it falls
    /// behind, lines are dropped and counted in switchyard_proxy_access_log_dropped_total;
    /// failed writes are counted in switchyard_proxy_access_log_write_errors_total. Everything
    /// is flushed at least every second and when the proxy stops.
    #[arg(long, env = "SWITCHYARD_ACCESS_LOG", value_name = "PATH|-", value_parser = AccessLogTarget::parse)]
    pub access_log: Option<AccessLogTarget>,
    /// Threads that serve client connections, each with a runtime of its own: a connection,
    /// its requests and its upstream connections stay on one thread (no work stealing, no
    /// wake-ups across threads: bench/RESULTS.md measured 6–19 % less CPU per HTTP/1.1 request
    /// on one thread than on one worker of a multi-threaded runtime). 1 runs the whole proxy on
    /// one thread; with more, the control client, health checks and admin endpoint share one
    /// more. Without the flag: a multi-threaded runtime with one worker per CPU
    /// (TOKIO_WORKER_THREADS, when set, is that number instead).
    #[arg(long, env = "SWITCHYARD_PROXY_WORKERS", value_name = "N")]
    pub workers: Option<std::num::NonZeroUsize>,
    /// Take the listening sockets over from the proxy process serving at this Unix socket path,
    /// and offer this process's own there to the next one (README, "Replacing a proxy process").
    ///
    /// A replacement started with the same path and --listener addresses accepts from the very
    /// sockets the old process accepts from, so when the old one is sent SIGTERM and drains,
    /// no connection queued in them is reset. Without it a replacement shares the address
    /// through SO_REUSEPORT, and connections the kernel queued on the old socket when it closes
    /// are reset (unless the host sets net.ipv4.tcp_migrate_req=1). Nothing at the path: this
    /// process binds its own sockets. The path is created mode 0600; keep its directory private.
    #[arg(long, env = "SWITCHYARD_HANDOFF_SOCKET", value_name = "PATH")]
    pub handoff_socket: Option<PathBuf>,
    /// TLS towards the coordinators (not needed with --config, which talks to none).
    #[command(flatten)]
    pub tls: super::tls::TlsArgs,
}

fn parse_encoded_slashes(text: &str) -> Result<EncodedSlashes, String> {
    match text {
        "reject" => Ok(EncodedSlashes::Reject),
        "keep" => Ok(EncodedSlashes::Keep),
        other => Err(format!("{other:?}: expected reject or keep")),
    }
}

fn parse_listener(text: &str) -> Result<(String, ListenerKey, SocketAddr), String> {
    let (name, address) = text.split_once('=').ok_or_else(|| {
        format!("listener {text:?} must look like [NAMESPACE/GATEWAY:]PORT=HOST:PORT")
    })?;
    let address: SocketAddr = address
        .parse()
        .map_err(|e| format!("listener {text:?}: {address:?} is not HOST:PORT: {e}"))?;
    let (gateway, port) = match name.rsplit_once(':') {
        Some((gateway, port)) => {
            let (ns, gw) = gateway
                .split_once('/')
                .ok_or_else(|| format!("listener {text:?}: the Gateway must be NAMESPACE/NAME"))?;
            (Some(ObjectName::new(ns, gw)), port)
        }
        None => (None, name),
    };
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("listener {text:?}: {port:?} is not a Gateway listener port"))?;
    Ok((name.to_string(), ListenerKey { gateway, port }, address))
}

/// A snapshot serving every route in `resources` as written.
fn static_config(resources: Vec<Resource>) -> ServingConfig {
    let mut snapshot = ConfigSnapshot {
        version: 1,
        ..Default::default()
    };
    let routes: Vec<HttpRoute> = resources
        .into_iter()
        .filter_map(|r| snapshot.add(r))
        .collect();
    for route in &routes {
        snapshot.routes.push(RouteRecord {
            name: route.meta.object_name(),
            active: Some(RouteGeneration {
                generation: 1,
                spec: route.clone(),
            }),
            pending: None,
            last_failure: None,
            forced: false,
            active_since: 0,
        });
    }
    ServingConfig {
        snapshot: Arc::new(snapshot),
        routes,
    }
}

/// A proxy's data plane and its control client's metrics, both registered
/// in the one registry its `/metrics` serves: everything a proxy process
/// exports. `run` starts from it, and `tests/grafana_dashboard.rs` reads
/// the exported metric names from it.
pub fn data_plane(settings: DataPlaneSettings) -> (Arc<DataPlane>, ControlMetrics, Registry) {
    let mut registry = Registry::default();
    let dataplane = DataPlane::new(settings, &mut registry);
    let control = ControlMetrics::register(&mut registry);
    (dataplane, control, registry)
}

/// Runs a proxy until SIGTERM, then drains and exits 0.
pub async fn run(args: ProxyArgs) -> anyhow::Result<ExitCode> {
    if args.id.trim().is_empty() {
        bail!("--id must not be empty");
    }
    if args.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    let zone = match &args.zone_file {
        Some(path) => super::node_zone::read_zone_file(path)?,
        None => args.zone.clone(),
    };
    // The certificate must name this proxy: the coordinators accept its
    // registration and evidence only as that id.
    let security = match &args.config {
        Some(_) => switchyard_tls::Security::Insecure,
        None => {
            let security = args.tls.security("proxy")?;
            super::tls::check_identity(
                &security,
                &switchyard_tls::Identity::Proxy(args.id.clone()),
            )?;
            security
        }
    };
    let static_resources = match &args.config {
        Some(path) => {
            Some(switchyard_kubeconfig::parse_file(path).map_err(|e| anyhow::anyhow!("{e}"))?)
        }
        None => None,
    };
    let settings = DataPlaneSettings {
        connect_timeout: args.connect_timeout,
        request_timeout: args.request_timeout,
        max_header_bytes: args.max_header_bytes,
        max_connections: args.max_connections,
        header_read_timeout: args.header_read_timeout,
        health: switchyard_proxy::HealthSettings {
            interval: args.health_interval,
            timeout: args.health_timeout,
            ..Default::default()
        },
        request_body_idle_timeout: args.request_body_idle_timeout,
        trusted_hops: args.trusted_hops,
        paths: PathSettings {
            merge_slashes: !args.keep_double_slashes,
            encoded_slashes: args.encoded_slashes,
        },
        expose_reasons: args.expose_reasons,
        drain_timeout: args.drain_timeout,
        workers: args.workers.map_or(1, std::num::NonZeroUsize::get),
        ..Default::default()
    };
    let (dataplane, control_metrics, registry) = data_plane(settings);
    if let Some(target) = &args.access_log {
        dataplane
            .open_access_log(target)
            .context("cannot open --access-log")?;
    }
    let registry = Arc::new(registry);

    let mut line = String::from("LISTENING");
    let admin = bind_reuseport(args.admin_listen)
        .with_context(|| format!("cannot listen on {}", args.admin_listen))?;
    line.push_str(&format!(" admin={}", admin.local_addr()?));
    // Bound now, listening only once this proxy serves its configuration:
    // a replacement sharing the address (SO_REUSEPORT) must not take
    // connections it would answer 503.
    // Taken off the runtime: a predecessor that does not answer is waited
    // for (up to the handoff's timeout) on a blocking thread.
    let handed = match args.handoff_socket.clone() {
        Some(path) => tokio::task::spawn_blocking(move || take_sockets(&path))
            .await
            .context("taking the sockets of --handoff-socket")?,
        None => Vec::new(),
    };
    let mut listeners = Listeners::bind_taking(
        args.listeners
            .into_iter()
            .map(|(name, key, address)| ListenerSpec { name, key, address }),
        handed,
    );
    // With coordinators, a socket that cannot be bound (its port taken) is
    // retried while the others serve, and reported: the Gateway listener's
    // status says PortUnavailable and why. A fixed configuration has
    // nobody to tell, so there it stops the proxy; it is ready at once, so
    // it listens before the LISTENING line.
    if static_resources.is_some() {
        listeners.listen_now();
        if let Some((spec, error)) = listeners.unbound().next() {
            bail!("cannot listen on {}: {error}", spec.address);
        }
    }
    for (name, address) in listeners.bound() {
        line.push_str(&format!(" {name}={address}"));
    }
    // Offered from now until this process ends, its drain included.
    let _offer = match args.handoff_socket {
        Some(path) => {
            let copies = listeners
                .handoff_copies()
                .context("cannot copy the listening sockets for --handoff-socket")?;
            Some(
                handoff::offer(path.clone(), copies)
                    .with_context(|| format!("cannot offer sockets at {}", path.display()))?,
            )
        }
        None => None,
    };

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let admin_address = admin.local_addr()?.to_string();
    let ready_dp = dataplane.clone();
    let admin_task = tokio::spawn(switchyard_admin_http::serve(
        admin,
        registry,
        move || ready_dp.is_ready(),
        stopped(stop_rx.clone()),
    ));
    let control_task = match static_resources {
        Some(resources) => {
            dataplane.install(static_config(resources));
            // A fixed configuration is served whole at once.
            dataplane.mark_synced();
            tracing::info!("serving a fixed configuration; not talking to coordinators");
            None
        }
        None => {
            let config = ControlConfig {
                proxy_id: args.id.clone(),
                zone: zone.clone(),
                admin_address,
                coordinators: args.coordinators,
                rpc_timeout: args.rpc_timeout,
                apply_wait_limit: args.apply_wait_limit,
                reconnect_backoff: Duration::from_millis(200),
                security,
            };
            Some(tokio::spawn(control::run(
                config,
                dataplane.clone(),
                control_metrics,
                stopped(stop_rx.clone()),
            )))
        }
    };
    tracing::info!(id = %args.id, zone = %zone, "proxy starting");
    // Installed before the LISTENING line (see `shutdown_signal`).
    let shutdown = super::shutdown_signal();
    println!("{line}");
    std::io::stdout().flush()?;

    let signal = tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let served = dataplane.serve(listeners, stopped(stop_rx)).await;
    signal.abort();
    if let Some(task) = control_task {
        let _ = tokio::time::timeout(Duration::from_secs(3), task).await;
    }
    let _ = admin_task.await;
    served.context("serving failed")?;
    tracing::info!(id = %args.id, "proxy drained and stopped");
    Ok(ExitCode::SUCCESS)
}

/// The sockets the process serving at `path` hands over; none (said at
/// WARN, this process binds its own) when its answer cannot be read.
fn take_sockets(path: &std::path::Path) -> Vec<handoff::HandedSocket> {
    match handoff::take(path) {
        Ok(handed) => {
            if !handed.is_empty() {
                tracing::info!(path = %path.display(), sockets = handed.len(),
                    "took the listening sockets of the process this one replaces");
            }
            handed
        }
        Err(error) => {
            tracing::warn!(path = %path.display(), %error,
                "cannot take the listening sockets of the process at --handoff-socket; binding new ones");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Args, Command};
    use clap::Parser;
    use std::time::Duration;
    use switchyard_proxy::DataPlaneSettings;

    fn proxy(extra: &[&str]) -> Result<super::ProxyArgs, clap::Error> {
        let mut argv = vec![
            "switchyard",
            "proxy",
            "--id=p1",
            "--listener=80=127.0.0.1:0",
            "--coordinators=127.0.0.1:1",
        ];
        argv.extend_from_slice(extra);
        match Args::try_parse_from(argv)?.command {
            Command::Proxy(args) => Ok(args),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn drain_timeout_defaults_to_the_data_plane_default_and_takes_human_durations() {
        let default = proxy(&[]).expect("parses").drain_timeout;
        assert_eq!(default, DataPlaneSettings::default().drain_timeout);
        let set = proxy(&["--drain-timeout=45s"]).expect("parses");
        assert_eq!(set.drain_timeout, Duration::from_secs(45));
        let error = proxy(&["--drain-timeout", "soon"]).expect_err("not a duration");
        assert!(error.to_string().contains("--drain-timeout"), "{error}");
    }

    #[test]
    fn the_access_log_is_off_unless_asked_for() {
        use switchyard_proxy::AccessLogTarget;
        assert_eq!(proxy(&[]).expect("parses").access_log, None);
        let stdout = proxy(&["--access-log=-"]).expect("parses").access_log;
        assert_eq!(stdout, Some(AccessLogTarget::Stdout));
        let file = proxy(&["--access-log", "/var/log/switchyard/access.json"])
            .expect("parses")
            .access_log;
        assert_eq!(
            file,
            Some(AccessLogTarget::File(
                "/var/log/switchyard/access.json".into()
            ))
        );
        let error = proxy(&["--access-log="]).expect_err("empty");
        assert!(error.to_string().contains("--access-log"), "{error}");
    }
}
