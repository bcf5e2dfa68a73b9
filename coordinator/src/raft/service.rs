//! The server half of `switchyard.v1.RaftService`.
//!
//! Owns: decoding openraft requests (JSON), checking the caller's cluster
//! fingerprint before anything reaches openraft, handing requests to the
//! local Raft (on Raft's own runtime, [`super::runtime`]), and answering
//! `Propose` on the leader. Does not own: the
//! tonic server it is mounted on (the caller's), forwarding (a `Propose`
//! that reaches a non-leader is answered "not leader" with a hint, never
//! forwarded again — see [`super::node`]).

use std::future::Future;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_proto::pb::RaftPayload;
use switchyard_proto::pb::raft_service_server::{RaftService, RaftServiceServer};
use tonic::{Request, Response, Status};

use super::error::{ForwardError, LeaderHint};
use super::fingerprint::ClusterIdentity;
use super::network::MAX_MESSAGE_BYTES;
use super::runtime::RaftRuntime;
use super::types::{NodeId, Raft};
use crate::state::{Command, CommandResponse};

/// The RaftService implementation for one node.
#[derive(Clone)]
pub struct RaftGrpc {
    id: NodeId,
    raft: Raft,
    identity: ClusterIdentity,
    propose_timeout: Duration,
    contact: LeaderContact,
    runtime: RaftRuntime,
    grouped: GroupedWrites,
}

/// A moment shared between clones (the node and its RPC service): when
/// something last happened, if it did.
#[derive(Debug, Clone, Default)]
struct LastTime(std::sync::Arc<std::sync::Mutex<Option<std::time::Instant>>>);

impl LastTime {
    fn mark(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
    }

    fn since(&self) -> Option<Duration> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(|at| at.elapsed())
    }
}

/// When this node last heard from a leader (an AppendEntries, heartbeats
/// included): a follower that has not for longer than an election timeout
/// knows its view of the cluster may be stale.
#[derive(Debug, Clone, Default)]
pub struct LeaderContact(LastTime);

/// When this node last wrote a proposal carrying several clients'
/// applies (`Command::Applies`, a group commit), its own or one a
/// follower grouped and forwarded: while that is recent, applies are
/// piling up (the coordinator paces its fleet then, see `crate::server`'s
/// `pacing`).
#[derive(Debug, Clone, Default)]
pub struct GroupedWrites(LastTime);

impl GroupedWrites {
    /// Notes `command` about to be written here, now, if it is a group.
    pub fn note(&self, command: &Command) {
        if matches!(command, Command::Applies { .. }) {
            self.0.mark();
        }
    }

    /// Time since the last group written here, if there was one.
    pub fn since(&self) -> Option<Duration> {
        self.0.since()
    }
}

impl LeaderContact {
    /// Notes a message from the leader, now.
    pub fn heard(&self) {
        self.0.mark();
    }

    /// Time since the last message from a leader, if there was one.
    pub fn since(&self) -> Option<Duration> {
        self.0.since()
    }
}

impl RaftGrpc {
    /// A service over `raft`, refusing callers whose fingerprint differs
    /// from `identity`'s; a proposal waits at most `propose_timeout`.
    pub fn new(
        id: NodeId,
        raft: Raft,
        identity: ClusterIdentity,
        propose_timeout: Duration,
        contact: LeaderContact,
        runtime: RaftRuntime,
        grouped: GroupedWrites,
    ) -> Self {
        RaftGrpc {
            id,
            raft,
            identity,
            propose_timeout,
            contact,
            runtime,
            grouped,
        }
    }

    /// Answers a peer's RPC on Raft's runtime (see [`super::runtime`]):
    /// the check, the decoding, openraft's work and the encoding of the
    /// reply never queue behind the coordinator's other work.
    async fn on_raft_runtime<F>(&self, answer: F) -> Result<Response<RaftPayload>, Status>
    where
        F: Future<Output = Result<Response<RaftPayload>, Status>> + Send + 'static,
    {
        self.runtime
            .run(answer)
            .await
            .unwrap_or_else(|| Err(Status::unavailable("Raft is stopping")))
    }

    /// This service wrapped for tonic, with message limits large enough for
    /// snapshot chunks.
    pub fn into_server(self) -> RaftServiceServer<RaftGrpc> {
        RaftServiceServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }
}

