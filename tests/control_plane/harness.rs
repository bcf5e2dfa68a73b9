//! The in-process control plane the tests of `control_plane.rs` drive: one
//! real coordinator (`server::run` on 127.0.0.1 port 0) and real proxy
//! data planes with the real control client, a demo backend process, and
//! how long a wait may take.

use anyhow::Context;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use switchyard::client::AdminClient;
use switchyard::demo::manifests;
use switchyard_coordinator::raft::{NodeConfig, RaftSettings};
use switchyard_coordinator::server::metrics::CoordinatorMetrics;
use switchyard_coordinator::server::{Bound, CoordinatorConfig, Limits};
use switchyard_harness::{Process, ProcessSpec};
use switchyard_proto::model::{BackendEvidence, BackendKey, CutoverSettings};
use switchyard_proto::pb;
use switchyard_proxy::control::coordinators::CoordinatorAddress;
use switchyard_proxy::control::{self, ControlConfig, ControlMetrics};
use switchyard_proxy::router::ListenerKey;
use switchyard_proxy::{BoundListener, DataPlane, DataPlaneSettings, HealthSettings};
use switchyard_tls::Security;
use tokio::sync::{oneshot, watch};

use switchyard_test_support::eventually;
use switchyard_test_support::eventually::holds;

pub const WAIT: Duration = Duration::from_secs(20);

/// One coordinator in this process.
pub struct Coordinator {
    pub address: String,
    pub bound: Bound,
    pub metrics: CoordinatorMetrics,
    /// Where `metrics` are registered, for [`Coordinator::metrics_text`].
    registry: Registry,
    stop: Option<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Coordinator {
    pub async fn start() -> anyhow::Result<Coordinator> {
        Self::start_paced(2_000).await
    }

    /// [`Coordinator::start`] with `--paced-fleet-calls-per-second`.
    pub async fn start_paced(paced_fleet_calls_per_second: u32) -> anyhow::Result<Coordinator> {
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
            paced_fleet_calls_per_second,
        };
        let mut registry = Registry::default();
        let metrics = CoordinatorMetrics::register(&mut registry);
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
            registry,
            stop: Some(stop),
            _dir: dir,
        };
        eventually("a leader", WAIT, async || {
            holds(
                coordinator.bound.coordinator.node().is_leader(),
                || "not leader yet",
            )
        })
        .await?;
        Ok(coordinator)
    }

    /// The coordinator's metrics as `/metrics` shows them.
    pub fn metrics_text(&self) -> anyhow::Result<String> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }

    pub fn admin(&self) -> AdminClient {
        AdminClient::new(
            vec![self.address.clone()],
            Duration::from_secs(5),
            Security::Insecure,
        )
    }

    pub async fn apply(&self, yaml: &str) -> anyhow::Result<u64> {
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

    pub fn fleet_client(
        &self,
    ) -> pb::fleet_service_client::FleetServiceClient<tonic::transport::Channel> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.address))
            .expect("a valid address")
            .connect_lazy();
        pb::fleet_service_client::FleetServiceClient::new(channel)
    }

    /// Registers proxy `id` in zone `zone` through the fleet service, as a
    /// proxy played by hand; its registration.
    #[allow(dead_code)] // control_plane.rs plays no proxy by hand
    pub async fn register(&self, id: &str, zone: &str) -> anyhow::Result<u64> {
        let reply = self
            .fleet_client()
            .register(pb::RegisterRequest::for_proxy(id, zone, ""))
            .await?
            .into_inner();
        Ok(reply.registration)
    }

    /// Registers proxy `id` in zone `zone` (played by hand, see
    /// [`Coordinator::register`]) and builds its heartbeat: no generations
    /// served, so each one sent only renews its lease.
    #[allow(dead_code)] // control_plane.rs plays no proxy by hand
    pub async fn registered_heartbeat(
        &self,
        id: &str,
        zone: &str,
    ) -> anyhow::Result<pb::HeartbeatRequest> {
        Ok(pb::HeartbeatRequest {
            proxy_id: id.into(),
            registration: self.register(id, zone).await?,
            ..Default::default()
        })
    }

    /// Reports, as proxy `id` (played by hand) of `registration`, one
    /// healthy endpoint of `backend` at its current endpoint generation.
    #[allow(dead_code)] // control_plane.rs plays no proxy by hand
    pub async fn report_ready(
        &self,
        id: &str,
        registration: u64,
        backend: &BackendKey,
    ) -> anyhow::Result<()> {
        let endpoints = self
            .bound
            .coordinator
            .node()
            .state()
            .borrow()
            .endpoint_generation(backend)
            .ok_or_else(|| anyhow::anyhow!("{backend:?} has no endpoint generation"))?;
        let evidence = BackendEvidence {
            endpoints_generation: endpoints,
            healthy: 1,
            total: 1,
        };
        self.fleet_client()
            .report_readiness(pb::ReadinessReport {
                proxy_id: id.into(),
                registration,
                backends: vec![pb::BackendReadiness::from((backend, evidence))],
                ..Default::default()
            })
            .await?;
        Ok(())
    }

    pub fn admin_client(
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
pub struct Proxy {
    pub dataplane: Arc<DataPlane>,
    pub registry: Registry,
    pub address: SocketAddr,
    stop: watch::Sender<bool>,
}

impl Proxy {
    pub async fn start(id: &str, coordinator: &Coordinator) -> anyhow::Result<Proxy> {
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
    pub fn metric(&self, name: &str) -> f64 {
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
    pub async fn get(&self) -> u16 {
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

pub fn backend() -> anyhow::Result<Process> {
    Process::start(ProcessSpec::new(
        "backend-blue",
        env!("CARGO_BIN_EXE_switchyard"),
        ["backend", "--name", "blue", "--listen", "127.0.0.1:0"]
            .map(String::from)
            .to_vec(),
    ))
}

pub async fn proxies_registered(coordinator: &Coordinator, count: usize) -> anyhow::Result<()> {
    eventually("proxies registered", WAIT, async || {
        let status = coordinator.bound.coordinator.status();
        holds(status.proxies.len() >= count, || {
            format!("{:?}", status.proxies)
        })
    })
    .await?;
    Ok(())
}
