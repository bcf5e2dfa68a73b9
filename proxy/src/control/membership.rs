//! This proxy's membership of the fleet, all with the leader: register,
//! then report readiness evidence and heartbeat the generations served,
//! register again when the leader no longer knows this registration (the
//! data plane's `/ready` answers 503 until the proxy is registered again
//! and caught up: [`crate::DataPlane::mark_dropped`]), deregister on
//! shutdown.
//!
//! Evidence and applied generations go whole once, then as the changes
//! since what the leader acknowledged ([`switchyard_proto::incremental`]):
//! a renewal in which nothing changed is two small messages, whatever
//! the number of routes. Applied generations are said by configuration
//! version (`applied_through`), the set listing only the routes served
//! otherwise (see the apply loop's `AppliedThrough`): the heartbeat is due
//! when that version or the set moved. When an answer shows the leader
//! holds something else (a new leader, a lost answer), the set goes whole
//! at once. A round
//! runs every heartbeat interval and whenever the served generations, the
//! evidence or the listener sockets change; it sends each set only when it
//! changed or is an interval old, so a change costs the leader one call
//! per proxy, not two.
//!
//! Owns: the unary `FleetService` calls (each to the leader as far as this
//! proxy knows, following "not the leader" hints), the registration id
//! they carry, the back-off between failed registrations, and feeding the
//! leader's version to the lag check. Does not own: what is reported or
//! heartbeated (the apply loop publishes it), nor the watch stream (`watch`
//! decides what a lag means for it).

use super::backoff::Backoff;
use super::error::{Call, ControlError, Refusal, log_error};
use super::watch::LagDetector;
use super::{AppliedThrough, Shared};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use switchyard_proto::incremental::{SetSender, VersionedSetSender};
use switchyard_proto::model::{BackendEvidence, BackendKey, ObjectName};
use switchyard_proto::pb;
use switchyard_proto::pb::fleet_service_client::FleetServiceClient;
use tokio::time::Instant;
use tonic::transport::Channel;
use tracing::Level;

/// How long registering may fail for want of a leader before it is worth
/// a warning: elections (a start-up, a failover) take about a second.
const REGISTRATION_PATIENCE: Duration = Duration::from_secs(5);

/// The shortest heartbeat interval this proxy keeps to, whatever a leader
/// says.
const MIN_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(50);

/// What the leader acknowledged holding of this proxy's sets.
#[derive(Default)]
struct Senders {
    /// The routes served otherwise, beside the configuration version
    /// (`AppliedThrough`).
    applied: VersionedSetSender<ObjectName, u64>,
    evidence: SetSender<BackendKey, BackendEvidence>,
}

impl Senders {
    /// How long until the first of the two sets is due for renewal, at
    /// most `interval`: however often changes wake the loop, the leader
    /// hears both sets at least every interval.
    fn until_renewal(&self, interval: Duration) -> Duration {
        let now = std::time::Instant::now();
        self.applied
            .until_renewal(now, interval)
            .min(self.evidence.until_renewal(now, interval))
    }
}

