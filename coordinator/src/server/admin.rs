//! `AdminService`: apply, delete, status and membership for operators and
//! controllers. Writes go through Raft (a follower's node forwards them to
//! the leader); every error becomes a `tonic::Status` in [`command_status`].

use super::Coordinator;
use crate::state::{Command, CommandResponse, Outcome};
use std::pin::Pin;
use std::sync::Arc;
use switchyard_proto::model::{Resource, ResourceKey};
use switchyard_proto::pb::{self, admin_service_server::AdminService};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// The service.
pub struct Admin {
    coordinator: Arc<Coordinator>,
}

impl Admin {
    /// Serves `coordinator`.
    pub fn new(coordinator: Arc<Coordinator>) -> Self {
        Admin { coordinator }
    }

    fn check_count(&self, count: usize) -> Result<(), Status> {
        let max = self.coordinator.config.limits.max_objects_per_apply;
        if count > max {
            self.coordinator.metrics.limit_hit("objects_per_apply");
            return Err(Status::invalid_argument(format!(
                "{count} objects in one request; the limit is {max} (coordinator flag --max-objects-per-apply)"
            )));
        }
        Ok(())
    }
}

/// Turns a state-machine answer into a gRPC answer (`super::errors`).
fn command_status(response: CommandResponse) -> Result<Outcome, Status> {
    response.0.map_err(Status::from)
}

fn routes_pb(outcome: &Outcome) -> Vec<pb::AppliedGeneration> {
    outcome
        .routes
        .iter()
        .map(|(name, generation)| pb::AppliedGeneration::from((name.clone(), *generation)))
        .collect()
}

type StatusStream = Pin<Box<dyn Stream<Item = Result<pb::StatusReply, Status>> + Send>>;

#[tonic::async_trait]
impl AdminService for Admin {
    #[tracing::instrument(skip_all, fields(rpc = "Apply", node_id = self.coordinator.config.node.id))]
    async fn apply(
        &self,
        request: Request<pb::ApplyRequest>,
    ) -> Result<Response<pb::ApplyReply>, Status> {
        let resources: Vec<Resource> = serde_json::from_slice(&request.get_ref().resources_json)
            .map_err(|e| {
                Status::invalid_argument(format!("resources_json is not a list of resources: {e}"))
            })?;
        self.check_count(resources.len())?;
        let response = self.coordinator.propose_apply(resources).await?;
        let outcome = command_status(response)?;
        let log_index = outcome.index;
        tracing::info!(changes = ?outcome.changes, "apply committed");
        Ok(Response::new(pb::ApplyReply {
            log_index,
            routes: routes_pb(&outcome),
            changes: outcome.changes,
        }))
    }

    #[tracing::instrument(skip_all, fields(rpc = "Delete", node_id = self.coordinator.config.node.id))]
    async fn delete(
        &self,
        request: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteReply>, Status> {
        let keys: Vec<ResourceKey> =
            serde_json::from_slice(&request.get_ref().keys_json).map_err(|e| {
                Status::invalid_argument(format!("keys_json is not a list of resource keys: {e}"))
            })?;
        self.check_count(keys.len())?;
        let response = self.coordinator.propose(Command::Delete { keys }).await?;
        let outcome = command_status(response)?;
        let log_index = outcome.index;
        tracing::info!(changes = ?outcome.changes, "delete committed");
        Ok(Response::new(pb::DeleteReply {
            log_index,
            changes: outcome.changes,
        }))
    }

    async fn status(
        &self,
        request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusReply>, Status> {
        let scope = super::status::scope(request.get_ref())?;
        Ok(Response::new(super::status::reply(
            &self.coordinator,
            &scope,
        )?))
    }

    type WatchStatusStream = StatusStream;

    async fn watch_status(
        &self,
        request: Request<pb::StatusRequest>,
    ) -> Result<Response<Self::WatchStatusStream>, Status> {
        let scope = super::status::scope(request.get_ref())?;
        let coordinator = self.coordinator.clone();
        let mut changes = coordinator.status_changes.subscribe();
        let open = coordinator.metrics.stream_opened("status");
        let stream = async_stream(move |tx| async move {
            let _open = open;
            let mut last = None;
            loop {
                let reply = super::status::reply(&coordinator, &scope);
                let text = reply.as_ref().ok().map(|r| r.status_json.clone());
                if text != last {
                    last = text;
                    if tx.send(reply).await.is_err() {
                        return;
                    }
                }
                // Status also moves with time (leases, timeouts): re-check
                // at least every 250ms — and stop as soon as the client is
                // gone, not only on the next failed send.
                tokio::select! {
                    _ = tokio::time::timeout(std::time::Duration::from_millis(250), changes.changed()) => {}
                    () = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    #[tracing::instrument(skip_all, fields(rpc = "AddCoordinator", node_id = self.coordinator.config.node.id))]
    async fn add_coordinator(
        &self,
        request: Request<pb::AddCoordinatorRequest>,
    ) -> Result<Response<pb::MembershipReply>, Status> {
        let r = request.into_inner();
        if r.address.is_empty() {
            return Err(Status::invalid_argument("address is required (HOST:PORT)"));
        }
        let voters = self
            .coordinator
            .node
            .add_coordinator(r.id, r.address)
            .await?;
        tracing::info!(id = r.id, ?voters, "coordinator added");
        membership_reply(voters)
    }

    #[tracing::instrument(skip_all, fields(rpc = "RemoveCoordinator", node_id = self.coordinator.config.node.id))]
    async fn remove_coordinator(
        &self,
        request: Request<pb::RemoveCoordinatorRequest>,
    ) -> Result<Response<pb::MembershipReply>, Status> {
        let id = request.into_inner().id;
        let voters = self.coordinator.node.remove_coordinator(id).await?;
        tracing::info!(id, ?voters, "coordinator removed");
        membership_reply(voters)
    }
}

fn membership_reply(
    voters: std::collections::BTreeMap<u64, String>,
) -> Result<Response<pb::MembershipReply>, Status> {
    let voters_json = serde_json::to_vec(&voters).map_err(|e| Status::internal(e.to_string()))?;
    Ok(Response::new(pb::MembershipReply { voters_json }))
}

/// A stream fed by a task through a bounded channel; the task ends when the
/// client goes away.
pub(crate) fn async_stream<T, F, Fut>(body: F) -> impl Stream<Item = T> + Send
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(body(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
