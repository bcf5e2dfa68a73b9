//! One agent's membership, as a real proxy keeps it: register, then in
//! rounds (at the interval the coordinator gave, and at once when its view
//! or the evidence hold changes) report evidence and heartbeat the
//! generations it serves, each set only when it changed or is an interval
//! old ([`SetSender::due`]), register again when the leader forgot it,
//! deregister when stopped. Like a proxy, it sends its sets whole once
//! and then as changes on what the leader acknowledged
//! ([`switchyard_proto::incremental`]), whole again at once when the
//! leader holds something else.
//!
//! Owns: the unary `FleetService` calls and where they go (the coordinator
//! last known to lead: a "not the leader" answer names it, any other
//! failure tries the next one). Does not own: what is reported (`view`).

use super::view::{self, Evidence, View};
use super::{Agent, FleetShared};
use imbl::OrdMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use switchyard_proto::incremental::{SetSender, VersionedSetSender};
use switchyard_proto::model::{BackendKey, ObjectName};
use switchyard_proto::pb::{self, fleet_service_client::FleetServiceClient};
use switchyard_proxy::control::backoff::{Backoff, BackoffPolicy};
use tokio::sync::watch;
use tonic::transport::Channel;

/// The back-off ceiling after the first failed round.
const RETRY_SOON: Duration = Duration::from_millis(100);

/// The back-off after failed rounds, in the proxy's own policy type: a
/// ceiling of [`RETRY_SOON`] doubling per failure in a row, at most
/// `interval`, the pause drawn uniformly below it. Capping the ceiling (rather than the drawn pause,
/// as the proxy does) keeps every pause jittered when the ceiling has
/// outgrown a short interval.
fn round_policy(interval: Duration) -> BackoffPolicy {
    BackoffPolicy {
        initial: RETRY_SOON,
        max: interval,
    }
}

/// Shortest heartbeat interval kept to, whatever a coordinator says.
const MIN_INTERVAL: Duration = Duration::from_millis(50);

/// Where one agent's unary calls go.
pub(super) struct Router {
    clients: Vec<(String, FleetServiceClient<Channel>)>,
    /// Index of the coordinator calls go to (atomic: calls take `&self`,
    /// so one exchange can make several).
    current: AtomicUsize,
    /// Whether the last failure was a refusal that named the leader.
    hinted: AtomicBool,
}

impl Router {
    pub(super) fn new(clients: Vec<(String, FleetServiceClient<Channel>)>, first: usize) -> Self {
        let current = AtomicUsize::new(first % clients.len().max(1));
        Router {
            clients,
            current,
            hinted: AtomicBool::new(false),
        }
    }

    /// Calls go to `address` from now on (a coordinator named it the
    /// leader on the watch stream), if it is one of this agent's.
    fn follow_leader(&self, address: &str) {
        if let Some(i) = self.clients.iter().position(|(a, _)| a == address) {
            self.current.store(i, Ordering::Relaxed);
        }
    }

    /// Whether the last failed call was a refusal naming the leader (now
    /// where calls go); reading it clears it.
    fn take_hinted(&self) -> bool {
        self.hinted.swap(false, Ordering::Relaxed)
    }

    /// One call to the current coordinator; a failure moves on (to the
    /// leader a refusal names, else the next one).
    async fn call<T, F, Fut>(&self, rpc: F) -> Result<T, tonic::Status>
    where
        F: FnOnce(FleetServiceClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let current = self.current.load(Ordering::Relaxed);
        let Some((_, client)) = self.clients.get(current) else {
            return Err(tonic::Status::unavailable("no coordinator configured"));
        };
        match rpc(client.clone()).await {
            Ok(reply) => Ok(reply.into_inner()),
            Err(status) => {
                let hint = status
                    .metadata()
                    .get(switchyard_proto::LEADER_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|l| self.clients.iter().position(|(a, _)| a == l));
                let next = hint.unwrap_or((current + 1) % self.clients.len());
                self.current.store(next, Ordering::Relaxed);
                self.hinted.store(hint.is_some(), Ordering::Relaxed);
                Err(status)
            }
        }
    }
}

