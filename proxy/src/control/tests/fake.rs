//! A fake coordinator: a real tonic `FleetService` on 127.0.0.1, port 0,
//! driven by the test through channels.
//!
//! Every call the proxy makes arrives on a channel the test reads
//! (`next_register`, `next_heartbeat`, …). Unary calls are answered from a
//! script the test sets (`refuse_registrations`, `answer_next_register`,
//! `forget_next_heartbeat`, `leader_version`) and otherwise as a healthy
//! leader would: registrations numbered 1, 2, …, every heartbeat and report
//! known. Each `Watch` hands the test a [`Watch`] to push updates into and
//! to see when the proxy hangs up.

use super::within;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use switchyard_proto::LEADER_HEADER;
use switchyard_proto::incremental::HeldSet;
use switchyard_proto::model::{BackendEvidence, BackendKey, ConfigSnapshot, ObjectName};
use switchyard_proto::pb::fleet_service_server::{FleetService, FleetServiceServer};
use switchyard_proto::pb::{self};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::Stream;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status};

/// How every register is answered unless the script says otherwise.
#[derive(Default)]
struct Script {
    /// Answers for the next registers, in order.
    registers: VecDeque<Result<pb::RegisterReply, Status>>,
    /// Answer every register with this refusal (after the queue).
    refuse_registers: Option<Status>,
    /// The last registration handed out.
    registration: u64,
    /// Heartbeats to answer `known: false`.
    forget_heartbeats: u32,
    /// Readiness reports to fail as an unreachable coordinator would.
    fail_reports: u32,
    /// The version heartbeats say the leader has.
    leader_version: u64,
    /// Whether heartbeats and reports are numbered and may carry changes
    /// (a leader of this version): the sets held are below. Off, every
    /// answer says sequence 0, as an older leader's would, and the proxy
    /// keeps sending whole sets.
    takes_changes: bool,
    /// The applied generations held, as a leader holds them.
    applied: HeldSet<ObjectName, u64>,
    /// The evidence held, as a leader holds it.
    evidence: HeldSet<BackendKey, BackendEvidence>,
    /// Heartbeat changes that did not apply on the set held.
    refused_applied: u32,
    /// The heartbeat interval registrations are told (0: 50 ms).
    heartbeat_interval_ms: u64,
}

/// What the proxy did, one channel per call.
struct Calls {
    registers: mpsc::UnboundedSender<pb::RegisterRequest>,
    heartbeats: mpsc::UnboundedSender<pb::HeartbeatRequest>,
    reports: mpsc::UnboundedSender<pb::ReadinessReport>,
    deregisters: mpsc::UnboundedSender<pb::DeregisterRequest>,
    watches: mpsc::UnboundedSender<Watch>,
}

struct Service {
    script: Arc<Mutex<Script>>,
    calls: Calls,
}

/// One `Watch` call, as the fake coordinator's side of the stream.
pub(super) struct Watch {
    /// What the proxy asked.
    pub request: pb::WatchRequest,
    updates: mpsc::Sender<Result<pb::ConfigUpdate, Status>>,
}

impl Watch {
    /// Sends `snapshot` as configuration `version`.
    pub async fn send_snapshot(&self, version: u64, snapshot: &ConfigSnapshot) {
        let json = serde_json::to_vec(snapshot).unwrap();
        self.send_raw(version, json).await;
    }

    /// Sends a bare version: nothing a proxy sees changed.
    pub async fn send_version_only(&self, version: u64) {
        self.send_raw(version, Vec::new()).await;
    }

    /// Sends `snapshot_json` as it is.
    pub async fn send_raw(&self, version: u64, snapshot_json: Vec<u8>) {
        let update = pb::ConfigUpdate {
            version,
            snapshot_json: snapshot_json.into(),
            coordinator_id: 1,
            ..Default::default()
        };
        self.send_update(update).await;
    }

    /// Sends `update` as it is.
    pub async fn send_update(&self, update: pb::ConfigUpdate) {
        self.updates.send(Ok(update)).await.unwrap();
    }

    /// Resolves when the proxy has dropped this stream.
    pub async fn closed(&self) {
        within("the proxy to drop the stream", self.updates.closed()).await;
    }

    /// Whether the proxy has dropped this stream.
    pub fn is_closed(&self) -> bool {
        self.updates.is_closed()
    }
}