/// Registers, then reports and heartbeats round after round until aborted;
/// registers again whenever the leader no longer knows this registration.
pub(super) async fn run(shared: Arc<Shared>) {
    let mut senders = Senders::default();
    if shared.coordinators.order().is_empty() {
        // No coordinator configured: nobody to be a member with.
        return;
    }
    let mut readiness = shared.dataplane.readiness_changes();
    let mut sockets = shared.dataplane.listener_socket_changes();
    let mut backoff = Backoff::new(shared.config.backoff_policy());
    // Since when this proxy has been trying to (re)register.
    let mut unregistered_since = Instant::now();
    'register: loop {
        let interval = match register(&shared).await {
            Ok(reply) => {
                backoff.reset();
                // Ready (again, after a drop) once it serves every
                // committed generation in a configuration at least as new
                // as this registration (the apply loop says when).
                shared.dataplane.mark_registered(reply.registration);
                Duration::from_millis(reply.heartbeat_interval_ms).max(MIN_HEARTBEAT_INTERVAL)
            }
            Err(e) => {
                let waiting_for_leader = matches!(
                    e,
                    ControlError::Transport { .. }
                        | ControlError::Refused {
                            refusal: Refusal::NotLeader { .. },
                            ..
                        }
                ) && unregistered_since.elapsed() < REGISTRATION_PATIENCE;
                if waiting_for_leader {
                    log_error!(
                        Level::INFO,
                        &e,
                        "registration not possible yet (no leader); retrying"
                    );
                } else {
                    log_error!(e.level(), &e, "registration failed; retrying");
                }
                tokio::time::sleep(backoff.next_delay()).await;
                continue 'register;
            }
        };
        let mut lag = LagDetector::spaced(interval);
        // A new registration holds nothing on the leader.
        senders.applied.reset();
        senders.evidence.reset();
        // Whether the listener sockets changed since the last report the
        // leader answered (they ride along with the evidence).
        let mut sockets_unsent = true;
        // Whether this streak of failed rounds has had its one retry at
        // once, after a refusal that named the leader.
        let mut followed_hint = false;
        loop {
            if shared.take_leader_moved() {
                // A new leader: both sets go to it now (as changes, which
                // it takes if this proxy already reached it, else refuses
                // for the digest or the whole), and any back-off starts
                // over.
                senders.applied.renew();
                senders.evidence.renew();
                sockets_unsent = true;
                backoff.reset();
                followed_hint = false;
            }
            // After a failed round the next one comes after a back-off
            // pause, never later than the interval: a leader that died
            // or moved is found (through the hint or the next coordinator)
            // within a fraction of the lease, not one interval per
            // coordinator tried — the new leader judges nothing until it
            // has heard from its proxies. A refusal that names the leader
            // is followed at once, once per streak (a coordinator names a
            // leader only when it heard from it within two heartbeats, so
            // the hint is fresh; once per streak, so two coordinators that
            // disagree for a moment cannot make a loop of it). After a
            // round that went through, the next comes when a set is due
            // for renewal, or sooner on a change.
            //
            // A round whose report failed but whose heartbeat then reached
            // a leader (a failover: the report went to the old one, the
            // heartbeat after it to the new) is followed at once too, once
            // per streak: the new leader's grace ends with the heartbeat,
            // and it judges readiness by the evidence that would otherwise
            // wait out a back-off pause grown while no leader answered.
            let pause = match round(
                &shared,
                &mut lag,
                &mut senders,
                interval,
                &mut sockets_unsent,
            )
            .await
            {
                Ok(()) => {
                    backoff.reset();
                    followed_hint = false;
                    senders.until_renewal(interval)
                }
                Err(RoundFailed {
                    error: e,
                    leader_answered,
                }) if leader_answered && !followed_hint => {
                    log_error!(
                        round_level(&e),
                        &e,
                        "readiness report failed, heartbeat reached the leader; reporting again"
                    );
                    followed_hint = true;
                    Duration::ZERO
                }
                Err(RoundFailed { error: e, .. }) if e.is_unknown_registration() => {
                    // Cutovers may have been committed without this proxy:
                    // out of its load balancer until it has caught up.
                    shared.dataplane.mark_dropped();
                    log_error!(
                        e.level(),
                        &e,
                        "the leader does not know this proxy (lease expired or new leader); registering again, /ready answers 503 until it serves every committed generation"
                    );
                    unregistered_since = Instant::now();
                    continue 'register;
                }
                Err(RoundFailed { error: e, .. }) => {
                    log_error!(round_level(&e), &e, "heartbeat or readiness report failed");
                    if e.leader_hint().is_some() && !followed_hint {
                        followed_hint = true;
                        Duration::ZERO
                    } else {
                        backoff.next_delay().min(interval)
                    }
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shared.report_now.notified() => {}
                _ = readiness.changed() => {}
                _ = sockets.changed() => sockets_unsent = true,
            }
        }
    }
}

/// Heartbeats and reports are retried next round anyway: an unreachable
/// coordinator or a redirect to the leader is not worth more than DEBUG
/// there (the watch stream and registration say so louder).
fn round_level(e: &ControlError) -> Level {
    match e {
        ControlError::Transport { .. }
        | ControlError::Refused {
            refusal: Refusal::NotLeader { .. },
            ..
        } => Level::DEBUG,
        _ => e.level(),
    }
}

