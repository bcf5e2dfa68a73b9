//! The real control-plane client against fake coordinators ([`fake`]):
//! real gRPC on 127.0.0.1, the test playing the coordinators' side through
//! channels, and the client's log lines captured so each test can say what
//! was logged at which level.
//!
//! - `watch`: the configuration stream (versions, decode failures,
//!   unreachable coordinators, lag).
//! - `assembly`: chunks, deltas and their sequence — pure, and through a
//!   fake coordinator's stream.
//! - `membership`: registration, leader hints, re-registration,
//!   deregistration.
//!
//! Every wait is on an event (a call arriving, a stream dropped) and
//! bounded by [`within`]; nothing sleeps to synchronize.

mod assembly;
mod fake;
mod membership;
mod watch;

use super::coordinators::CoordinatorAddress;
use super::{ControlConfig, ControlMetrics};
use crate::router::testkit::{INFRA, World, prefix, route, rule, svc};
use crate::{DataPlane, DataPlaneSettings};
use fake::Fake;
use prometheus_client::registry::Registry;
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_proto::model::{ConfigSnapshot, RouteGeneration, RouteRecord};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long any one expected event may take.
const WAIT: Duration = Duration::from_secs(5);

/// Awaits `future`, failing the test with `what` after [`WAIT`].
async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, future).await {
        Ok(out) => out,
        Err(_) => panic!("waited {WAIT:?} for {what}"),
    }
}

/// The log lines of this test's thread (the client's tasks run on it: the
/// tests use tokio's current-thread runtime), without timestamps.
struct Logs {
    buffer: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Logs {
    fn capture() -> Logs {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .without_time()
            .with_writer(move || Sink(sink.clone()))
            .finish();
        Logs {
            buffer,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    fn lines(&self) -> Vec<String> {
        let bytes = self.buffer.lock().unwrap().clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Lines at `level` (`"INFO"`, `"WARN"`, `"ERROR"`) containing `text`.
    fn at(&self, level: &str, text: &str) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| l.trim_start().starts_with(level) && l.contains(text))
            .collect()
    }

    /// Every WARN and ERROR line.
    fn warnings(&self) -> Vec<String> {
        let mut lines = self.at("WARN", "");
        lines.extend(self.at("ERROR", ""));
        lines
    }
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A proxy's control-plane client (and its data plane) running against
/// some coordinators.
struct Proxy {
    dataplane: Arc<DataPlane>,
    registry: Registry,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Starts the client as proxy `p1` with `coordinators` in that order
    /// of preference.
    fn start(coordinators: &[&str]) -> Proxy {
        Proxy::start_with_backoff(coordinators, Duration::from_millis(20))
    }

    /// [`Proxy::start`] with its own back-off after a failed call.
    fn start_with_backoff(coordinators: &[&str], reconnect_backoff: Duration) -> Proxy {
        let mut registry = Registry::default();
        let dataplane = DataPlane::new(DataPlaneSettings::default(), &mut registry);
        let metrics = ControlMetrics::register(&mut registry);
        let config = ControlConfig {
            proxy_id: "p1".into(),
            zone: "a".into(),
            admin_address: String::new(),
            coordinators: coordinators
                .iter()
                .map(|a| CoordinatorAddress {
                    zone: None,
                    address: a.to_string(),
                })
                .collect(),
            rpc_timeout: Duration::from_secs(2),
            apply_wait_limit: Duration::from_secs(10),
            reconnect_backoff,
            security: switchyard_tls::Security::Insecure,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(super::run(config, dataplane.clone(), metrics, async {
            let _ = stopped.await;
        }));
        Proxy {
            dataplane,
            registry,
            stop: Some(stop),
            task,
        }
    }

    /// Against one fake coordinator.
    fn against(fake: &Fake) -> Proxy {
        Proxy::start(&[&fake.address])
    }

    /// Stops the client (it deregisters) and waits until it has.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        within("the client to stop", &mut self.task).await.unwrap();
    }

    /// The value of metric `name` (a line `name value`), NaN if absent.
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

    fn coordinator_errors(&self) -> f64 {
        self.metric("switchyard_proxy_coordinator_errors_total")
    }
}

/// A configuration of `routes` served routes with no backends (nothing to
/// warm: each is applied at once), every one at `generation`.
pub(super) fn served(version: u64, routes: &[&str], generation: u64) -> ConfigSnapshot {
    let mut world = World::new();
    for name in routes {
        world.route(route(INFRA, name, vec![rule(prefix("/"), vec![])]));
    }
    committed(&world, version, generation)
}

/// Route `name` sending everything to Service `cold`, which has no
/// endpoints: a proxy never warms it, so a generation of the route waits.
pub(super) fn waiting(version: u64, name: &str, generation: u64) -> ConfigSnapshot {
    let mut world = World::new();
    world.service(INFRA, "cold", &[8080]);
    world.route(route(
        INFRA,
        name,
        vec![rule(prefix("/"), vec![svc("cold", 1)])],
    ));
    committed(&world, version, generation)
}

/// `world` as configuration `version`, every route committed at
/// `generation`.
fn committed(world: &World, version: u64, generation: u64) -> ConfigSnapshot {
    let mut snapshot = world.snapshot.clone();
    snapshot.version = version;
    snapshot.routes = world
        .routes
        .iter()
        .map(|r| RouteRecord {
            name: r.meta.object_name(),
            active: Some(RouteGeneration {
                generation,
                spec: r.clone(),
            }),
            pending: None,
            last_failure: None,
            forced: false,
            active_since: 0,
        })
        .collect();
    snapshot
}

/// An address on 127.0.0.1 where nothing listens.
async fn nothing_listening() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().to_string()
}
