//! A running Raft node: the API the coordinator's services call.
//!
//! Owns: starting Raft on the sled store (forming the cluster from `--peers`
//! on first start, rejoining on restart, or waiting in join mode),
//! proposals (locally on the leader, forwarded over `RaftService.Propose`
//! from a follower), membership changes, leader lookup, the state-machine
//! watch channel and shutdown. Does not own: the gRPC server (the caller
//! mounts [`Node::raft_service`] on its own), what commands mean, or the
//! decision of what to propose.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use openraft::error::{InitializeError, RaftError};
use switchyard_proto::pb::RaftPayload;
use switchyard_proto::pb::raft_service_server::RaftServiceServer;
use tokio::sync::watch;
use tokio::time::Instant;

use super::config::{NodeConfig, RaftSettings};
use super::db::{Formation, StoreLiveness};
use super::error::{ForwardError, LeaderHint, NodeError, ProposeError};
use super::fingerprint::{ClusterIdentity, peers_string};
use super::membership::voters_of;
use super::network::{ChannelCache, NetworkFactory, RpcTimeouts};
use super::runtime::RaftRuntime;
use super::service::{GroupedWrites, LeaderContact, RaftGrpc, leader_hint, write_locally};
use super::types::{Node as PeerNode, NodeId, Raft, RaftMetrics};
use crate::state::{Command, CommandResponse, ReplicatedState};

/// How many leaders a proposal tries before giving up (each "not leader"
/// answer is definite — nothing was proposed — so trying again is safe).
const MAX_HOPS: usize = 3;

/// A coordinator's Raft node. Cheap to clone.
#[derive(Clone)]
pub struct Node {
    pub(super) inner: Arc<Inner>,
}

/// The shared part of a [`Node`]; [`super::membership`] extends `Node` too.
pub(super) struct Inner {
    pub(super) id: NodeId,
    pub(super) raft: Raft,
    state: watch::Receiver<Arc<ReplicatedState>>,
    identity: ClusterIdentity,
    channels: ChannelCache,
    /// Where openraft's tasks, peer connections and peer RPCs run.
    runtime: RaftRuntime,
    pub(super) settings: RaftSettings,
    liveness: StoreLiveness,
    /// Set by the first [`Node::shutdown`].
    stopped: std::sync::atomic::AtomicBool,
    contact: LeaderContact,
    grouped: GroupedWrites,
}

