//! The configuration stream: one `Watch` open to some coordinator at a
//! time, and every newer snapshot it shows published to the apply loop.
//!
//! Owns: which coordinator to watch ([`next_target`]), naming the version
//! held when (re)connecting so the coordinator sends only the changes
//! since (or, after an update that did not fit, asking for a full
//! snapshot again), when a stream counts as lagging behind the leader
//! ([`LagDetector`], fed by heartbeats), and reconnecting with jittered
//! back-off. Does not own: chunk assembly and what an update means for
//! the configuration held (`assembly`), applying a snapshot (`apply`), nor
//! talking to the leader (`membership` does, and tells this task the
//! leader's version).
//!
//! Any coordinator serves the stream from its own state machine, so a
//! follower is as good as the leader — unless it is cut off from the
//! leader, which only the heartbeats' answers show.

use super::Shared;
use super::assembly::{Assembler, Decoded, apply_delta, decode};
use super::backoff::Backoff;
use super::error::{Call, ControlError, log_error};
use futures::FutureExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use switchyard_proto::model::ConfigSnapshot;
use switchyard_proto::pb;
use tokio::sync::watch;
use tokio::time::Instant;

/// Heartbeat rounds in a row that must show the leader ahead of the
/// stream before the stream counts as lagging. One round behind is normal
/// (the stream is a moment behind the leader); several in a row mean the
/// watched coordinator is not getting the leader's commits.
pub(super) const LAG_ROUNDS: u32 = 3;

/// A stream that lagged for [`LAG_ROUNDS`]: the version it held and the
/// leader's, at the last heartbeat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Lag {
    /// The version the stream held.
    pub held: u64,
    /// The leader's newest version.
    pub leader: u64,
}

/// Counts heartbeat rounds in which the stream is behind a version the
/// leader already had one round before. Behind the leader's *current*
/// version is normal: a follower learns of a commit with the leader's next
/// Raft heartbeat, and a leader that commits about once per proxy
/// heartbeat is one version ahead at every round — a healthy stream that
/// must not be dropped.
#[derive(Debug, Default)]
pub(super) struct LagDetector {
    rounds: u32,
    /// The leader's version at the previous round.
    previous_leader: Option<u64>,
    /// Least time between two rounds that count (see [`Self::spaced`]).
    spacing: Duration,
    /// When the last counted round was.
    counted_at: Option<Instant>,
}

impl LagDetector {
    /// A detector that counts only rounds at least `spacing` (the
    /// heartbeat interval) apart. Rounds also run early — whenever
    /// readiness or the sockets change, or a report is due — and a few of
    /// those within milliseconds, while a follower is one commit behind
    /// for a moment, would otherwise count as a lag of [`LAG_ROUNDS`]
    /// heartbeats and drop a healthy stream.
    pub(super) fn spaced(spacing: Duration) -> LagDetector {
        LagDetector {
            spacing,
            ..LagDetector::default()
        }
    }

    /// [`observe`](Self::observe) for a round at `now`; `None` without
    /// counting it when it comes sooner than the spacing after the last
    /// counted one.
    pub(super) fn observe_at(&mut self, now: Instant, held: u64, leader: u64) -> Option<Lag> {
        if self
            .counted_at
            .is_some_and(|at| now.saturating_duration_since(at) < self.spacing)
        {
            return None;
        }
        self.counted_at = Some(now);
        self.observe(held, leader)
    }

    /// One heartbeat's view: `held` by the stream, `leader`'s newest.
    /// Returns the lag once it lasted [`LAG_ROUNDS`] in a row, then counts
    /// afresh.
    pub(super) fn observe(&mut self, held: u64, leader: u64) -> Option<Lag> {
        let behind = self.previous_leader.is_some_and(|before| held < before);
        self.previous_leader = Some(leader);
        if !behind {
            self.rounds = 0;
            return None;
        }
        self.rounds += 1;
        if self.rounds < LAG_ROUNDS {
            return None;
        }
        self.rounds = 0;
        Some(Lag { held, leader })
    }
}

/// How the last stream ended, for [`next_target`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    /// The coordinator closed it.
    Cleanly,
    /// It failed or lagged.
    Failed,
}

