//! `FleetService`: what proxies speak. Registration goes through Raft (a
//! follower's node forwards it). Heartbeats and readiness reports are the
//! leader's soft state: a follower refuses them with `UNAVAILABLE` and the
//! leader's address in `x-switchyard-leader`, and the proxy follows it.
//! The configuration watch is served by every coordinator from its own
//! state machine, through its [`Journal`]: each change is encoded once
//! and the same bytes go to every watcher (deltas and chunks to proxies
//! that accept them, whole snapshots to older ones). Every call must come from the proxy it names
//! (`switchyard_tls::authz`; anything goes with `--insecure`).

use super::journal::{Encodings, Full, Journal, Position};
use super::{Coordinator, admin::async_stream, errors, now_ms};
use crate::cutover::{CutoverEngine, Heard};
use crate::state::Command;
use std::pin::Pin;
use std::sync::Arc;
use switchyard_proto::incremental::{AWAIT_WHOLE, SetUpdate};
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

    /// Runs `f` on the leader's engine, or refuses with the leader's
    /// address (only one heard from lately). Callers first hold the call while no live leader is known
    /// ([`super::Coordinator::await_live_leader`]), then read the state.
    fn on_leader<T>(&self, f: impl FnOnce(&mut CutoverEngine) -> T) -> Result<T, Status> {
        if self.coordinator.leads_with_quorum()
            && let Some(out) = self.coordinator.with_engine(f)
        {
            return Ok(out);
        }
        if self.coordinator.node.is_leader() {
            return Err(errors::without_quorum());
        }
        if !self.coordinator.knows_live_leader() {
            // The leader it last heard from may be the one that died.
            return Err(errors::no_live_leader());
        }
        Err(errors::not_leader(&self.coordinator.node))
    }

    /// Takes a proxy's set (`update`, sent as `form`: see [`form_of`]) by
    /// `take` on the leader's engine. A set named by a digest the leader
    /// does not know yet while another proxy was asked for that set whole
    /// ([`Heard::awaits_set`]) is tried again each time the leader takes a
    /// whole set, for at most [`AWAIT_WHOLE`]: at a failover the fleet
    /// names the same digest at once, and one copy of the set then serves
    /// them all. Past that the refusal is answered (the proxy sends its
    /// set whole). A whole set taken wakes the calls waiting.
    async fn take_set<K: Ord + Clone, V: Clone, T>(
        &self,
        update: SetUpdate<K, V>,
        mut take: impl FnMut(&mut CutoverEngine, SetUpdate<K, V>) -> (Heard, T),
    ) -> Result<(Heard, T), Status> {
        let mut whole_sets_taken = self.coordinator.whole_sets_taken.subscribe();
        let whole = matches!(update, SetUpdate::Whole { .. });
        // Only a digest is tried again: a copy of it is a few bytes.
        let again = matches!(update, SetUpdate::Known { .. }).then(|| update.clone());
        let mut answer = self.on_leader(|e| take(e, update))?;
        if let Some(again) = again
            && answer.0.awaits_set
        {
            self.coordinator.metrics.digest_waits.inc();
            let deadline = tokio::time::Instant::now() + AWAIT_WHOLE;
            // News of any call counts (the first may have renewed a lapsed
            // lease, which the next sees as old).
            let mut news = answer.0.news;
            while answer.0.awaits_set {
                let woken = tokio::time::timeout_at(deadline, whole_sets_taken.changed()).await;
                if !matches!(woken, Ok(Ok(()))) {
                    break;
                }
                answer = self.on_leader(|e| take(e, again.clone()))?;
                news |= answer.0.news;
            }
            answer.0.news = news;
        }
        if whole && answer.0.known {
            self.coordinator
                .whole_sets_taken
                .send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(answer)
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
        let applied = r.applied_update().map_err(Status::invalid_argument)?;
        let (form, seq) = (form_of(&applied), applied.seq());
        self.coordinator.await_live_leader().await;
        let state = self.coordinator.node.state().borrow().clone();
        let (heard, ()) = self
            .take_set(applied, |e, applied| {
                let heard = e.heartbeat_update(
                    &state,
                    &r.proxy_id,
                    r.registration,
                    applied,
                    r.applied_through,
                    now_ms(),
                );
                (heard, ())
            })
            .await?;
        if heard.known {
            (self.coordinator.metrics).proxy_set("applied", form, heard.held_seq == seq);
        }
        // Only news wakes the leader loop and the status watchers: a
        // heartbeat that renews a live lease and changes nothing is the
        // common case, and waking them for it costs O(proxies) per second
        // per status watcher for nothing.
        if heard.news {
            self.coordinator.changed();
        }
        // Taken already; only the answer waits, while applies pile up.
        let grouped = self.coordinator.node.since_grouped_write();
        let hold = (self.coordinator.pacing).hold(state.proxies.len(), grouped);
        if heard.known && !hold.is_zero() {
            self.coordinator.metrics.paced_answers.inc();
            tokio::time::sleep(hold).await;
        }
        Ok(Response::new(pb::HeartbeatReply {
            known: heard.known,
            config_version: state.last_index,
            applied_seq: heard.held_seq,
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
        let request = request.into_inner();
        tracing::info!(
            proxy = %request.proxy_id,
            known_version = request.known_version,
            accepts_deltas = request.accepts_deltas,
            accepts_lz4 = request.accepts_lz4,
            "proxy watching configuration"
        );
        let journal = self.coordinator.journal.clone();
        let mut leader = self.coordinator.leader_news.subscribe();
        // Told once at the start of every stream, then on every change.
        leader.mark_changed();
        let coordinator_id = self.coordinator.config.node.id;
        let open = self.coordinator.metrics.stream_opened("watch");
        let stream = async_stream(move |tx| async move {
            let _open = open;
            let mut out = Out {
                tx,
                leader,
                coordinator_id,
                // Only chunked payloads may come compressed: a watcher
                // of whole snapshots is one older than both.
                accepts_lz4: request.accepts_lz4 && request.accepts_deltas,
            };
            if request.accepts_deltas {
                stream_deltas(&journal, &mut out, request.known_version).await;
            } else {
                stream_snapshots(&journal, &mut out).await;
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
        let backends = r.evidence_update().map_err(Status::invalid_argument)?;
        let (form, seq) = (form_of(&backends), backends.seq());
        let sockets = r
            .listeners
            .as_ref()
            .map(|l| l.sockets.iter().map(TryFrom::try_from).collect())
            .transpose()
            .map_err(|e: String| Status::invalid_argument(format!("proxy {}: {e}", r.proxy_id)))?;
        self.coordinator.await_live_leader().await;
        let state = self.coordinator.node.state().borrow().clone();
        let (mut sockets, mut sockets_news) = (Some(sockets), false);
        let (heard, ()) = self
            .take_set(backends, |e, backends| {
                let heard =
                    e.report_update(&state, &r.proxy_id, r.registration, backends, now_ms());
                // Recorded once, whatever becomes of the set.
                if heard.known
                    && let Some(sockets) = sockets.take()
                {
                    sockets_news = e.record_sockets(&r.proxy_id, sockets);
                }
                (heard, ())
            })
            .await?;
        self.coordinator.metrics.evidence_reports.inc();
        if heard.known {
            (self.coordinator.metrics).proxy_set("evidence", form, heard.held_seq == seq);
        }
        if heard.news || sockets_news {
            self.coordinator.changed();
        }
        Ok(Response::new(pb::ReadinessReply {
            known: heard.known,
            seq: heard.held_seq,
        }))
    }
}

/// The `form` label of a proxy's set as it came.
fn form_of<K, V>(update: &SetUpdate<K, V>) -> &'static str {
    match update {
        SetUpdate::Whole { .. } => "whole",
        SetUpdate::Known { .. } => "digest",
        SetUpdate::Changes { .. } => "changes",
    }
}

/// One watch stream's sending side.
struct Out {
    tx: tokio::sync::mpsc::Sender<Result<pb::ConfigUpdate, Status>>,
    /// The leader as this coordinator knows it (see [`Out::wait`]).
    leader: tokio::sync::watch::Receiver<Option<String>>,
    coordinator_id: u64,
    /// The watcher reads compressed payloads.
    accepts_lz4: bool,
}

/// Which field a payload travels in.
#[derive(Clone, Copy)]
enum Payload {
    Snapshot,
    Delta,
}

impl Payload {
    /// Its label in the encoding counters.
    fn label(self) -> &'static str {
        match self {
            Payload::Snapshot => "full",
            Payload::Delta => "delta",
        }
    }
}

impl Out {
    /// Sends `update`; false once the client is gone.
    async fn send(&self, update: Result<pb::ConfigUpdate, Status>) -> bool {
        self.tx.send(update).await.is_ok()
    }

    /// A bare version: nothing proxies see changed since `base`.
    async fn bare(&self, version: u64, base_version: u64) -> bool {
        self.send(Ok(pb::ConfigUpdate {
            version,
            base_version,
            coordinator_id: self.coordinator_id,
            ..Default::default()
        }))
        .await
    }

    /// One payload as consecutive chunks of `version`, nothing between
    /// them (this task is the stream's only sender), compressed if the
    /// watcher reads that and the payload gains from it.
    async fn chunks(
        &self,
        journal: &Journal,
        (version, base_version): (u64, u64),
        kind: Payload,
        payload: &Encodings,
    ) -> bool {
        let (compressed, chunks) = journal.chunks_for(payload, self.accepts_lz4, kind.label());
        let encoding = if compressed {
            pb::PayloadEncoding::Lz4
        } else {
            pb::PayloadEncoding::Json
        };
        let chunk_count = u32::try_from(chunks.len()).unwrap_or(u32::MAX);
        for (i, chunk) in chunks.iter().enumerate() {
            let mut update = pb::ConfigUpdate {
                version,
                base_version,
                coordinator_id: self.coordinator_id,
                chunk_index: u32::try_from(i).unwrap_or(u32::MAX),
                chunk_count,
                encoding: encoding.into(),
                ..Default::default()
            };
            match kind {
                Payload::Snapshot => update.snapshot_json = chunk.clone(),
                Payload::Delta => update.delta_json = chunk.clone(),
            }
            if !self.send(Ok(update)).await {
                return false;
            }
        }
        true
    }

    /// The journal's full snapshot, or the stream ends with an internal
    /// error (nothing in the model fails to encode).
    async fn full(&self, journal: &Journal, with_deltas: bool) -> Option<Arc<Full>> {
        match journal.full(with_deltas).await {
            Ok(full) => Some(full),
            Err(e) => {
                let _ = self
                    .send(Err(Status::internal(format!(
                        "configuration does not encode: {e}"
                    ))))
                    .await;
                None
            }
        }
    }

    /// Waits for the journal to move on; false once the client is gone.
    /// (End with the client, not only on the next failed send: a gone
    /// proxy must not keep a task here.) Meanwhile, whenever this
    /// coordinator's view of the leader changes, tells the proxy in a bare
    /// update at `held` (`base` as this stream's bare versions carry it):
    /// after a failover a proxy learns the new leader from the first
    /// coordinator that does, instead of by failed calls and back-off.
    async fn wait(
        &mut self,
        head: &mut tokio::sync::watch::Receiver<u64>,
        (held, base): (u64, u64),
    ) -> bool {
        loop {
            tokio::select! {
                changed = head.changed() => return changed.is_ok(),
                Ok(()) = self.leader.changed() => {
                    let address = self.leader.borrow_and_update().clone().unwrap_or_default();
                    let notice = pb::ConfigUpdate {
                        version: held,
                        base_version: base,
                        coordinator_id: self.coordinator_id,
                        leader: address,
                        ..Default::default()
                    };
                    if !self.send(Ok(notice)).await {
                        return false;
                    }
                }
                () = self.tx.closed() => return false,
            }
        }
    }
}

/// A proxy that accepts deltas: the changes after `known` if the journal
/// has them (a resume), else a chunked full snapshot first; then every
/// entry as it is journaled. One that falls behind the ring while
/// connected gets a full snapshot again.
async fn stream_deltas(journal: &Journal, out: &mut Out, known: u64) {
    let mut head = journal.head();
    // Holding nothing (0), the proxy needs a full snapshot first.
    let mut held = (known != 0).then_some(known);
    let mut first = true;
    loop {
        head.borrow_and_update();
        match held {
            None => {
                let Some(full) = out.full(journal, true).await else {
                    return;
                };
                if !out
                    .chunks(journal, (full.version, 0), Payload::Snapshot, &full.payload)
                    .await
                {
                    return;
                }
                // The snapshot may be of an earlier version than the head
                // (see `Journal::full`): what follows it comes now.
                held = Some(full.version);
                first = false;
                continue;
            }
            Some(version) => match journal.position(version) {
                // Resuming where it is: one bare version shows the stream
                // is live.
                Position::Current if first => {
                    if !out.bare(version, version).await {
                        return;
                    }
                }
                // Current, or ahead of this coordinator (it heard of a
                // newer version elsewhere): wait for what comes.
                Position::Current | Position::Ahead => {}
                Position::Behind(entries) => {
                    for entry in entries {
                        let sent = if entry.is_bare() {
                            out.bare(entry.version, entry.base).await
                        } else {
                            out.chunks(
                                journal,
                                (entry.version, entry.base),
                                Payload::Delta,
                                &entry.payload,
                            )
                            .await
                        };
                        if !sent {
                            return;
                        }
                        held = Some(entry.version);
                    }
                }
                Position::Lost => {
                    held = None;
                    continue;
                }
            },
        }
        first = false;
        // Held: set above on every path that reaches here.
        let at = held.unwrap_or_default();
        if !out.wait(&mut head, (at, at)).await {
            return;
        }
    }
}

/// A proxy that does not accept deltas (today's contract): the whole
/// snapshot in one message at once and after every change proxies see, a
/// bare version after a change they do not.
async fn stream_snapshots(journal: &Journal, out: &mut Out) {
    let mut head = journal.head();
    let mut held = None;
    loop {
        head.borrow_and_update();
        match held {
            None => {
                // At the head or with only bare versions after it: this
                // proxy takes no deltas.
                let Some(full) = out.full(journal, false).await else {
                    return;
                };
                let update = pb::ConfigUpdate {
                    version: full.version,
                    snapshot_json: full.payload.json.clone(),
                    coordinator_id: out.coordinator_id,
                    ..Default::default()
                };
                if !out.send(Ok(update)).await {
                    return;
                }
                // Possibly of an earlier version, bare versions after it.
                held = Some(full.version);
                continue;
            }
            Some(version) => match journal.position(version) {
                Position::Current | Position::Ahead => {}
                Position::Behind(entries) if entries.iter().all(|e| e.is_bare()) => {
                    if let Some(last) = entries.last() {
                        if !out.bare(last.version, 0).await {
                            return;
                        }
                        held = Some(last.version);
                    }
                }
                Position::Behind(_) | Position::Lost => {
                    held = None;
                    continue;
                }
            },
        }
        if !out.wait(&mut head, (held.unwrap_or_default(), 0)).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