/// A round that failed: the error it ends with, and whether its heartbeat
/// reached the leader all the same (only its report failed).
struct RoundFailed {
    error: ControlError,
    leader_answered: bool,
}

impl From<ControlError> for RoundFailed {
    fn from(error: ControlError) -> Self {
        RoundFailed {
            error,
            leader_answered: false,
        }
    }
}

/// One round: evidence first — a new leader learns readiness as soon as it
/// hears from this proxy — then the heartbeat renews the lease. Each set
/// goes only when it is due ([`SetSender::due`]): changed since the leader
/// acknowledged it, or an interval old (the sockets, riding with the
/// evidence, make it due when they changed). So a new configuration that
/// moves only served generations costs one call, not two, and one that
/// moves neither costs none. A failed report does not skip the heartbeat,
/// unless it says the registration is unknown; the round then fails with
/// the report's error even when the heartbeat (sent to the leader the
/// refusal named) succeeded, saying so ([`RoundFailed::leader_answered`]):
/// the evidence follows at once, not after a back-off pause.
async fn round(
    shared: &Shared,
    lag: &mut LagDetector,
    senders: &mut Senders,
    interval: Duration,
    sockets_unsent: &mut bool,
) -> Result<(), RoundFailed> {
    let now = std::time::Instant::now();
    let backends = evidence(shared);
    let reported = if *sockets_unsent || senders.evidence.due(&backends, now, interval) {
        let reported = report(shared, &mut senders.evidence, &backends).await;
        if reported.is_ok() {
            *sockets_unsent = false;
        }
        reported
    } else {
        Ok(())
    };
    if reported
        .as_ref()
        .is_err_and(ControlError::is_unknown_registration)
    {
        return Ok(reported?);
    }
    // O(1): a persistent map.
    let applied = shared
        .applied
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    // After a failed report the heartbeat goes whether due or not: the
    // leader may have changed, and a new one ends its grace only when
    // every proxy heartbeated to it.
    let due = (senders.applied).due(&applied.exceptions, applied.through, now, interval);
    let beat = if reported.is_err() || due {
        heartbeat(shared, lag, &mut senders.applied, &applied).await
    } else {
        Ok(())
    };
    match (reported, beat) {
        (Err(report_error), Err(beat_error)) => {
            // The caller logs the heartbeat's error; this one would be lost.
            log_error!(
                round_level(&report_error),
                &report_error,
                "readiness report failed"
            );
            Err(beat_error.into())
        }
        (Err(report_error), Ok(())) => Err(RoundFailed {
            error: report_error,
            leader_answered: true,
        }),
        (Ok(()), beat) => Ok(beat?),
    }
}

/// The evidence this proxy reports: per backend it keeps warm, what its
/// data plane knows. O(B).
fn evidence(shared: &Shared) -> imbl::OrdMap<BackendKey, BackendEvidence> {
    shared
        .reported
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(|b| Some((b.clone(), shared.dataplane.readiness(b)?)))
        .collect()
}

/// One unary call to the leader as far as this proxy knows. A failure is
/// counted and noted (a leader hint is followed next time; without one the
/// next call tries the next coordinator). Returns the address it went to.
async fn call<T, F, Fut>(shared: &Shared, call: Call, rpc: F) -> Result<(String, T), ControlError>
where
    F: FnOnce(FleetServiceClient<Channel>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    // Always an address: this task returns at once when no coordinator is
    // configured, and with one `leader_or_first` always names one.
    let address = shared.coordinators.leader_or_first().unwrap_or_default();
    let outcome = match shared.coordinators.client(&address, false) {
        Ok(client) => rpc(client)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| ControlError::from_status(&address, call, &status)),
        Err(e) => Err(e),
    };
    match outcome {
        Ok(reply) => Ok((address, reply)),
        Err(e) => {
            shared.metrics.coordinator_errors.inc();
            shared.coordinators.note_failure(&e);
            Err(e)
        }
    }
}

async fn register(shared: &Shared) -> Result<pb::RegisterReply, ControlError> {
    let request = pb::RegisterRequest::for_proxy(
        shared.config.proxy_id.clone(),
        shared.config.zone.clone(),
        shared.config.admin_address.clone(),
    );
    let (address, reply) = call(shared, Call::Register, |mut c| async move {
        c.register(request).await
    })
    .await?;
    shared
        .registration
        .store(reply.registration, Ordering::Relaxed);
    tracing::info!(coordinator = %address, registration = reply.registration, "registered with the coordinators");
    Ok(reply)
}