fn decode<T: DeserializeOwned>(payload: &RaftPayload, rpc: &'static str) -> Result<T, Status> {
    serde_json::from_slice(&payload.json).map_err(|e| {
        Status::invalid_argument(format!("{rpc}: payload is not the expected JSON: {e}"))
    })
}

fn encode<T: Serialize>(value: &T) -> Result<Response<RaftPayload>, Status> {
    serde_json::to_vec(value)
        .map(|json| Response::new(RaftPayload { json }))
        .map_err(|e| Status::internal(format!("cannot encode reply: {e}")))
}

/// Looks up a leader's address in the current membership.
pub(crate) fn leader_hint(raft: &Raft, leader_id: Option<NodeId>) -> LeaderHint {
    let leader_id = leader_id?;
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    let node = metrics
        .membership_config
        .membership()
        .get_node(&leader_id)?;
    Some((leader_id, node.addr.clone()))
}

/// Proposes `command` on this node if it is the leader and waits for it to
/// be applied. Shared by the `Propose` handler and local proposals.
pub(crate) async fn write_locally(
    raft: &Raft,
    command: std::sync::Arc<Command>,
    timeout: Duration,
) -> Result<CommandResponse, ForwardError> {
    match tokio::time::timeout(timeout, raft.client_write(command)).await {
        Ok(Ok(response)) => {
            // Followers learn the new commit index only with the next
            // AppendEntries; without a nudge that is up to one heartbeat
            // interval later, and proxies watching a follower would see
            // the change that much later. A heartbeat now carries it at
            // once. Failing to send one only costs that delay.
            let _ = raft.trigger().heartbeat().await;
            Ok(response.data)
        }
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
            let leader = match (forward.leader_id, forward.leader_node) {
                (Some(id), Some(node)) => Some((id, node.addr)),
                (id, _) => leader_hint(raft, id),
            };
            Err(ForwardError::NotLeader { leader })
        }
        Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e)))) => {
            // Only membership writes produce this; a command never does.
            Err(ForwardError::Fatal {
                reason: e.to_string(),
            })
        }
        Ok(Err(RaftError::Fatal(fatal))) => Err(ForwardError::Fatal {
            reason: format!("Raft stopped: {fatal}"),
        }),
        Err(_elapsed) => Err(ForwardError::Timeout {
            reason: format!("not applied within {timeout:?}"),
        }),
    }
}

#[tonic::async_trait]
impl RaftService for RaftGrpc {
    #[tracing::instrument(name = "raft.vote", skip_all, fields(node_id = self.id))]
    async fn vote(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let (identity, raft) = (self.identity.clone(), self.raft.clone());
        self.on_raft_runtime(async move {
            identity.check(&request, "Vote", true).await?;
            let vote = decode(request.get_ref(), "Vote")?;
            encode(&raft.vote(vote).await)
        })
        .await
    }

    #[tracing::instrument(name = "raft.append_entries", skip_all, fields(node_id = self.id))]
    async fn append_entries(
        &self,
        request: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let (identity, raft, contact) = (
            self.identity.clone(),
            self.raft.clone(),
            self.contact.clone(),
        );
        self.on_raft_runtime(async move {
            identity.check(&request, "AppendEntries", true).await?;
            contact.heard();
            let append = decode(request.get_ref(), "AppendEntries")?;
            encode(&raft.append_entries(append).await)
        })
        .await
    }

    #[tracing::instrument(name = "raft.install_snapshot", skip_all, fields(node_id = self.id))]
    async fn install_snapshot(
        &self,
        request: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let (identity, raft) = (self.identity.clone(), self.raft.clone());
        self.on_raft_runtime(async move {
            identity.check(&request, "InstallSnapshot", true).await?;
            let chunk = decode(request.get_ref(), "InstallSnapshot")?;
            encode(&raft.install_snapshot(chunk).await)
        })
        .await
    }

    #[tracing::instrument(name = "raft.propose", skip_all, fields(node_id = self.id))]
    async fn propose(
        &self,
        request: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        // Not an adoption point: a proposal is not proof of being a member.
        self.identity.check(&request, "Propose", false).await?;
        let command: Command = decode(request.get_ref(), "Propose")?;
        self.grouped.note(&command);
        let result = write_locally(
            &self.raft,
            std::sync::Arc::new(command),
            self.propose_timeout,
        )
        .await;
        if let Err(error) = &result {
            tracing::debug!(?error, "forwarded proposal not applied");
        }
        encode(&result)
    }
}