impl Node {
    /// Opens the sled store, builds the Raft instance and, on first start
    /// (store has no membership), calls `initialize(peers)` — every node
    /// calls it with the same set, which openraft allows. On restart it
    /// simply rejoins. With empty `peers` the node starts in join mode and
    /// waits to be added. Errors if `peers` does not contain `id`, or the
    /// store is locked by another process.
    pub async fn start(config: NodeConfig) -> Result<Node, NodeError> {
        let NodeConfig {
            id,
            peers,
            advertise_addr,
            data_dir,
            raft: settings,
            source_ip,
            security,
        } = config;
        if !peers.is_empty() && !peers.contains_key(&id) {
            return Err(NodeError::NotInPeers {
                id,
                peers: peers_string(&peers),
            });
        }
        if let Some(listed) = peers.get(&id).filter(|listed| **listed != advertise_addr) {
            tracing::warn!(node_id = id, %listed, %advertise_addr, "--peers lists this node at another address than it advertises");
        }
        let raft_config = settings.to_openraft().map_err(|e| NodeError::Settings {
            id,
            reason: e.to_string(),
        })?;

        let stores = {
            let dir = data_dir.clone();
            tokio::task::spawn_blocking(move || super::db::open(&dir))
                .await
                .map_err(|e| NodeError::Raft {
                    id,
                    reason: format!("store open task failed: {e}"),
                })??
        };

        let formation = match (stores.cluster.load_formation()?, peers.is_empty()) {
            (Some(stored), false) => {
                let given = Formation::from_peers(&peers);
                if given != stored {
                    // The cluster's identity is fixed at formation; later
                    // membership changes legitimately make --peers differ.
                    tracing::warn!(
                        node_id = id,
                        stored_peers = %stored.peers,
                        given_peers = %given.peers,
                        "--peers differs from the formation recorded in the data dir; keeping the recorded one"
                    );
                }
                Some(stored)
            }
            (Some(stored), true) => Some(stored),
            (None, false) => {
                let formation = Formation::from_peers(&peers);
                stores.cluster.save_formation(&formation).await?;
                Some(formation)
            }
            (None, true) => None,
        };
        tracing::info!(
            node_id = id,
            fingerprint = formation.as_ref().map(|f| f.fingerprint.as_str()).unwrap_or("none (join mode)"),
            data_dir = %data_dir.display(),
            "starting Raft node"
        );
        let identity = ClusterIdentity::new(id, formation, stores.cluster.clone());
        let runtime = RaftRuntime::start(id).map_err(|e| NodeError::Raft {
            id,
            reason: format!("cannot start the Raft runtime: {e}"),
        })?;
        let channels =
            ChannelCache::new(settings.rpc_timeout, source_ip, security, runtime.clone());
        let network = NetworkFactory::new(
            id,
            channels.clone(),
            identity.clone(),
            RpcTimeouts {
                rpc: settings.rpc_timeout,
                snapshot_chunk: settings.rpc_timeout,
            },
            settings.append_budget_bytes,
        );
        let state = stores.state.subscribe();
        let liveness = stores.liveness.clone();
        // Built on Raft's runtime, so every task openraft spawns runs there.
        let (log, state_machine) = (stores.log, stores.state);
        let raft =
            runtime
                .run(async move {
                    Raft::new(id, Arc::new(raft_config), network, log, state_machine).await
                })
                .await
                .ok_or_else(|| NodeError::Raft {
                    id,
                    reason: "the Raft runtime stopped while Raft started".to_owned(),
                })?
                .map_err(|e| NodeError::Raft {
                    id,
                    reason: e.to_string(),
                })?;

        let initialized = raft.is_initialized().await.map_err(|e| NodeError::Raft {
            id,
            reason: e.to_string(),
        })?;
        if !peers.is_empty() && !initialized {
            let members: BTreeMap<NodeId, PeerNode> = peers
                .iter()
                .map(|(peer, addr)| (*peer, PeerNode::new(addr.clone())))
                .collect();
            match raft.initialize(members).await {
                Ok(()) => {
                    tracing::info!(node_id = id, peers = %peers_string(&peers), "formed cluster")
                }
                // A peer's leader reached us first: we are already part of it.
                Err(RaftError::APIError(InitializeError::NotAllowed(e))) => {
                    tracing::info!(node_id = id, reason = %e, "cluster already formed")
                }
                Err(e) => {
                    return Err(NodeError::Initialize {
                        id,
                        peers: peers_string(&peers),
                        reason: e.to_string(),
                    });
                }
            }
        }
        Ok(Node {
            inner: Arc::new(Inner {
                id,
                raft,
                state,
                identity,
                channels,
                runtime,
                settings,
                liveness,
                stopped: std::sync::atomic::AtomicBool::new(false),
                contact: LeaderContact::default(),
                grouped: GroupedWrites::default(),
            }),
        })
    }

    /// This node's Raft id.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// The cluster fingerprint this node stamps on its Raft RPCs; `None`
    /// for a node in join mode that no leader has contacted yet.
    pub fn cluster_fingerprint(&self) -> Option<String> {
        self.inner.identity.current().map(|f| f.fingerprint)
    }

    /// The `RaftService` to mount on the coordinator's tonic server.
    pub fn raft_service(&self) -> RaftServiceServer<RaftGrpc> {
        RaftGrpc::new(
            self.inner.id,
            self.inner.raft.clone(),
            self.inner.identity.clone(),
            self.inner.settings.propose_timeout,
            self.inner.contact.clone(),
            self.inner.runtime.clone(),
            self.inner.grouped.clone(),
        )
        .into_server()
    }

    /// Time since this node, leading, last wrote a group of applies
    /// (`Command::Applies`) — its own or one a follower forwarded — if it
    /// did.
    pub fn since_grouped_write(&self) -> Option<Duration> {
        self.inner.grouped.since()
    }

    /// Time since this node last heard from a leader (`None` if never, or
    /// while it leads itself).
    pub fn since_leader_contact(&self) -> Option<Duration> {
        if self.is_leader() {
            return None;
        }
        self.inner.contact.since()
    }

    /// The state machine, updated after every apply.
    pub fn state(&self) -> watch::Receiver<Arc<ReplicatedState>> {
        self.inner.state.clone()
    }

    /// openraft's metrics (state, term, leader, membership, log indexes).
    pub fn metrics(&self) -> watch::Receiver<RaftMetrics> {
        self.inner.raft.metrics()
    }

