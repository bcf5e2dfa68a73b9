//! The control plane in-process: one real coordinator (`server::run` on
//! 127.0.0.1 port 0) and real proxy data planes with the real control
//! client, talking gRPC. Each test is one guarantee of the cutover-safety
//! issue that failed before its fix:
//!
//! - a version-only update (a proxy registering) does not break any
//!   proxy's configuration stream;
//! - watch and status streams end when their clients go;
//! - a proxy started while routes exist says `/ready` only once it serves
//!   them (never ready-then-404);
//! - a route applied while no proxy is live is not lost: it waits, and is
//!   served once a proxy comes.

use anyhow::Context;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use switchyard::client::AdminClient;
use switchyard::demo::manifests;
use switchyard_chaos_tests::{Process, ProcessSpec};
use switchyard_coordinator::raft::{NodeConfig, RaftSettings};
use switchyard_coordinator::server::metrics::CoordinatorMetrics;
use switchyard_coordinator::server::{Bound, CoordinatorConfig, Limits};
use switchyard_proto::model::{CutoverSettings, ObjectName};
use switchyard_proto::pb;
use switchyard_proxy::control::coordinators::CoordinatorAddress;
use switchyard_proxy::control::{self, ControlConfig, ControlMetrics};
use switchyard_proxy::router::ListenerKey;
use switchyard_proxy::{BoundListener, DataPlane, DataPlaneSettings, HealthSettings};
use switchyard_tls::Security;
use tokio::sync::{oneshot, watch};

// Only `eventually` of the shared scenario helpers is used here.
#[allow(dead_code)]
mod scenario;
use scenario::eventually;

const WAIT: Duration = Duration::from_secs(20);

/// One coordinator in this process.
struct Coordinator {
    address: String,
    bound: Bound,
    metrics: CoordinatorMetrics,
    stop: Option<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Coordinator {
    async fn start() -> anyhow::Result<Coordinator> {
        let dir = tempfile::tempdir()?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let config = CoordinatorConfig {
            node: NodeConfig {
                id: 1,
                peers: [(1, address.clone())].into(),
                advertise_addr: address.clone(),
                data_dir: dir.path().to_path_buf(),
                raft: RaftSettings {
                    heartbeat_interval: Duration::from_millis(50),
                    election_timeout_min: Duration::from_millis(150),
                    election_timeout_max: Duration::from_millis(300),
                    ..RaftSettings::default()
                },
                source_ip: None,
                security: Security::Insecure,
            },
            lease_ttl: Duration::from_secs(2),
            heartbeat_interval: Duration::from_millis(200),
            defaults: CutoverSettings::default(),
            limits: Limits::default(),
        };
        let metrics = CoordinatorMetrics::register(&mut Registry::default());
        let (bound_tx, bound_rx) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let served_metrics = metrics.clone();
        tokio::spawn(async move {
            let ready = move |b: &Bound| {
                let _ = bound_tx.send(b.clone());
            };
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(e) = switchyard_coordinator::server::run(
                config,
                listener,
                served_metrics,
                ready,
                shutdown,
            )
            .await
            {
                eprintln!("coordinator stopped: {e}");
            }
        });
        let bound = bound_rx.await.context("coordinator did not start")?;
        let coordinator = Coordinator {
            address,
            bound,
            metrics,
            stop: Some(stop),
            _dir: dir,
        };
        eventually(WAIT, "a leader", || async {
            check(
                coordinator.bound.coordinator.node().is_leader(),
                "not leader yet",
            )
        })
        .await;
        Ok(coordinator)
    }

    fn admin(&self) -> AdminClient {
        AdminClient::new(
            vec![self.address.clone()],
            Duration::from_secs(5),
            Security::Insecure,
        )
    }

    async fn apply(&self, yaml: &str) -> anyhow::Result<u64> {
        let resources = switchyard_kubeconfig::parse_documents("test.yaml", yaml)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let resources_json = serde_json::to_vec(&resources)?;
        let reply = self
            .admin()
            .call(true, |mut c| {
                let request = pb::ApplyRequest {
                    resources_json: resources_json.clone(),
                };
                async move { c.apply(request).await }
            })
            .await?;
        Ok(reply.log_index)
    }

    fn fleet_client(
        &self,
    ) -> pb::fleet_service_client::FleetServiceClient<tonic::transport::Channel> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.address))
            .expect("a valid address")
            .connect_lazy();
        pb::fleet_service_client::FleetServiceClient::new(channel)
    }

    fn admin_client(
        &self,
    ) -> pb::admin_service_client::AdminServiceClient<tonic::transport::Channel> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.address))
            .expect("a valid address")
            .connect_lazy();
        pb::admin_service_client::AdminServiceClient::new(channel)
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One proxy in this process: a data plane serving the demo Gateway's
/// listener, driven by the real control client.
struct Proxy {
    dataplane: Arc<DataPlane>,
    registry: Registry,
    address: SocketAddr,
    stop: watch::Sender<bool>,
}

