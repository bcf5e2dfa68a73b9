//! What the live-cluster tests share beyond `switchyard-test-support`
//! (whose fake API server, `shop` objects and `eventually` they use): a
//! real `kube::Client` for the fake server, so the real HTTP and watch
//! path is exercised; watch settings with fast retries; and how long a
//! wait may take.

#![allow(dead_code)] // each test file uses a different part

pub mod backend_tls;
pub mod logs;
pub mod mcs;

use std::time::Duration;
use switchyard_kubeconfig::live::{ClusterSource, WatchSettings};

use switchyard_test_support::fake_kube::FakeApiServer;

/// How long any one wait of these tests may take.
pub const WAIT: Duration = Duration::from_secs(10);

/// A kube client and a cluster source for a fake API server.
pub trait Clients {
    /// A client for this server, sending `x-test-client: <tag>`.
    fn client(&self, tag: &str) -> kube::Client;
    /// A cluster source named `name` for this server.
    fn source(&self, name: &str) -> ClusterSource;
}

impl Clients for FakeApiServer {
    fn client(&self, tag: &str) -> kube::Client {
        let url = format!("http://{}", self.addr).parse().expect("url");
        let mut config = kube::Config::new(url);
        config.headers.push((
            "x-test-client".parse().expect("header name"),
            tag.parse().expect("header value"),
        ));
        kube::Client::try_from(config).expect("client")
    }

    fn source(&self, name: &str) -> ClusterSource {
        ClusterSource::new(name, self.client(name))
    }
}

/// Watch settings for tests: fast retries.
pub fn fast() -> WatchSettings {
    WatchSettings {
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
        watch_timeout_secs: 60,
        probe_interval: Duration::from_millis(100),
    }
}

/// A watcher over `server` (as cluster `east`) that keeps running, and
/// the states it publishes: for tests that need the cache to remember an
/// object's last good version across changes.
pub fn watching(
    server: &FakeApiServer,
) -> (
    tokio::sync::watch::Receiver<Option<switchyard_kubeconfig::live::DesiredState>>,
    tokio::task::JoinHandle<()>,
) {
    watching_sources(vec![server.source("east")])
}

/// [`watching`] over several clusters.
pub fn watching_sources(
    sources: Vec<ClusterSource>,
) -> (
    tokio::sync::watch::Receiver<Option<switchyard_kubeconfig::live::DesiredState>>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = tokio::sync::watch::channel(None);
    let task = tokio::spawn(switchyard_kubeconfig::live::watch_clusters_with(
        sources,
        switchyard_proto::model::CONTROLLER_NAME,
        fast(),
        tx,
        std::future::pending::<()>(),
    ));
    (rx, task)
}

/// The first state the watchers publish for `server` (as cluster
/// `east`); the watchers stop after it.
pub async fn desired_once(server: &FakeApiServer) -> switchyard_kubeconfig::live::DesiredState {
    let (rx, task) = watching(server);
    let state =
        switchyard_test_support::eventually("desired state", WAIT, async || rx.borrow().clone())
            .await
            .expect("the watchers publish");
    task.abort();
    state
}

/// `n` live proxies as the coordinators report them, each with one bound
/// listener socket for port 80 serving every Gateway (`--listener 80=…`).
pub fn fleet(n: usize) -> Vec<switchyard_proto::model::ProxyStatus> {
    (0..n)
        .map(|i| switchyard_proto::model::ProxyStatus {
            id: format!("proxy-{i}"),
            zone: "zone-a".into(),
            admin_address: format!("127.0.0.1:{}", 9000 + i),
            live: true,
            listeners: Some(vec![switchyard_proto::model::ListenerBinding {
                gateway: None,
                port: 80,
                address: "0.0.0.0:8080".into(),
                bound: true,
                error: None,
            }]),
        })
        .collect()
}

/// One publish with `proxies` under `lease`, asserting that no write
/// failed and nothing stopped it.
pub async fn publish_clean(
    publisher: &mut switchyard_kubeconfig::live::StatusPublisher,
    state: &switchyard_kubeconfig::live::DesiredState,
    rows: &[switchyard_proto::model::RouteStatus],
    proxies: &[switchyard_proto::model::ProxyStatus],
    lease: &impl switchyard_kubeconfig::live::Lease,
) {
    let out = publisher.publish(state, rows, proxies, lease).await;
    assert!(out.is_clean(), "{out:?}");
}
