//! openraft's network over tonic: the client half of `RaftService`.
//!
//! Owns: one cached, lazily connected `tonic::transport::Channel` per peer
//! address (mutual TLS as this coordinator unless `--insecure`) (shared by Raft replication and proposal forwarding — never a new
//! connection per RPC), a deadline on every RPC, JSON encoding of openraft's
//! requests (each AppendEntries cut to a byte budget by `append_batch`),
//! the cluster fingerprint on every call, and the mapping of
//! transport failures to openraft's `Unreachable` / `Timeout` / `Network`
//! errors so openraft backs off from dead peers. Snapshots go as
//! InstallSnapshot chunks through openraft's default `full_snapshot`.
//! Channels are built on Raft's own runtime ([`super::runtime`]), so
//! replication never waits behind the coordinator's other work.
//! Does not own: the server half ([`super::service`]) or retry policy
//! (openraft's).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::RPCTypes;
use openraft::error::{
    Infallible, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout,
    Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_proto::pb::RaftPayload;
use switchyard_proto::pb::raft_service_client::RaftServiceClient;
use switchyard_tls::Security;
use tonic::transport::Channel;

use super::append_batch::AppendBatch;
use super::fingerprint::ClusterIdentity;
use super::runtime::RaftRuntime;
use super::types::{Node, NodeId, TypeConfig};

/// Largest RaftPayload accepted or sent. Snapshot chunks are JSON (bytes
/// become number arrays, about 4x), so this must exceed 4x the chunk size.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Channels to peers, keyed by address: created on first use, connected
/// lazily, reused for every later RPC. A `Channel` reconnects by itself after
/// the peer restarts, so an entry never needs replacing.
#[derive(Clone)]
pub struct ChannelCache {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    connect_timeout: Duration,
    source_ip: Option<std::net::IpAddr>,
    security: Security,
    /// Channels are built on Raft's runtime, so their connections are
    /// driven there (see [`super::runtime`]).
    runtime: RaftRuntime,
}

impl ChannelCache {
    /// An empty cache; `connect_timeout` bounds each TCP connect, and
    /// connections leave from `source_ip` when given (a coordinator's
    /// traffic then comes from its own address, which is what lets a test
    /// relay cut one coordinator off from the others).
    pub fn new(
        connect_timeout: Duration,
        source_ip: Option<std::net::IpAddr>,
        security: Security,
        runtime: RaftRuntime,
    ) -> Self {
        ChannelCache {
            channels: Arc::default(),
            connect_timeout,
            source_ip,
            security,
            runtime,
        }
    }

    /// The channel to `addr` (`HOST:PORT`), created lazily.
    pub fn get(&self, addr: &str) -> Result<Channel, tonic::transport::Error> {
        // A poisoned lock means a panic while inserting into a HashMap of
        // cloneable handles; the map is still usable.
        let mut channels = match self.channels.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(channel) = channels.get(addr) {
            return Ok(channel.clone());
        }
        let _on_raft_runtime = self.runtime.enter();
        let channel = switchyard_tls::client::channel(
            addr,
            &self.security,
            self.source_ip,
            self.connect_timeout,
            |endpoint| endpoint,
        )?;
        channels.insert(addr.to_owned(), channel.clone());
        Ok(channel)
    }

    /// A RaftService client on the cached channel to `addr`.
    pub fn client(
        &self,
        addr: &str,
    ) -> Result<RaftServiceClient<Channel>, tonic::transport::Error> {
        Ok(RaftServiceClient::new(self.get(addr)?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES))
    }
}

/// Deadlines for outgoing Raft RPCs.
#[derive(Debug, Clone, Copy)]
pub struct RpcTimeouts {
    /// Vote and AppendEntries.
    pub rpc: Duration,
    /// One InstallSnapshot chunk (openraft passes its own, larger TTL).
    pub snapshot_chunk: Duration,
}

/// Makes one [`PeerClient`] per replication target.
pub struct NetworkFactory {
    id: NodeId,
    channels: ChannelCache,
    identity: ClusterIdentity,
    timeouts: RpcTimeouts,
    append_budget: usize,
}

impl NetworkFactory {
    /// A factory for node `id`, stamping `identity` on every call; each
    /// AppendEntries carries at most `append_budget` bytes of entries
    /// (and at least one entry: see `append_batch`).
    pub fn new(
        id: NodeId,
        channels: ChannelCache,
        identity: ClusterIdentity,
        timeouts: RpcTimeouts,
        append_budget: usize,
    ) -> Self {
        NetworkFactory {
            id,
            channels,
            identity,
            timeouts,
            append_budget,
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerClient {
        PeerClient {
            id: self.id,
            target,
            node: node.clone(),
            client: self.channels.client(&node.addr).map_err(|e| e.to_string()),
            identity: self.identity.clone(),
            timeouts: self.timeouts,
            append_budget: self.append_budget,
        }
    }
}

/// The connection to one peer, as openraft's replication uses it.
pub struct PeerClient {
    id: NodeId,
    target: NodeId,
    node: Node,
    /// `Err` when the address does not parse; every RPC then reports it.
    client: Result<RaftServiceClient<Channel>, String>,
    identity: ClusterIdentity,
    timeouts: RpcTimeouts,
    append_budget: usize,
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, Node, RaftError<NodeId, E>>>;

impl PeerClient {
    /// Sends one RPC: JSON-encodes `request` and [`PeerClient::send_json`]s it.
    async fn send<Req, Resp, E>(
        &self,
        action: RPCTypes,
        request: &Req,
        timeout: Duration,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let json =
            serde_json::to_vec(request).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        self.send_json(action, json, timeout).await
    }

    /// Sends one RPC already encoded as `json`: stamps the fingerprint,
    /// bounds it by `timeout`, decodes `Result<Resp, RaftError<E>>` from
    /// the reply.
    async fn send_json<Resp, E>(
        &self,
        action: RPCTypes,
        json: Vec<u8>,
        timeout: Duration,
    ) -> RpcResult<Resp, E>
    where
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let mut client = match &self.client {
            Ok(client) => client.clone(),
            Err(reason) => {
                return Err(RPCError::Unreachable(Unreachable::new(&AddressError(
                    format!(
                        "invalid address {:?} for node {}: {reason}",
                        self.node.addr, self.target
                    ),
                ))));
            }
        };
        let mut grpc_request = tonic::Request::new(RaftPayload { json });
        grpc_request.set_timeout(timeout);
        self.identity.stamp(&mut grpc_request);
        let call = async move {
            match action {
                RPCTypes::Vote => client.vote(grpc_request).await,
                RPCTypes::AppendEntries => client.append_entries(grpc_request).await,
                RPCTypes::InstallSnapshot => client.install_snapshot(grpc_request).await,
            }
        };
        let reply = match tokio::time::timeout(timeout, call).await {
            Ok(Ok(reply)) => reply.into_inner(),
            Ok(Err(status)) => return Err(self.status_error(action, timeout, status)),
            Err(_elapsed) => {
                return Err(RPCError::Timeout(Timeout {
                    action,
                    id: self.id,
                    target: self.target,
                    timeout,
                }));
            }
        };
        let result: Result<Resp, RaftError<NodeId, E>> = serde_json::from_slice(&reply.json)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| {
            RPCError::RemoteError(RemoteError::new_with_node(
                self.target,
                self.node.clone(),
                e,
            ))
        })
    }

    /// Maps a gRPC failure to the openraft error that makes openraft react
    /// right: `Unreachable` backs off, `Timeout` and `Network` retry.
    fn status_error<E: std::error::Error>(
        &self,
        action: RPCTypes,
        timeout: Duration,
        status: tonic::Status,
    ) -> RPCError<NodeId, Node, RaftError<NodeId, E>> {
        match status.code() {
            tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => RPCError::Timeout(Timeout {
                action,
                id: self.id,
                target: self.target,
                timeout,
            }),
            tonic::Code::FailedPrecondition => {
                // The peer is in another cluster: retrying soon cannot help,
                // so back off like for a dead peer, and say why loudly.
                tracing::error!(
                    node_id = self.id,
                    target = self.target,
                    addr = %self.node.addr,
                    rpc = %action,
                    message = status.message(),
                    "peer refused Raft RPC"
                );
                RPCError::Unreachable(Unreachable::new(&status))
            }
            // Connection refused / reset / DNS: tonic reports these as
            // UNAVAILABLE (or UNKNOWN for some transport errors).
            tonic::Code::Unavailable | tonic::Code::Unknown => {
                tracing::debug!(
                    node_id = self.id,
                    target = self.target,
                    addr = %self.node.addr,
                    rpc = %action,
                    error = %status,
                    "peer unreachable"
                );
                RPCError::Unreachable(Unreachable::new(&status))
            }
            _ => RPCError::Network(NetworkError::new(&status)),
        }
    }
}

/// An unusable peer address.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct AddressError(String);

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, Infallible> {
        let mut batch = AppendBatch::encode(&rpc, self.append_budget)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        if batch.entries_sent() < rpc.entries.len() {
            tracing::debug!(
                node_id = self.id,
                target = self.target,
                sent = batch.entries_sent(),
                of = rpc.entries.len(),
                bytes = batch.json.len(),
                "AppendEntries cut to its byte budget"
            );
        }
        let json = std::mem::take(&mut batch.json);
        let reply = self
            .send_json(RPCTypes::AppendEntries, json, self.timeouts.rpc)
            .await?;
        Ok(batch.reply(reply))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        // The last chunk also installs the snapshot on the receiver, which
        // can take longer than a heartbeat-sized deadline.
        let timeout = self.timeouts.snapshot_chunk.max(option.hard_ttl());
        self.send(RPCTypes::InstallSnapshot, &rpc, timeout).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, Infallible> {
        self.send(RPCTypes::Vote, &rpc, self.timeouts.rpc).await
    }

    fn backoff(&self) -> Backoff {
        // Back off from an unreachable peer, growing to a few seconds, so a
        // dead coordinator costs little and a restarted one is found soon.
        let base = self.timeouts.rpc.min(Duration::from_millis(500));
        Backoff::new((0u32..).map(move |attempt| base.saturating_mul(1 << attempt.min(3))))
    }
}