impl Proxy {
    async fn start(id: &str, coordinator: &Coordinator) -> anyhow::Result<Proxy> {
        let mut registry = Registry::default();
        let settings = DataPlaneSettings {
            health: HealthSettings {
                interval: Duration::from_millis(200),
                ..Default::default()
            },
            ..Default::default()
        };
        let dataplane = DataPlane::new(settings, &mut registry);
        let metrics = ControlMetrics::register(&mut registry);
        let listener = switchyard_proxy::bind_reuseport("127.0.0.1:0".parse()?)?;
        let address = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let config = ControlConfig {
            proxy_id: id.into(),
            zone: "a".into(),
            admin_address: String::new(),
            coordinators: vec![CoordinatorAddress {
                zone: None,
                address: coordinator.address.clone(),
            }],
            rpc_timeout: Duration::from_secs(2),
            apply_wait_limit: Duration::from_secs(10),
            reconnect_backoff: Duration::from_millis(100),
            security: Security::Insecure,
        };
        let until = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        tokio::spawn(control::run(
            config,
            dataplane.clone(),
            metrics,
            until(stopped.clone()),
        ));
        let listeners = vec![BoundListener {
            name: "test".into(),
            key: ListenerKey {
                gateway: None,
                port: manifests::GATEWAY_PORT,
            },
            listener,
        }];
        tokio::spawn(dataplane.clone().serve(listeners, until(stopped)));
        Ok(Proxy {
            dataplane,
            registry,
            address,
            stop,
        })
    }

    /// A metric's value from this proxy's registry.
    fn metric(&self, name: &str) -> f64 {
        let mut text = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text.lines()
            .find_map(|line| {
                let (key, value) = line.rsplit_once(' ')?;
                (key == name).then(|| value.parse().ok())?
            })
            .unwrap_or(f64::NAN)
    }