/// The coordinator to watch next. First the leader if one is known (else
/// the first in preference order). After a failure, the leader again — it
/// has every commit — unless it is the one that failed; after that, or
/// after a clean end, the next coordinator in the order.
pub(super) fn next_target(
    order: &[String],
    leader_or_first: Option<&str>,
    previous: Option<(&str, Ended)>,
) -> Option<String> {
    let after = |prev: &str| {
        let i = order.iter().position(|a| a == prev).map_or(0, |i| i + 1);
        order.get(i % order.len().max(1)).cloned()
    };
    match previous {
        None => leader_or_first.map(str::to_string),
        Some((prev, Ended::Failed)) if leader_or_first.is_some_and(|l| l != prev) => {
            leader_or_first.map(str::to_string)
        }
        Some((prev, _)) => after(prev).or_else(|| leader_or_first.map(str::to_string)),
    }
}

/// Keeps a watch stream open to some coordinator and publishes every newer
/// snapshot, until aborted on shutdown (or at once when no coordinator is
/// configured).
pub(super) async fn run(shared: Arc<Shared>, tx: watch::Sender<Option<Arc<ConfigSnapshot>>>) {
    let mut held = 0u64;
    // Set after an update that did not fit what is held: the next stream
    // asks for a full snapshot instead of the changes since `held`.
    let mut resync = false;
    // The configuration at `held`, owned here: deltas are applied on it in
    // place, and the apply loop gets a copy when a burst of them is done.
    let mut working: Option<ConfigSnapshot> = None;
    let mut backoff = Backoff::new(shared.config.backoff_policy());
    let mut lag = shared.lag.subscribe();
    let mut previous: Option<(String, Ended)> = None;
    loop {
        let target = next_target(
            shared.coordinators.order(),
            shared.coordinators.leader_or_first().as_deref(),
            previous.as_ref().map(|(a, e)| (a.as_str(), *e)),
        );
        let Some(address) = target else {
            // No coordinator configured at all: nothing to watch.
            return;
        };
        let outcome = stream_from(
            &shared,
            &address,
            (&mut held, &mut resync, &mut working),
            &tx,
            &mut lag,
            &mut backoff,
        )
        .await;
        let ended = match outcome {
            Ok(()) => {
                tracing::warn!(coordinator = %address, "configuration stream ended; reconnecting");
                Ended::Cleanly
            }
            Err(e) => {
                shared.metrics.coordinator_errors.inc();
                if matches!(
                    e,
                    ControlError::OutOfSequence { .. }
                        | ControlError::Decode { .. }
                        | ControlError::Encoding { .. }
                ) {
                    resync = true;
                }
                match &e {
                    ControlError::Lagging { held, leader, .. } => log_error!(
                        e.level(),
                        &e,
                        held,
                        leader,
                        "configuration stream is behind the leader; switching coordinator"
                    ),
                    _ => log_error!(
                        e.level(),
                        &e,
                        "configuration stream failed; trying another coordinator"
                    ),
                }
                Ended::Failed
            }
        };
        previous = Some((address, ended));
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// Streams from `address` until the stream ends (`Ok`) or fails. `held` is
/// the newest version shown so far, on any stream, and `working` the
/// configuration at it; `resync` says a full snapshot is needed (cleared
/// once one arrived). The back-off starts over once the coordinator has
/// delivered an update this proxy can read.
///
/// Updates that arrive together are applied on `working` one after the
/// other (all or nothing each) and published once, when the stream has
/// nothing more ready: a burst of changes costs one copy of the
/// configuration for the apply loop, not one per change. Whatever was
/// applied is published before this returns, so what the apply loop has
/// is always the configuration at `held`.
async fn stream_from(
    shared: &Shared,
    address: &str,
    (held, resync, working): (&mut u64, &mut bool, &mut Option<ConfigSnapshot>),
    tx: &watch::Sender<Option<Arc<ConfigSnapshot>>>,
    lag: &mut watch::Receiver<Lag>,
    backoff: &mut Backoff,
) -> Result<(), ControlError> {
    let mut client = shared.coordinators.client(address, true)?;
    let request = pb::WatchRequest {
        proxy_id: shared.config.proxy_id.clone(),
        known_version: if *resync { 0 } else { *held },
        accepts_deltas: true,
        accepts_lz4: true,
    };
    let failed = |status: tonic::Status| ControlError::from_status(address, Call::Watch, &status);
    let mut stream = client.watch(request).await.map_err(failed)?.into_inner();
    tracing::info!(coordinator = %address, held = *held, resync = *resync, "watching configuration");
    let mut unpublished = false;
    let outcome = take_updates(
        shared,
        address,
        &mut stream,
        (held, resync, working),
        (tx, &mut unpublished),
        lag,
        backoff,
    )
    .await;
    if unpublished {
        publish(tx, working);
    }
    outcome
}

/// Sends the apply loop a copy of `working`.
fn publish(tx: &watch::Sender<Option<Arc<ConfigSnapshot>>>, working: &Option<ConfigSnapshot>) {
    if let Some(config) = working {
        tx.send_replace(Some(Arc::new(config.clone())));
    }
}

/// The loop of [`stream_from`]: takes every update of `stream`, setting
/// `unpublished` while `working` holds changes the apply loop has not
/// been sent.
async fn take_updates(
    shared: &Shared,
    address: &str,
    stream: &mut tonic::Streaming<pb::ConfigUpdate>,
    (held, resync, working): (&mut u64, &mut bool, &mut Option<ConfigSnapshot>),
    (tx, unpublished): (&watch::Sender<Option<Arc<ConfigSnapshot>>>, &mut bool),
    lag: &mut watch::Receiver<Lag>,
    backoff: &mut Backoff,
) -> Result<(), ControlError> {
    let failed = |status: tonic::Status| ControlError::from_status(address, Call::Watch, &status);
    // Chunks of one payload come on one stream: a new stream starts with
    // nothing half-received.
    let mut assembler = Assembler::default();
    // A lag seen on a previous stream says nothing about this one.
    lag.mark_unchanged();
    // An update already read while looking for more of a burst.
    let mut ready: Option<pb::ConfigUpdate> = None;
    loop {
        let update = match ready.take() {
            Some(update) => update,
            None => {
                if std::mem::take(unpublished) {
                    publish(tx, working);
                }
                tokio::select! {
                    message = stream.message() => match message.map_err(failed)? {
                        Some(update) => update,
                        None => return Ok(()),
                    },
                    Ok(()) = lag.changed() => {
                        let Lag { leader, .. } = *lag.borrow_and_update();
                        if leader > *held {
                            return Err(ControlError::Lagging {
                                coordinator: address.to_string(),
                                held: *held,
                                leader,
                            });
                        }
                        continue;
                    }
                }
            }
        };
        if !update.leader.is_empty() {
            shared.leader_named(&update.leader);
        }
        let coordinator_id = update.coordinator_id;
        let version = update.version;
        let whole = assembler
            .push(update)
            .map_err(|reason| ControlError::OutOfSequence {
                coordinator: address.to_string(),
                version,
                reason,
            })?;
        // A chunk: nothing is used before the last one of its payload.
        if let Some(whole) = whole {
            let received = decode(address, *held, working.is_some(), *resync, whole).await?;
            // This coordinator serves: the next failure starts the
            // back-off over. (Not before decoding: one that keeps sending
            // what this proxy cannot read is retried ever more slowly.)
            backoff.reset();
            match received {
                Decoded::Stale => {
                    tracing::debug!(held = *held, "ignoring a configuration no newer than ours");
                }
                Decoded::Version(version) => {
                    // Noting it keeps the lag check honest.
                    note_version(shared, held, version);
                }
                Decoded::Snapshot(version, snapshot) => {
                    *working = Some(snapshot);
                    taken(shared, address, coordinator_id, held, version, unpublished);
                    *resync = false;
                }
                Decoded::Delta(version, delta) => {
                    apply_delta(address, working, &delta)?;
                    taken(shared, address, coordinator_id, held, version, unpublished);
                }
            }
        }
        // More of a burst already here? Take it before publishing.
        if *unpublished {
            match stream.message().now_or_never() {
                None => {}
                Some(Ok(Some(update))) => ready = Some(update),
                Some(Ok(None)) => return Ok(()),
                Some(Err(status)) => return Err(failed(status)),
            }
        }
    }
}

/// A configuration taken at `version`.
fn taken(
    shared: &Shared,
    address: &str,
    coordinator_id: u64,
    held: &mut u64,
    version: u64,
    unpublished: &mut bool,
) {
    // Before the held version: see `Shared::served_through`.
    shared.payload_version.store(version, Ordering::Release);
    note_version(shared, held, version);
    *unpublished = true;
    tracing::info!(
        coordinator = %address,
        coordinator_id,
        version,
        "configuration received"
    );
}

fn note_version(shared: &Shared, held: &mut u64, version: u64) {
    *held = version;
    shared.held_version.store(version, Ordering::Release);
    shared.metrics.config_version.set(version as i64);
}