/// A running fake coordinator.
pub(super) struct Fake {
    /// Its `HOST:PORT`.
    pub address: String,
    script: Arc<Mutex<Script>>,
    registers: mpsc::UnboundedReceiver<pb::RegisterRequest>,
    heartbeats: mpsc::UnboundedReceiver<pb::HeartbeatRequest>,
    reports: mpsc::UnboundedReceiver<pb::ReadinessReport>,
    deregisters: mpsc::UnboundedReceiver<pb::DeregisterRequest>,
    watches: mpsc::UnboundedReceiver<Watch>,
    _stop: oneshot::Sender<()>,
}

impl Fake {
    /// Serves on 127.0.0.1, port 0, until dropped.
    pub async fn start() -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let script = Arc::new(Mutex::new(Script::default()));
        let (registers_tx, registers) = mpsc::unbounded_channel();
        let (heartbeats_tx, heartbeats) = mpsc::unbounded_channel();
        let (reports_tx, reports) = mpsc::unbounded_channel();
        let (deregisters_tx, deregisters) = mpsc::unbounded_channel();
        let (watches_tx, watches) = mpsc::unbounded_channel();
        let service = Service {
            script: script.clone(),
            calls: Calls {
                registers: registers_tx,
                heartbeats: heartbeats_tx,
                reports: reports_tx,
                deregisters: deregisters_tx,
                watches: watches_tx,
            },
        };
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(FleetServiceServer::new(service))
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stopped.await;
                }),
        );
        Fake {
            address,
            script,
            registers,
            heartbeats,
            reports,
            deregisters,
            watches,
            _stop: stop,
        }
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap()
    }

    /// Refuses every register as a follower would, naming `leader`.
    pub fn refuse_registrations_naming(&self, leader: &Fake) {
        let mut status = Status::unavailable("not the leader");
        status
            .metadata_mut()
            .insert(LEADER_HEADER, leader.address.parse().unwrap());
        self.script().refuse_registers = Some(status);
    }

    /// Refuses every register as a coordinator that knows no leader
    /// would, until [`Fake::accept_registrations`].
    pub fn refuse_registrations(&self) {
        self.script().refuse_registers = Some(Status::unavailable("no leader known"));
    }

    /// Answers registers again, as a healthy leader.
    pub fn accept_registrations(&self) {
        self.script().refuse_registers = None;
    }

    /// Answers the next register with `registration`.
    pub fn answer_next_register(&self, registration: u64) {
        let mut script = self.script();
        let reply = register_reply(registration, script.heartbeat_interval_ms);
        script.registers.push_back(Ok(reply));
    }

    /// Answers the next heartbeat `known: false`, as a leader that lost
    /// this proxy's lease would.
    pub fn fail_next_report(&self) {
        self.script().fail_reports += 1;
    }

    pub fn forget_next_heartbeat(&self) {
        self.script().forget_heartbeats += 1;
    }

    /// From now on, takes sets whole or as changes and answers with the
    /// sequence held, as a leader of this version does.
    pub fn take_changes(&self) {
        self.script().takes_changes = true;
    }

    /// Forgets the sets held, as a new leader holds none.
    pub fn forget_sets(&self) {
        let mut script = self.script();
        script.applied = HeldSet::default();
        script.evidence = HeldSet::default();
    }

    /// The applied generations held and how many heartbeat changes were
    /// refused.
    pub fn applied_held(&self) -> (HeldSet<ObjectName, u64>, u32) {
        let script = self.script();
        (script.applied.clone(), script.refused_applied)
    }

    /// Registrations from now on are told to heartbeat every `ms`.
    pub fn heartbeat_interval(&self, ms: u64) {
        self.script().heartbeat_interval_ms = ms;
    }

    /// Heartbeats say from now on that the leader has `version`.
    pub fn leader_version(&self, version: u64) {
        self.script().leader_version = version;
    }

    /// The next register the proxy made.
    pub async fn next_register(&mut self) -> pb::RegisterRequest {
        within("a register", self.registers.recv()).await.unwrap()
    }

    /// Whether the proxy has registered here (and it was not read yet).
    pub fn registered(&mut self) -> bool {
        self.registers.try_recv().is_ok()
    }

    /// The next heartbeat the proxy sent.
    pub async fn next_heartbeat(&mut self) -> pb::HeartbeatRequest {
        within("a heartbeat", self.heartbeats.recv()).await.unwrap()
    }

    /// The first heartbeat from now on for which `check` holds.
    pub async fn heartbeat_where(
        &mut self,
        check: impl Fn(&pb::HeartbeatRequest) -> bool,
    ) -> pb::HeartbeatRequest {
        within("a matching heartbeat", async {
            loop {
                let beat = self.heartbeats.recv().await.unwrap();
                if check(&beat) {
                    return beat;
                }
            }
        })
        .await
    }

    /// The next readiness report the proxy sent.
    pub async fn next_report(&mut self) -> pb::ReadinessReport {
        within("a readiness report", self.reports.recv())
            .await
            .unwrap()
    }

    /// Whether the proxy sent a readiness report not read yet.
    pub fn reported_again(&self) -> bool {
        !self.reports.is_empty()
    }

    /// The next deregister the proxy sent.
    pub async fn next_deregister(&mut self) -> pb::DeregisterRequest {
        within("a deregister", self.deregisters.recv())
            .await
            .unwrap()
    }

    /// The next `Watch` the proxy opened.
    pub async fn next_watch(&mut self) -> Watch {
        within("a watch", self.watches.recv()).await.unwrap()
    }

    /// Whether the proxy has opened another `Watch` (not read yet).
    pub fn watched_again(&mut self) -> bool {
        !self.watches.is_empty()
    }
}