/// Renews the lease and feeds the lag check. An unknown registration is a
/// [`Refusal::UnknownRegistration`]. Changes the leader could not take (it
/// holds another set) are followed at once by the whole set.
async fn heartbeat(
    shared: &Shared,
    lag: &mut LagDetector,
    sender: &mut VersionedSetSender<ObjectName, u64>,
    applied: &AppliedThrough,
) -> Result<(), ControlError> {
    let (held, leader) = sender
        .send(&applied.exceptions, applied.through, |update| {
            let held = shared.held_version.load(Ordering::Relaxed);
            let registration = shared.registration.load(Ordering::Relaxed);
            let mut request = pb::HeartbeatRequest {
                proxy_id: shared.config.proxy_id.clone(),
                config_version: held,
                registration,
                applied_through: applied.through,
                ..Default::default()
            };
            request.set_applied(update);
            async move {
                let (address, reply) = call(shared, Call::Heartbeat, |mut c| async move {
                    c.heartbeat(request).await
                })
                .await?;
                known(reply.known, address, Call::Heartbeat, registration)?;
                Ok(((held, reply.config_version), reply.applied_seq))
            }
        })
        .await?;
    if let Some(behind) = lag.observe_at(Instant::now(), held, leader) {
        // The watcher logs it, naming the coordinator it watches.
        shared.lag.send_replace(behind);
    }
    Ok(())
}

/// Sends evidence for every reported backend, and the listener sockets.
/// An unknown registration is a [`Refusal::UnknownRegistration`]. Changes
/// the leader could not take are followed at once by a whole report.
async fn report(
    shared: &Shared,
    sender: &mut SetSender<BackendKey, BackendEvidence>,
    backends: &imbl::OrdMap<BackendKey, BackendEvidence>,
) -> Result<(), ControlError> {
    // Sent unchanged too when due: it keeps the evidence current on the
    // leader, and a whole empty one withdraws evidence for backends this
    // proxy no longer keeps warm.
    sender
        .send(backends, |update| {
            let registration = shared.registration.load(Ordering::Relaxed);
            // The sockets ride along: whether this proxy bound each
            // listener port is what the Gateways' listener status rests on.
            let listeners =
                shared
                    .dataplane
                    .listener_sockets()
                    .map(|sockets| pb::ListenerSockets {
                        sockets: sockets.iter().map(pb::ListenerSocket::from).collect(),
                    });
            let mut request = pb::ReadinessReport {
                proxy_id: shared.config.proxy_id.clone(),
                registration,
                listeners,
                ..Default::default()
            };
            request.set_evidence(update);
            async move {
                let (address, reply) = call(shared, Call::ReportReadiness, |mut c| async move {
                    c.report_readiness(request).await
                })
                .await?;
                known(reply.known, address, Call::ReportReadiness, registration)?;
                Ok(((), reply.seq))
            }
        })
        .await
}

fn known(
    known: bool,
    coordinator: String,
    call: Call,
    registration: u64,
) -> Result<(), ControlError> {
    if known {
        return Ok(());
    }
    Err(ControlError::Refused {
        coordinator,
        call,
        refusal: Refusal::UnknownRegistration { registration },
        message: String::new(),
    })
}

/// Leaves the fleet, naming this run's registration, so the leader stops
/// counting this proxy at once instead of when its lease expires.
pub(super) async fn deregister(shared: &Shared) {
    if shared.coordinators.order().is_empty() {
        return;
    }
    let request = pb::DeregisterRequest {
        proxy_id: shared.config.proxy_id.clone(),
        registration: shared.registration.load(Ordering::Relaxed),
    };
    match call(shared, Call::Deregister, |mut c| async move {
        c.deregister(request).await
    })
    .await
    {
        Ok((address, _)) => {
            tracing::info!(coordinator = %address, "deregistered from the coordinators")
        }
        Err(e) => log_error!(
            Level::WARN,
            &e,
            "could not deregister; the lease will expire instead"
        ),
    }
}
