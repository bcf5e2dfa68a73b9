//! Simulated proxies: M agents as tokio tasks in this one process, each
//! with its own id, a zone among three and (under TLS) its own
//! certificate, that register, watch, warm by reporting evidence and
//! heartbeat what they serve — the control-plane half of a real proxy,
//! without a data path.
//!
//! Layout: `watch` decodes the stream (the only module that does), `view`
//! turns a configuration into what is served and reported, `membership`
//! makes the unary calls. This file owns the fleet: starting and stopping
//! agents, the watch task, the evidence hold (a switch that keeps pending
//! transitions pending, for the leader-kill figure) and the counters the
//! figures read (time to the first complete configuration per agent,
//! updates, bytes, decode failures).

mod membership;
pub mod view;
pub mod watch;

use crate::cluster::Cluster;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchyard_proto::pb::fleet_service_client::FleetServiceClient;
use switchyard_tls::{Identity, Security};
use tokio::sync::watch as channel;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use view::View;

/// Largest configuration message an agent accepts.
const MAX_MESSAGE: usize = 1024 * 1024 * 1024;

/// A payload from which size on its decode leaves the async workers.
const LARGE_PAYLOAD: usize = 64 * 1024;

/// Deadline of one unary fleet call.
const RPC_TIMEOUT: Duration = Duration::from_secs(10);

/// One agent's identity, and the leader its watch stream named last (its
/// membership task follows it, as a proxy does).
pub(crate) struct Agent {
    id: String,
    zone: String,
    leader: channel::Sender<Option<String>>,
}

impl Agent {
    /// A coordinator named `address` the leader on the watch stream:
    /// membership hears of it only when it differs from the one named
    /// before.
    fn leader_named(&self, address: &str) {
        self.leader.send_if_modified(|named| {
            let moved = named.as_deref() != Some(address);
            if moved {
                *named = Some(address.to_string());
            }
            moved
        });
    }
}

/// What the fleet's agents share with it.
pub struct FleetShared {
    /// While true, agents report no evidence beyond what they reported
    /// already (see [`view::reportable`]).
    hold: channel::Sender<bool>,
    /// The version counted as "current" for the resync figure.
    target_version: AtomicU64,
    /// Per agent: from its first Watch call to holding a complete
    /// configuration at `target_version` or newer.
    resync: Mutex<Vec<Option<Duration>>>,
    /// Per agent: the version of the configuration it holds (0: none).
    held_versions: Vec<AtomicU64>,
    /// Registrations that succeeded (re-registrations included).
    pub registrations: AtomicU64,
    /// Failed unary calls and broken streams.
    pub rpc_errors: AtomicU64,
    /// Configuration updates received.
    pub updates: AtomicU64,
    /// Bytes of configuration received.
    pub bytes: AtomicU64,
    /// Updates that did not decode.
    pub decode_errors: AtomicU64,
    /// The last snapshot decoded, for the agents that receive the same
    /// bytes (see `watch`). An async lock: agents wait for the one
    /// decoding instead of all decoding the same bytes at once.
    snapshots: tokio::sync::Mutex<watch::Shared>,
}

/// Running agents.
pub struct Fleet {
    shared: Arc<FleetShared>,
    stop: channel::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

fn fleet_client(
    address: &str,
    security: &Security,
    streaming: bool,
) -> anyhow::Result<FleetServiceClient<Channel>> {
    let channel =
        switchyard_tls::client::channel(address, security, None, Duration::from_secs(2), |e| {
            let e = e
                .tcp_nodelay(true)
                .http2_keep_alive_interval(Duration::from_secs(5))
                .keep_alive_timeout(Duration::from_secs(5));
            if streaming { e } else { e.timeout(RPC_TIMEOUT) }
        })?;
    Ok(FleetServiceClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE))
}

impl Fleet {
    /// Starts `count` agents named `<prefix>-<n>`, in zones `zone-a`,
    /// `zone-b`, `zone-c` by turn; agent n watches and calls coordinator
    /// n mod 3 first. `target_version` is what counts as current for the
    /// resync figure.
    pub fn start(
        cluster: &Cluster,
        prefix: &str,
        count: usize,
        target_version: u64,
    ) -> anyhow::Result<Fleet> {
        let (hold, _) = channel::channel(false);
        let shared = Arc::new(FleetShared {
            hold,
            target_version: AtomicU64::new(target_version),
            resync: Mutex::new(vec![None; count]),
            held_versions: (0..count).map(|_| AtomicU64::new(0)).collect(),
            registrations: AtomicU64::new(0),
            rpc_errors: AtomicU64::new(0),
            updates: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            decode_errors: AtomicU64::new(0),
            snapshots: tokio::sync::Mutex::new(watch::Shared::default()),
        });
        let (stop, _) = channel::channel(false);
        let mut tasks = Vec::with_capacity(2 * count);
        for n in 0..count {
            let id = format!("{prefix}-{n:04}");
            let zone = ["zone-a", "zone-b", "zone-c"][n % 3].to_string();
            let security = cluster.security(&Identity::Proxy(id.clone()))?;
            let mut unary = Vec::new();
            let mut streaming = Vec::new();
            for address in &cluster.addresses {
                unary.push((address.clone(), fleet_client(address, &security, false)?));
                streaming.push((address.clone(), fleet_client(address, &security, true)?));
            }
            let agent = Arc::new(Agent {
                id,
                zone,
                leader: channel::Sender::new(None),
            });
            let (views_tx, views_rx) = channel::channel(Arc::new(View::default()));
            let router = membership::Router::new(unary, n);
            tasks.push(tokio::spawn(membership::run(
                agent.clone(),
                shared.clone(),
                router,
                views_rx,
                stop.subscribe(),
            )));
            tasks.push(tokio::spawn(run_watch(
                agent,
                n,
                shared.clone(),
                streaming,
                views_tx,
                stop.subscribe(),
            )));
        }
        Ok(Fleet {
            shared,
            stop,
            tasks,
        })
    }