    /// Status code of `GET /` through this proxy (0 when it cannot be
    /// read).
    async fn get(&self) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let request = "GET / HTTP/1.1\r\nHost: demo.example\r\nConnection: close\r\n\r\n";
        let Ok(mut stream) = tokio::net::TcpStream::connect(self.address).await else {
            return 0;
        };
        let mut text = Vec::new();
        if stream.write_all(request.as_bytes()).await.is_err()
            || stream.read_to_end(&mut text).await.is_err()
        {
            return 0;
        }
        String::from_utf8_lossy(&text)
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// `Ok` when `ok`, else what was seen (for [`eventually`]).
fn check(ok: bool, seen: impl Into<String>) -> Result<(), String> {
    if ok { Ok(()) } else { Err(seen.into()) }
}

fn backend() -> anyhow::Result<Process> {
    Process::start(ProcessSpec::new(
        "backend-blue",
        env!("CARGO_BIN_EXE_switchyard"),
        ["backend", "--name", "blue", "--listen", "127.0.0.1:0"]
            .map(String::from)
            .to_vec(),
    ))
}

async fn proxies_registered(coordinator: &Coordinator, count: usize) {
    eventually(WAIT, "proxies registered", || async {
        let status = coordinator.bound.coordinator.status();
        check(
            status.proxies.len() >= count,
            format!("{:?}", status.proxies),
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_elsewhere_do_not_break_a_proxys_configuration_stream() -> anyhow::Result<()>
{
    // Before the fix every registration (a version-only update: nothing a
    // proxy sees changed) made every proxy log "configuration stream
    // failed ... does not decode", reconnect and download everything.
    let coordinator = Coordinator::start().await?;
    coordinator.apply(&manifests::base()).await?;
    let proxy = Proxy::start("p1", &coordinator).await?;
    proxies_registered(&coordinator, 1).await;
    let errors_before = proxy.metric("switchyard_proxy_coordinator_errors_total");
    let mut fleet = coordinator.fleet_client();
    for i in 0..5 {
        fleet
            .register(pb::RegisterRequest {
                proxy: Some(pb::ProxyIdentity {
                    id: format!("other-{i}"),
                    zone: "b".into(),
                    admin_address: String::new(),
                }),
            })
            .await?;
    }
    let last = coordinator.bound.coordinator.status().applied_index;
    eventually(WAIT, "the proxy to hold the newest version", || async {
        let held = proxy.metric("switchyard_proxy_config_version");
        check(held >= last as f64, format!("holds {held}, newest {last}"))
    })
    .await;
    assert_eq!(
        proxy.metric("switchyard_proxy_coordinator_errors_total"),
        errors_before,
        "the stream failed on a version-only update"
    );
    assert_eq!(coordinator.metrics.open_streams("watch"), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_and_status_streams_end_when_their_clients_go() -> anyhow::Result<()> {
    // Before the fix a stream's task ended only when a send failed, so a
    // gone client kept a task (and a snapshot) until the next change.
    let coordinator = Coordinator::start().await?;
    coordinator.apply(&manifests::base()).await?;
    let mut streams = Vec::new();
    let mut statuses = Vec::new();
    for i in 0..3 {
        let mut stream = coordinator
            .fleet_client()
            .watch(pb::WatchRequest {
                proxy_id: format!("watcher-{i}"),
                known_version: 0,
            })
            .await?
            .into_inner();
        stream.message().await?.context("a first update")?;
        streams.push(stream);
    }
    for _ in 0..2 {
        let mut stream = coordinator
            .admin_client()
            .watch_status(pb::StatusRequest {})
            .await?
            .into_inner();
        stream.message().await?.context("a first status")?;
        statuses.push(stream);
    }
    assert_eq!(coordinator.metrics.open_streams("watch"), 3);
    assert_eq!(coordinator.metrics.open_streams("status"), 2);
    drop(streams);
    drop(statuses);
    // Nothing changes in the store from here on: only the clients leaving
    // can end the streams.
    eventually(Duration::from_secs(5), "every stream to end", || async {
        let (w, s) = (
            coordinator.metrics.open_streams("watch"),
            coordinator.metrics.open_streams("status"),
        );
        check(
            w == 0 && s == 0,
            format!("{w} watch and {s} status streams open"),
        )
    })
    .await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_started_while_routes_exist_is_ready_only_once_it_serves_them() -> anyhow::Result<()>
{
    // Before the fix `/ready` said yes as soon as a configuration was
    // installed, while the route still waited for its backend to warm up on
    // this proxy — and the proxy answered 404 for it.
    let coordinator = Coordinator::start().await?;
    let blue = tokio::task::block_in_place(backend)?;
    let address: SocketAddr = blue.address("http")?.parse()?;
    let first = Proxy::start("p1", &coordinator).await?;
    let yaml = format!(
        "{}{}{}",
        manifests::base(),
        manifests::backend("blue", address),
        manifests::route("blue", "v1", "30s")
    );
    coordinator.apply(&yaml).await?;
    eventually(WAIT, "the route served by the first proxy", || async {
        let code = first.get().await;
        check(code == 200, format!("answered {code}"))
    })
    .await;
    let route = ObjectName::new(manifests::NAMESPACE, manifests::ROUTE);
    let row = coordinator.bound.coordinator.status().routes[0].clone();
    assert!(row.active_generation.is_some(), "{route}: {row:?}");

    // The backend stalls (SIGSTOP) while the second proxy starts: its
    // first health check hangs, so for a while it holds the route but
    // cannot serve it yet. The first proxy keeps it (one slow check is not
    // enough to take an endpoint out).
    blue.pause();
    let second = Proxy::start("p2", &coordinator).await?;
    eventually(WAIT, "the second proxy's configuration", || async {
        let held = second.metric("switchyard_proxy_config_version");
        check(held > 0.0, "nothing yet")
    })
    .await;
    let stalled_ready = second.dataplane.is_ready();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stalled_ready = stalled_ready || second.dataplane.is_ready();
    blue.resume();
    assert!(
        !stalled_ready,
        "ready while the route waited for its backend (it would answer 404)"
    );
    let mut readies = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if second.dataplane.is_ready() {
            readies += 1;
            let code = second.get().await;
            assert_eq!(code, 200, "/ready said yes, and the route answered {code}");
            if readies >= 20 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(readies >= 20, "the second proxy never became ready");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_applied_before_any_proxy_waits_and_is_served_once_one_comes() -> anyhow::Result<()>
{
    // Before the fix the first generation timed out ("0 live proxies"),
    // was abandoned, and the route was never served once proxies came.
    let coordinator = Coordinator::start().await?;
    let blue = tokio::task::block_in_place(backend)?;
    let address: SocketAddr = blue.address("http")?.parse()?;
    let yaml = format!(
        "{}{}{}",
        manifests::base(),
        manifests::backend("blue", address),
        manifests::route("blue", "v1", "500ms")
    );
    coordinator.apply(&yaml).await?;
    // Ten timeouts' worth with nobody to judge readiness.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let row = coordinator.bound.coordinator.status().routes[0].clone();
    assert!(row.pending_generation.is_some(), "{row:?}");
    assert_eq!(row.last_failure, None, "{row:?}");
    assert!(
        row.evidence
            .as_deref()
            .is_some_and(|e| e.contains("0 live proxies")),
        "{row:?}"
    );
    let proxy = Proxy::start("p1", &coordinator).await?;
    eventually(WAIT, "the route served", || async {
        let code = proxy.get().await;
        check(code == 200, format!("answered {code}"))
    })
    .await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_cutover_is_not_a_successful_wait() -> anyhow::Result<()> {
    // Before: `on-timeout: force` switched to the unwarmed backend and
    // `apply --wait` exited 0, though the README says a timed-out cutover
    // exits non-zero.
    let coordinator = Coordinator::start().await?;
    let _proxy = Proxy::start("p1", &coordinator).await?;
    proxies_registered(&coordinator, 1).await;
    // Nothing listens on the endpoint: the backend never becomes ready.
    let nobody: SocketAddr = "127.0.0.1:9".parse()?;
    let yaml = format!(
        "{}{}{}",
        manifests::base(),
        manifests::backend("dead", nobody),
        manifests::route("dead", "v1", "1s").replace(
            "annotations: {switchyard.io/cutover-timeout: 1s}",
            "annotations: {switchyard.io/cutover-timeout: 1s, switchyard.io/on-timeout: force}"
        )
    );
    let index = coordinator.apply(&yaml).await?;
    let route = ObjectName::new(manifests::NAMESPACE, manifests::ROUTE);
    let generation = coordinator.bound.coordinator.status().routes[0]
        .pending_generation
        .context("pending")?;
    let waited = coordinator
        .admin()
        .wait_ready(&[(route, generation)].into(), index, WAIT, |_| {})
        .await;
    assert!(
        matches!(waited, Err(switchyard::client::WaitError::Forced { .. })),
        "{waited:?}"
    );
    Ok(())
}
