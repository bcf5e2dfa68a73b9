//! Shared pieces of the proxy's integration tests: fake backends (the echo
//! server, an upgrade-echo one), model fixtures, a proxy started
//! in-process and an HTTP client. Waiting with
//! deadlines instead of sleeps is `switchyard_test_support`'s
//! `eventually`, re-exported here.
#![allow(dead_code)]
// Helpers of tests: a panic is how they report a broken fixture.
#![allow(clippy::unwrap_used)]

pub mod client;
pub mod echo;
pub mod raw;
pub mod upgrade;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use switchyard_proto::model::*;
use switchyard_proxy::router::ListenerKey;
use switchyard_proxy::{
    BoundListener, DataPlane, DataPlaneSettings, HealthSettings, ServingConfig,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use switchyard_test_support::eventually;

/// Settings for tests: fast health checks, short timeouts.
pub fn test_settings() -> DataPlaneSettings {
    DataPlaneSettings {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(5),
        health: HealthSettings {
            interval: Duration::from_millis(50),
            timeout: Duration::from_millis(500),
            healthy_threshold: 2,
            unhealthy_threshold: 2,
        },
        drain_idle_grace: Duration::from_millis(500),
        drain_timeout: Duration::from_secs(10),
        ..DataPlaneSettings::default()
    }
}

/// The GatewayClass every test Gateway uses.
pub const CLASS: &str = "switchyard";

/// `GatewayClass switchyard` served by switchyard's controller.
pub fn gateway_class() -> GatewayClass {
    GatewayClass {
        meta: ObjectMeta::named("", CLASS),
        controller_name: CONTROLLER_NAME.to_owned(),
    }
}

/// A Namespace with labels.
pub fn namespace(name: &str, labels: &[(&str, &str)]) -> Namespace {
    let mut meta = ObjectMeta::named("", name);
    for (k, v) in labels {
        meta.labels.insert((*k).to_owned(), (*v).to_owned());
    }
    Namespace { meta }
}

/// A Service with one port named `http`.
pub fn service(namespace: &str, name: &str, port: u16, revision: u64) -> Service {
    let mut meta = ObjectMeta::named(namespace, name);
    meta.revision = revision;
    Service {
        meta,
        ports: vec![ServicePort {
            name: Some("http".to_owned()),
            port,
            target_port: None,
            app_protocol: None,
        }],
    }
}

/// One EndpointSlice per address (each test backend listens on its own
/// port, and a slice has one port list for all its endpoints).
pub fn slices(
    namespace: &str,
    service: &str,
    addrs: &[SocketAddr],
    revision: u64,
) -> Vec<EndpointSlice> {
    addrs
        .iter()
        .enumerate()
        .map(|(i, addr)| {
            let mut meta = ObjectMeta::named(namespace, format!("{service}-{i}"));
            meta.revision = revision;
            meta.labels
                .insert(SERVICE_NAME_LABEL.to_owned(), service.to_owned());
            EndpointSlice {
                meta,
                address_type: "IPv4".to_owned(),
                ports: vec![EndpointPort {
                    name: Some("http".to_owned()),
                    port: addr.port(),
                }],
                endpoints: vec![Endpoint {
                    addresses: vec![addr.ip().to_string()],
                    ready: true,
                    serving: true,
                    terminating: false,
                    zone: None,
                }],
                cluster: None,
            }
        })
        .collect()
}

/// Parses Kubernetes YAML with the project's own parser.
pub fn parse_yaml(text: &str) -> Vec<Resource> {
    switchyard_kubeconfig::parse_documents("test", text).expect("test YAML parses")
}

/// Splits resources into a snapshot (everything but routes) and routes.
pub fn snapshot_of(version: u64, resources: Vec<Resource>) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let mut snapshot = ConfigSnapshot {
        version,
        ..Default::default()
    };
    let mut routes = Vec::new();
    for resource in resources {
        routes.extend(snapshot.add(resource));
    }
    (snapshot, routes)
}

/// A test Gateway `ns/gw` with one HTTP listener on port 80 accepting
/// routes from all namespaces, and an HTTPRoute `ns/<route>` sending every
/// request to `backend:8080`.
pub fn simple_route_yaml(ns: &str, route: &str, backend: &str) -> String {
    format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {route}, namespace: {ns}}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - backendRefs: [{{name: {backend}, port: 8080}}]