    /// The counters.
    pub fn shared(&self) -> &FleetShared {
        &self.shared
    }

    /// Holds evidence back (true) or lets it flow (false).
    pub fn hold_evidence(&self, hold: bool) {
        self.shared.hold.send_replace(hold);
    }

    /// The oldest configuration version any agent holds (0: some agent
    /// holds none yet).
    pub fn oldest_held_version(&self) -> u64 {
        self.shared
            .held_versions
            .iter()
            .map(|v| v.load(Ordering::Relaxed))
            .min()
            .unwrap_or(0)
    }

    /// Payloads (snapshots, deltas) decoded, and payloads taken from
    /// another agent's decode of the same bytes.
    pub async fn snapshot_decodes(&self) -> (u64, u64) {
        let s = self.shared.snapshots.lock().await;
        (s.decoded, s.shared)
    }

    /// Per agent, the time to its first complete configuration at the
    /// target version (`None`: not yet).
    pub fn resync_times(&self) -> Vec<Option<Duration>> {
        self.shared
            .resync
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Stops every agent: each deregisters, within 10 s all together
    /// (those still busy then are aborted).
    pub async fn stop(self) {
        self.stop.send_replace(true);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        for task in self.tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                abort.abort();
            }
        }
    }
}

/// One agent's watch: a stream from its coordinator (then the next one
/// after a failure), every update taken by [`watch::Held`] and every new
/// configuration published as a [`View`].
async fn run_watch(
    agent: Arc<Agent>,
    first: usize,
    fleet: Arc<FleetShared>,
    clients: Vec<(String, FleetServiceClient<Channel>)>,
    views: channel::Sender<Arc<View>>,
    mut stop: channel::Receiver<bool>,
) {
    let mut held = watch::Held::default();
    let mut started: Option<Instant> = None;
    let mut next = first;
    while !*stop.borrow() {
        let Some((_, client)) = clients.get(next % clients.len().max(1)) else {
            return;
        };
        next += 1;
        let mut client = client.clone();
        started.get_or_insert_with(Instant::now);
        let request = held.request(&agent.id);
        let opened = tokio::select! {
            opened = client.watch(request) => opened,
            _ = stop.changed() => return,
        };
        let mut stream = match opened {
            Ok(s) => s.into_inner(),
            Err(_) => {
                fleet.rpc_errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        loop {
            let message = tokio::select! {
                m = stream.message() => m,
                _ = stop.changed() => return,
            };
            let update = match message {
                Ok(Some(update)) => update,
                Ok(None) | Err(_) => {
                    fleet.rpc_errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            };
            fleet.updates.fetch_add(1, Ordering::Relaxed);
            fleet
                .bytes
                .fetch_add(watch::update_bytes(&update), Ordering::Relaxed);
            if !update.leader.is_empty() {
                agent.leader_named(&update.leader);
            }
            // The last chunk of a payload may cost a decode (a whole
            // snapshot: about 0.1 s at 10,000 routes) or only a comparison
            // with what another agent decoded (see `watch`); a large one
            // is decoded off the async workers, so the other agents'
            // heartbeats keep their leases while 200 agents resync.
            let received = held
                .receive_in_fleet(update, &fleet.snapshots, LARGE_PAYLOAD)
                .await;
            match received {
                Ok(watch::Outcome::Stale) => continue,
                Ok(watch::Outcome::Version) => {
                    let mut v = View::clone(&views.borrow());
                    v.version = held.version;
                    views.send_replace(Arc::new(v));
                }
                Ok(watch::Outcome::Changed) => {
                    if let Some(config) = &held.config {
                        views.send_replace(Arc::new(config.view(held.version)));
                    }
                }
                Err(_) => {
                    fleet.decode_errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
            if held.config.is_some()
                && let Some(slot) = fleet.held_versions.get(first)
            {
                slot.store(held.version, Ordering::Relaxed);
            }
            let target = fleet.target_version.load(Ordering::Relaxed);
            if held.complete_at(target)
                && let Some(t0) = started
                && let Ok(mut resync) = fleet.resync.lock()
                && let Some(slot) = resync.get_mut(first)
                && slot.is_none()
            {
                *slot = Some(t0.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
