//! `FleetService`: what proxies speak. Registration goes through Raft (a
//! follower's node forwards it). Heartbeats and readiness reports are the
//! leader's soft state: a follower refuses them with `UNAVAILABLE` and the
//! leader's address in `x-switchyard-leader`, and the proxy follows it.
//! The configuration watch is served by every coordinator from its own
//! state machine. Every call must come from the proxy it names
//! (`switchyard_tls::authz`; anything goes with `--insecure`).

use super::{Coordinator, admin::async_stream, errors, now_ms};
use crate::state::Command;
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use switchyard_proto::model::ObjectName;
use switchyard_proto::pb::{self, fleet_service_server::FleetService};
use switchyard_tls::authz::{Needed, authorize};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// The service.
pub struct Fleet {
    coordinator: Arc<Coordinator>,
}

impl Fleet {
    /// Serves `coordinator`.
    pub fn new(coordinator: Arc<Coordinator>) -> Self {
        Fleet { coordinator }
    }

    /// Runs `f` on the leader's engine, or refuses with the leader's address.
    fn on_leader<T>(
        &self,
        f: impl FnOnce(&mut crate::cutover::CutoverEngine) -> T,
    ) -> Result<T, Status> {
        if self.coordinator.leads_with_quorum()
            && let Some(out) = self.coordinator.with_engine(f)
        {
            return Ok(out);
        }
        if self.coordinator.node.is_leader() {
            return Err(errors::without_quorum());
        }
        Err(errors::not_leader(&self.coordinator.node))
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::ConfigUpdate, Status>> + Send>>;

#[tonic::async_trait]
impl FleetService for Fleet {
    #[tracing::instrument(skip_all, fields(rpc = "Register", node_id = self.coordinator.config.node.id, proxy = request.get_ref().proxy.as_ref().map(|p| p.id.as_str())))]
    async fn register(
        &self,
        request: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterReply>, Status> {
        let proxy = request
            .get_ref()
            .proxy
            .clone()
            .ok_or_else(|| Status::invalid_argument("proxy identity is required"))?;
        authorize(&request, Needed::Proxy(&proxy.id), "Register")?;
        let id = proxy.id.clone();
        let response = self
            .coordinator
            .propose(Command::RegisterProxy {
                id: proxy.id,
                zone: proxy.zone,
                admin_address: proxy.admin_address,
            })
            .await?;
        let outcome = response.0?;
        tracing::info!(proxy = %id, registration = outcome.index, "proxy registered");
        let config = &self.coordinator.config;
        Ok(Response::new(pb::RegisterReply {
            lease_ttl_ms: config.lease_ttl.as_millis() as u64,
            heartbeat_interval_ms: config.heartbeat_interval.as_millis() as u64,
            registration: outcome.index,
        }))
    }

    #[tracing::instrument(skip_all, fields(rpc = "Heartbeat", node_id = self.coordinator.config.node.id, proxy = %request.get_ref().proxy_id))]
    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatReply>, Status> {
        authorize(
            &request,
            Needed::Proxy(&request.get_ref().proxy_id),
            "Heartbeat",
        )?;
        let r = request.into_inner();
        let applied: BTreeMap<ObjectName, u64> = r.applied.iter().map(Into::into).collect();
        let state = self.coordinator.node.state().borrow().clone();
        let known = self
            .on_leader(|e| e.heartbeat(&state, &r.proxy_id, r.registration, applied, now_ms()))?;
        self.coordinator.changed();
        Ok(Response::new(pb::HeartbeatReply {
            known,
            config_version: state.last_index,
        }))
    }

    #[tracing::instrument(skip_all, fields(rpc = "Deregister", node_id = self.coordinator.config.node.id, proxy = %request.get_ref().proxy_id))]
    async fn deregister(
        &self,
        request: Request<pb::DeregisterRequest>,
    ) -> Result<Response<pb::DeregisterReply>, Status> {
        authorize(
            &request,
            Needed::Proxy(&request.get_ref().proxy_id),
            "Deregister",
        )?;
        let r = request.into_inner();
        let id = r.proxy_id;
        let response = self
            .coordinator
            .propose(Command::RemoveProxy {
                id: id.clone(),
                reason: "deregistered on shutdown".into(),
                registration: (r.registration != 0).then_some(r.registration),
            })
            .await?;
        response.0?;
        self.coordinator.with_engine(|e| e.forget(&id));
        tracing::info!(proxy = %id, "proxy deregistered");
        Ok(Response::new(pb::DeregisterReply {}))
    }

    type WatchStream = WatchStream;

    #[tracing::instrument(skip_all, fields(rpc = "Watch", node_id = self.coordinator.config.node.id, proxy = %request.get_ref().proxy_id))]
    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        authorize(
            &request,
            Needed::Proxy(&request.get_ref().proxy_id),
            "Watch",
        )?;
        let proxy = request.into_inner().proxy_id;
        tracing::info!(proxy = %proxy, "proxy watching configuration");
        let mut state_rx = self.coordinator.node.state();
        let coordinator_id = self.coordinator.config.node.id;
        let open = self.coordinator.metrics.stream_opened("watch");
        let stream = async_stream(move |tx| async move {
            let _open = open;
            let mut last_sent = None;
            let mut last_version = 0;
            loop {
                let snapshot = state_rx.borrow_and_update().config_snapshot();
                let version = snapshot.version;
                // Registrations and other entries move the version without
                // changing what proxies see: those are sent as a bare
                // version, so the proxy can tell its stream is current.
                let mut unversioned = snapshot.clone();
                unversioned.version = 0;
                let update = if last_sent.as_ref() != Some(&unversioned) {
                    let update = serde_json::to_vec(&snapshot)
                        .map(|json| pb::ConfigUpdate {
                            version,
                            snapshot_json: json,
                            coordinator_id,
                        })
                        .map_err(|e| Status::internal(e.to_string()));
                    last_sent = Some(unversioned);
                    Some(update)
                } else if version > last_version {
                    Some(Ok(pb::ConfigUpdate {
                        version,
                        snapshot_json: Vec::new(),
                        coordinator_id,
                    }))
                } else {
                    None
                };
                last_version = version;
                if let Some(update) = update
                    && tx.send(update).await.is_err()
                {
                    return;
                }
                // End with the client, not only on the next failed send: a
                // gone proxy must not keep a snapshot and a task here.
                tokio::select! {
                    changed = state_rx.changed() => if changed.is_err() { return },
                    () = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    #[tracing::instrument(skip_all, fields(rpc = "ReportReadiness", node_id = self.coordinator.config.node.id, proxy = %request.get_ref().proxy_id))]
    async fn report_readiness(
        &self,
        request: Request<pb::ReadinessReport>,
    ) -> Result<Response<pb::ReadinessReply>, Status> {
        // Evidence counts only from the proxy it names: a certificate for
        // another proxy (or none) is refused before anything is recorded.
        authorize(
            &request,
            Needed::Proxy(&request.get_ref().proxy_id),
            "ReportReadiness",
        )?;
        let r = request.into_inner();
        let backends = r
            .backends
            .iter()
            .map(TryFrom::try_from)
            .collect::<Result<Vec<_>, String>>()
            .map_err(Status::invalid_argument)?;
        let sockets = r
            .listeners
            .as_ref()
            .map(|l| l.sockets.iter().map(TryFrom::try_from).collect())
            .transpose()
            .map_err(|e: String| Status::invalid_argument(format!("proxy {}: {e}", r.proxy_id)))?;
        let state = self.coordinator.node.state().borrow().clone();
        let known = self.on_leader(|e| {
            let known = e.report(&state, &r.proxy_id, r.registration, backends, now_ms());
            if known {
                e.record_sockets(&r.proxy_id, sockets);
            }
            known
        })?;
        self.coordinator.metrics.evidence_reports.inc();
        self.coordinator.changed();
        Ok(Response::new(pb::ReadinessReply { known }))
    }
}