fn register_reply(registration: u64, heartbeat_interval_ms: u64) -> pb::RegisterReply {
    let heartbeat_interval_ms = if heartbeat_interval_ms == 0 {
        50
    } else {
        heartbeat_interval_ms
    };
    pb::RegisterReply {
        lease_ttl_ms: 40 * heartbeat_interval_ms,
        heartbeat_interval_ms,
        registration,
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::ConfigUpdate, Status>> + Send>>;

#[tonic::async_trait]
impl FleetService for Service {
    async fn register(
        &self,
        request: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterReply>, Status> {
        let _ = self.calls.registers.send(request.into_inner());
        let mut script = self.script.lock().unwrap();
        let answer = match script.registers.pop_front() {
            Some(answer) => answer,
            None => match &script.refuse_registers {
                Some(refusal) => Err(refusal.clone()),
                None => Ok(register_reply(
                    script.registration + 1,
                    script.heartbeat_interval_ms,
                )),
            },
        };
        if let Ok(reply) = &answer {
            script.registration = reply.registration;
        }
        answer.map(Response::new)
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatReply>, Status> {
        let request = request.into_inner();
        let update = request.applied_update().map_err(Status::invalid_argument)?;
        let _ = self.calls.heartbeats.send(request);
        let mut script = self.script.lock().unwrap();
        let known = script.forget_heartbeats == 0;
        script.forget_heartbeats = script.forget_heartbeats.saturating_sub(1);
        let mut applied_seq = 0;
        if script.takes_changes {
            if script.applied.take(update).is_err() {
                script.refused_applied += 1;
            }
            applied_seq = script.applied.seq();
        }
        Ok(Response::new(pb::HeartbeatReply {
            known,
            config_version: script.leader_version,
            applied_seq,
        }))
    }

    async fn deregister(
        &self,
        request: Request<pb::DeregisterRequest>,
    ) -> Result<Response<pb::DeregisterReply>, Status> {
        let _ = self.calls.deregisters.send(request.into_inner());
        Ok(Response::new(pb::DeregisterReply {}))
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let (updates, rx) = mpsc::channel(16);
        let _ = self.calls.watches.send(Watch {
            request: request.into_inner(),
            updates,
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn report_readiness(
        &self,
        request: Request<pb::ReadinessReport>,
    ) -> Result<Response<pb::ReadinessReply>, Status> {
        let request = request.into_inner();
        let update = request
            .evidence_update()
            .map_err(Status::invalid_argument)?;
        let _ = self.calls.reports.send(request);
        let mut script = self.script.lock().unwrap();
        if script.fail_reports > 0 {
            script.fail_reports -= 1;
            return Err(Status::unavailable("the fake fails this report"));
        }
        let mut seq = 0;
        if script.takes_changes {
            // Refused changes leave the set held as it was.
            let _ = script.evidence.take(update);
            seq = script.evidence.seq();
        }
        Ok(Response::new(pb::ReadinessReply { known: true, seq }))
    }
}