    /// The current leader's id and address, when known.
    pub fn leader(&self) -> LeaderHint {
        let leader = self.inner.raft.metrics().borrow().current_leader;
        leader_hint(&self.inner.raft, leader)
    }

    /// True when this node is the leader.
    pub fn is_leader(&self) -> bool {
        let metrics = self.inner.raft.metrics();
        let metrics = metrics.borrow();
        metrics.state == ServerState::Leader && metrics.current_leader == Some(self.inner.id)
    }

    /// The voters of the current membership, `id -> address`.
    pub fn voters(&self) -> BTreeMap<NodeId, String> {
        voters_of(&self.inner.raft.metrics().borrow())
    }

    /// Proposes `command` and returns the state machine's response once it
    /// is applied. On the leader it writes locally; on a follower it
    /// forwards over `RaftService.Propose` to the leader (reused channel,
    /// deadline). With no leader known it waits up to
    /// [`RaftSettings::leader_wait`] for one, then fails with
    /// [`ProposeError::NoLeader`] naming this node's state.
    ///
    /// Retries only what is certainly not applied ("not leader" answers);
    /// a forward that fails in transit is returned as retryable
    /// [`ProposeError::LeaderUnreachable`], and the caller decides.
    pub async fn propose(&self, command: Command) -> Result<CommandResponse, ProposeError> {
        let id = self.inner.id;
        // Shared: a retry after a "not leader" answer writes the same
        // command again without copying it (a group carries many applies).
        let command = Arc::new(command);
        let deadline = Instant::now() + self.inner.settings.leader_wait;
        let mut hint: LeaderHint = None;
        let mut last_refusal = None;
        for _ in 0..MAX_HOPS {
            let (leader_id, leader_addr) = match hint.take() {
                Some(hint) => hint,
                None => {
                    self.wait_for_leader(deadline, last_refusal.is_some())
                        .await?
                }
            };
            let result = if leader_id == id {
                self.inner.grouped.note(&command);
                write_locally(
                    &self.inner.raft,
                    Arc::clone(&command),
                    self.inner.settings.propose_timeout,
                )
                .await
            } else {
                self.forward(leader_id, &leader_addr, &command).await?
            };
            match result {
                Ok(response) => return Ok(response),
                Err(ForwardError::NotLeader { leader }) => {
                    tracing::debug!(
                        node_id = id,
                        asked = leader_id,
                        ?leader,
                        "proposal reached a non-leader; retrying"
                    );
                    hint = leader.filter(|(next, _)| *next != leader_id);
                    last_refusal = Some(ProposeError::NotLeader {
                        node_id: leader_id,
                        leader: hint.clone(),
                    });
                }
                Err(ForwardError::Timeout { reason }) => {
                    return Err(ProposeError::Timeout {
                        node_id: leader_id,
                        what: format!("proposal ({reason})"),
                        waited: self.inner.settings.propose_timeout,
                        leader: Some((leader_id, leader_addr)),
                    });
                }
                // Our own Raft stopped: nothing to retry here.
                Err(ForwardError::Fatal { reason }) if leader_id == id => {
                    return Err(ProposeError::Fatal {
                        node_id: leader_id,
                        reason,
                    });
                }
                // The leader is shutting down: another one will take over.
                Err(ForwardError::Fatal { reason }) => {
                    return Err(ProposeError::LeaderUnreachable {
                        node_id: id,
                        leader_id,
                        leader_addr,
                        reason,
                    });
                }
            }
        }
        Err(last_refusal.unwrap_or(ProposeError::NotLeader {
            node_id: id,
            leader: self.leader(),
        }))
    }

    /// Proposes `command` on this node only, and only while it leads; never
    /// forwards and never retries. For the leader's own decisions: a
    /// decision rests on this leader's soft state, so if the node is no
    /// longer leader it is dropped (the next leader decides afresh), and if
    /// the entry is truncated after a step-down openraft's "forward to the
    /// leader" ends it here. The state machine's fence would refuse it in
    /// another term anyway; not sending it keeps the log clean.
    pub async fn propose_here(&self, command: Command) -> Result<CommandResponse, ProposeError> {
        let id = self.inner.id;
        let timeout = self.inner.settings.propose_timeout;
        match write_locally(&self.inner.raft, Arc::new(command), timeout).await {
            Ok(response) => Ok(response),
            Err(ForwardError::NotLeader { leader }) => Err(ProposeError::NotLeader {
                node_id: id,
                leader,
            }),
            Err(ForwardError::Timeout { reason }) => Err(ProposeError::Timeout {
                node_id: id,
                what: format!("decision ({reason})"),
                waited: timeout,
                leader: self.leader(),
            }),
            Err(ForwardError::Fatal { reason }) => Err(ProposeError::Fatal {
                node_id: id,
                reason,
            }),
        }
    }