/// Runs until `stop` turns true, then deregisters.
pub(super) async fn run(
    agent: Arc<Agent>,
    fleet: Arc<FleetShared>,
    router: Router,
    mut views: watch::Receiver<Arc<View>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut hold = fleet.hold.subscribe();
    let mut leader = agent.leader.subscribe();
    let mut registration = 0u64;
    let mut reported: OrdMap<BackendKey, Evidence> = OrdMap::new();
    let mut senders = Senders::default();
    // The view whose served generations heartbeats say: its version moves
    // only when they changed (as a proxy's `applied_through` does).
    let mut served = Served::default();
    // The leader the watch stream named before the last one.
    let mut previous_leader: Option<String> = None;
    'register: while !*stop.borrow() {
        let request = pb::RegisterRequest::for_proxy(agent.id.clone(), agent.zone.clone(), "");
        let interval = match router
            .call(|mut c| async move { c.register(request).await })
            .await
        {
            Ok(reply) => {
                registration = reply.registration;
                fleet.registrations.fetch_add(1, Ordering::Relaxed);
                Duration::from_millis(reply.heartbeat_interval_ms).max(MIN_INTERVAL)
            }
            Err(_) => {
                fleet.rpc_errors.fetch_add(1, Ordering::Relaxed);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    _ = stop.changed() => {}
                }
                continue 'register;
            }
        };
        // A new registration holds nothing on the leader.
        senders.applied.reset();
        senders.evidence.reset();
        let mut backoff = Backoff::new(round_policy(interval));
        // Whether this streak of failed rounds had its one retry at once.
        let mut followed_hint = false;
        loop {
            if leader.has_changed().unwrap_or(false) {
                // As a proxy does: calls go to the leader the watch stream
                // named; to one other than named before (a failover) both
                // sets go now (taken as changes if the agent reached it
                // already, else by digest or whole).
                let (named, moved) = {
                    let named = leader.borrow_and_update();
                    (
                        named.clone(),
                        previous_leader.is_some() && *named != previous_leader,
                    )
                };
                if let Some(address) = &named {
                    router.follow_leader(address);
                }
                if moved {
                    senders.applied.renew();
                    senders.evidence.renew();
                    backoff.reset();
                    followed_hint = false;
                }
                previous_leader = named;
            }
            let current = views.borrow_and_update().clone();
            served.follow(&current);
            let holding = *hold.borrow_and_update();
            reported = view::reportable(&current, &reported, holding);
            let now = std::time::Instant::now();
            // Evidence first, as a proxy does: a new leader learns
            // readiness as soon as it hears from the proxy. Each set only
            // when due, as a proxy sends it.
            let reported_to = if senders.evidence.due(&reported, now, interval) {
                report(
                    &agent,
                    &fleet,
                    &router,
                    registration,
                    &reported,
                    &mut senders,
                )
                .await
            } else {
                Some(true)
            };
            if reported_to == Some(false) {
                continue 'register;
            }
            // After a failed report the heartbeat goes anyway, as a
            // proxy's does (the leader may have changed).
            let due = (senders.applied).due(&Served::exceptions(), served.through, now, interval);
            let heartbeat_to = if reported_to.is_none() || due {
                heartbeat(&agent, &fleet, &router, registration, &served, &mut senders).await
            } else {
                Some(true)
            };
            if heartbeat_to == Some(false) {
                continue 'register;
            }
            // After a failed call the next round comes after a back-off
            // pause, as a proxy's does: short at first (the router already
            // points at the leader a refusal named, or at the next
            // coordinator), doubling per failure in a row up to the
            // interval, with full jitter — 200 agents retrying together
            // while no leader is elected must not bury the coordinators
            // in calls, each carrying whatever set changes are unsent.
            // A refusal that named the leader is followed at once, once
            // per streak, as a proxy does; so is a failed report whose
            // heartbeat then reached a leader (a failover: the evidence
            // goes to the new leader at once, not after the pause).
            let pause = if reported_to.is_none() || heartbeat_to.is_none() {
                let leader_answered = heartbeat_to == Some(true);
                if (router.take_hinted() || leader_answered) && !followed_hint {
                    followed_hint = true;
                    Duration::ZERO
                } else {
                    backoff.next_delay()
                }
            } else {
                backoff.reset();
                followed_hint = false;
                let now = std::time::Instant::now();
                senders
                    .applied
                    .until_renewal(now, interval)
                    .min(senders.evidence.until_renewal(now, interval))
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                Ok(()) = leader.changed() => {
                    // Seen at the top of the next round (`changed` marks
                    // nothing seen).
                    leader.mark_changed();
                }
                Ok(()) = views.changed() => {}
                Ok(()) = hold.changed() => {}
                _ = stop.changed() => {}
            }
            if *stop.borrow() {
                break 'register;
            }
        }
    }
    let goodbye = pb::DeregisterRequest {
        proxy_id: agent.id.clone(),
        registration,
    };
    if router
        .call(|mut c| async move { c.deregister(goodbye).await })
        .await
        .is_err()
    {
        fleet.rpc_errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the leader acknowledged holding of this agent's sets.
#[derive(Default)]
struct Senders {
    /// The routes served otherwise (none), beside the version served.
    applied: VersionedSetSender<ObjectName, u64>,
    evidence: SetSender<BackendKey, Evidence>,
}

/// What heartbeats say an agent serves (`HeartbeatRequest.applied_through`):
/// every active generation of configuration `through`. An agent warms at
/// once, so it never lists a route served otherwise: the set it sends
/// ([`Served::exceptions`]) is always empty, and a heartbeat costs the
/// leader O(1) — as a proxy's does while it keeps up.
#[derive(Default)]
struct Served {
    /// The newest configuration version received (a heartbeat's
    /// `config_version`).
    received: u64,
    through: u64,
    /// The served generations of `through`'s view (to see them move).
    generations: OrdMap<ObjectName, u64>,
}

impl Served {
    /// The routes served otherwise than `through` says: none.
    fn exceptions() -> OrdMap<ObjectName, u64> {
        OrdMap::new()
    }

    /// Moves to `view`'s version when its served generations differ from
    /// the ones said (O(change): the maps share their structure).
    fn follow(&mut self, view: &View) {
        self.received = view.version;
        if !self.generations.ptr_eq(&view.applied) && self.generations != view.applied {
            self.through = view.version;
            self.generations = view.applied.clone();
        }
    }
}

/// Reports `reported`: whether the leader knows this registration, `None`
/// when the call failed (counted; the next round retries).
async fn report(
    agent: &Agent,
    fleet: &FleetShared,
    router: &Router,
    registration: u64,
    reported: &OrdMap<BackendKey, Evidence>,
    senders: &mut Senders,
) -> Option<bool> {
    let sent = senders
        .evidence
        .send(reported, |update| {
            let mut request = pb::ReadinessReport {
                proxy_id: agent.id.clone(),
                registration,
                ..Default::default()
            };
            request.set_evidence(update);
            async move {
                let reply = router
                    .call(|mut c| async move { c.report_readiness(request).await })
                    .await?;
                Ok::<_, tonic::Status>((reply.known, if reply.known { reply.seq } else { 0 }))
            }
        })
        .await;
    known(fleet, sent)
}

/// Heartbeats the generations `served`: whether the leader knows this
/// registration, `None` when the call failed.
async fn heartbeat(
    agent: &Agent,
    fleet: &FleetShared,
    router: &Router,
    registration: u64,
    served: &Served,
    senders: &mut Senders,
) -> Option<bool> {
    let sent = senders
        .applied
        .send(&Served::exceptions(), served.through, |update| {
            let mut request = pb::HeartbeatRequest {
                proxy_id: agent.id.clone(),
                config_version: served.received,
                registration,
                applied_through: served.through,
                ..Default::default()
            };
            request.set_applied(update);
            async move {
                let reply = router
                    .call(|mut c| async move { c.heartbeat(request).await })
                    .await?;
                Ok::<_, tonic::Status>((reply.known, reply.applied_seq))
            }
        })
        .await;
    known(fleet, sent)
}

/// Whether the leader knows this registration; `None` (and counted) when
/// the call failed.
fn known(fleet: &FleetShared, sent: Result<bool, tonic::Status>) -> Option<bool> {
    sent.inspect_err(|_| {
        fleet.rpc_errors.fetch_add(1, Ordering::Relaxed);
    })
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_rounds_back_off_from_retry_soon_up_to_the_interval() {
        let ms = Duration::from_millis;
        let policy = round_policy(ms(1000));
        let ceilings: Vec<u128> = (1..=6).map(|n| policy.ceiling(n).as_millis()).collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1000, 1000]);
        // The cap is on the ceiling, so the pause stays jittered below it.
        assert_eq!(policy.delay(9, 0.5), ms(500));
        // An interval shorter than the first ceiling caps it at once.
        assert_eq!(round_policy(ms(50)).ceiling(1), ms(50));
    }
}