"#
    )
}

/// The Gateway of [`simple_route_yaml`].
pub fn simple_gateway_yaml(ns: &str) -> String {
    format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {ns}}}
spec:
  gatewayClassName: {CLASS}
  listeners:
  - {{name: http, port: 80, protocol: HTTP}}
"#
    )
}

/// The listener key of [`simple_gateway_yaml`].
pub fn simple_listener(ns: &str) -> ListenerKey {
    ListenerKey {
        gateway: Some(ObjectName::new(ns, "gw")),
        port: 80,
    }
}

/// A data plane serving on 127.0.0.1 sockets in this process.
pub struct Proxy {
    /// The data plane.
    pub dp: Arc<DataPlane>,
    /// Local address per listener, in the order given.
    pub addrs: Vec<SocketAddr>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Proxy {
    /// Starts a data plane with one socket per key, each on a fresh port.
    pub async fn start(settings: DataPlaneSettings, keys: Vec<ListenerKey>) -> Proxy {
        let mut listeners = Vec::new();
        for key in keys {
            let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
            listeners.push((key, switchyard_proxy::bind_reuseport(addr).unwrap()));
        }
        Proxy::start_on(settings, listeners)
    }

    /// Starts a data plane on already bound sockets.
    pub fn start_on(
        settings: DataPlaneSettings,
        listeners: Vec<(ListenerKey, tokio::net::TcpListener)>,
    ) -> Proxy {
        Proxy::serve(new_data_plane(settings), listeners)
    }

    /// Serves an existing (possibly already configured) data plane on
    /// already bound sockets.
    pub fn serve(
        dp: Arc<DataPlane>,
        listeners: Vec<(ListenerKey, tokio::net::TcpListener)>,
    ) -> Proxy {
        let addrs = listeners
            .iter()
            .map(|(_, l)| l.local_addr().unwrap())
            .collect();
        let bound: Vec<BoundListener> = listeners
            .into_iter()
            .enumerate()
            .map(|(i, (key, listener))| BoundListener {
                name: format!("test-{i}"),
                key,
                listener,
            })
            .collect();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(Arc::clone(&dp).serve(bound, async move {
            let _ = rx.await;
        }));
        Proxy {
            dp,
            addrs,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// Installs `snapshot` with `routes` served.
    pub fn install(&self, snapshot: ConfigSnapshot, routes: Vec<HttpRoute>) {
        self.dp.install(ServingConfig {
            snapshot: Arc::new(snapshot),
            routes,
        });
    }

    /// Waits until each backend reports `expected` healthy endpoints out of
    /// `expected`.
    pub async fn wait_healthy(&self, backends: &[(BackendKey, u32)]) {
        wait_healthy(&self.dp, backends).await;
    }

    /// Starts the drain and waits until `serve` returned.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }

    /// Starts the drain without waiting.
    pub fn begin_shutdown(&mut self) -> JoinHandle<std::io::Result<()>> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.take().expect("started")
    }
}

/// A data plane with its own metrics registry.
pub fn new_data_plane(settings: DataPlaneSettings) -> Arc<DataPlane> {
    let mut registry = prometheus_client::registry::Registry::default();
    DataPlane::new(settings, &mut registry)
}

/// Waits until each backend reports `expected` healthy endpoints out of
/// `expected` on `dp`.
pub async fn wait_healthy(dp: &Arc<DataPlane>, backends: &[(BackendKey, u32)]) {
    for (key, expected) in backends {
        eventually(&format!("{key} healthy"), Duration::from_secs(10), || {
            let dp = Arc::clone(dp);
            let key = key.clone();
            let expected = *expected;
            async move {
                let r = dp
                    .readiness(&key)
                    .ok_or_else(|| anyhow::anyhow!("not tracked"))?;
                anyhow::ensure!(
                    r.healthy == expected && r.total == expected,
                    "readiness {r:?}"
                );
                Ok(())
            }
        })
        .await
        .unwrap();
    }
}

/// All keys of a set, for `set_warming`.
pub fn keys(backends: &[&BackendKey]) -> BTreeSet<BackendKey> {
    backends.iter().map(|k| (*k).clone()).collect()
}