    /// Waits until a leader with a known address exists, or `deadline`.
    /// With `changed` set, first waits for the metrics to change at all
    /// (the last leader just refused, so the current view is stale).
    pub(super) async fn wait_for_leader(
        &self,
        deadline: Instant,
        changed: bool,
    ) -> Result<(NodeId, String), ProposeError> {
        let started = Instant::now();
        let mut metrics = self.inner.raft.metrics();
        if changed {
            metrics.mark_unchanged();
            let _ = tokio::time::timeout_at(deadline, metrics.changed()).await;
        }
        loop {
            let (leader, state) = {
                let m = metrics.borrow_and_update();
                (m.current_leader, m.state)
            };
            if let Some(hint) = leader_hint(&self.inner.raft, leader) {
                return Ok(hint);
            }
            let no_leader = || ProposeError::NoLeader {
                node_id: self.inner.id,
                state: format!("{state:?}"),
                waited: started.elapsed(),
            };
            match tokio::time::timeout_at(deadline, metrics.changed()).await {
                Ok(Ok(())) => continue,
                // Timed out, or Raft shut down (metrics sender dropped).
                Ok(Err(_)) | Err(_) => return Err(no_leader()),
            }
        }
    }

    /// Sends `command` to the leader's `Propose` and decodes its answer.
    async fn forward(
        &self,
        leader_id: NodeId,
        leader_addr: &str,
        command: &Command,
    ) -> Result<Result<CommandResponse, ForwardError>, ProposeError> {
        let id = self.inner.id;
        let unreachable = |reason: String| ProposeError::LeaderUnreachable {
            node_id: id,
            leader_id,
            leader_addr: leader_addr.to_owned(),
            reason,
        };
        let mut client = self
            .inner
            .channels
            .client(leader_addr)
            .map_err(|e| unreachable(e.to_string()))?;
        let json = serde_json::to_vec(command).map_err(|e| ProposeError::Fatal {
            node_id: id,
            reason: format!("cannot encode command: {e}"),
        })?;
        // The leader may take up to propose_timeout to apply; add one RPC
        // deadline for the trip itself.
        let timeout = self.inner.settings.propose_timeout + self.inner.settings.rpc_timeout;
        let mut request = tonic::Request::new(RaftPayload { json });
        request.set_timeout(timeout);
        self.inner.identity.stamp(&mut request);
        let reply = match tokio::time::timeout(timeout, client.propose(request)).await {
            Ok(Ok(reply)) => reply.into_inner(),
            Ok(Err(status)) if status.code() == tonic::Code::FailedPrecondition => {
                return Err(ProposeError::ClusterMismatch {
                    node_id: id,
                    reason: status.message().to_owned(),
                });
            }
            Ok(Err(status)) => return Err(unreachable(status.to_string())),
            Err(_elapsed) => return Err(unreachable(format!("no answer within {timeout:?}"))),
        };
        serde_json::from_slice(&reply.json).map_err(|e| ProposeError::Fatal {
            node_id: id,
            reason: format!("undecodable Propose reply from leader {leader_id}: {e}"),
        })
    }

    /// Stops Raft and waits (bounded) until the store is closed, so the same
    /// data directory can be opened again right after — by a restart in this
    /// process or by another process.
    pub async fn shutdown(&self) {
        let id = self.inner.id;
        // Idempotent: a second call only waits for the store to close.
        if !self
            .inner
            .stopped
            .swap(true, std::sync::atomic::Ordering::SeqCst)
            && let Err(e) = self.inner.raft.shutdown().await
        {
            tracing::warn!(node_id = id, error = %e, "Raft shutdown reported an error");
        }
        // The store is owned by openraft's tasks, which end shortly after
        // the core, and sled releases the directory's lock after the last
        // handle is gone (see `StoreLiveness`); poll for both rather than
        // guess a delay.
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.inner.liveness.is_open() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if self.inner.liveness.is_open() {
            tracing::warn!(node_id = id, "store still open 10 s after Raft shutdown");
        } else {
            tracing::info!(node_id = id, "Raft node stopped, store closed");
        }
    }
}
