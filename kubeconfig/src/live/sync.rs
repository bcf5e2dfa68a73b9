//! The live sync of one leadership term: watch every cluster, keep the
//! coordinators' store equal to what the clusters desire, write status
//! back — the reconciler, as a library.
//!
//! The decision is the pure [`plan`]; this module is the small run loop
//! around it: when to plan (a cluster changed, a failed write's back-off
//! ran out), chunking proposals to the store's per-request limit, applying
//! a refused batch object by object so one bad object does not hold the
//! rest back, not writing while the store says it may not (a leader
//! without a quorum), and publishing status (on the store's status changes
//! too, coalesced, and on a timer).
//!
//! It talks to the coordinators only through [`Store`], which the binary
//! implements over its coordinator: this crate never sees Raft.

use super::plan::{Plan, Stored, plan};
use super::publish::{ProxyService, StatusPublisher, Stopped};
use super::watch::{WatchSettings, watch_clusters_holding};
use super::{ClusterSource, DesiredState};
use std::future::Future;
use std::time::Duration;
use switchyard_proto::model::{ClusterStatus, Resource, ResourceKey};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// What the sync needs from the coordinators.
pub trait Store: Sync {
    /// Why a write did not reach the store (no leader, timeout...): the
    /// sync retries it with back-off.
    type Error: std::fmt::Display + Send;

    /// What the store holds now, as [`plan`] compares it.
    fn stored(&self) -> Stored;

    /// Whether this coordinator may write now (it leads with a quorum). A
    /// leader cut off from the majority keeps its watchers (a re-list of
    /// every cluster is expensive, and the partition may heal) but writes
    /// nothing: its proposals cannot commit, and its status would fight
    /// the real leader's.
    fn may_write(&self) -> bool;

    /// The Raft term this coordinator leads in. Every status write is
    /// fenced with it (asked, with [`Store::may_write`], before each
    /// write): a write over a newer term's status is refused.
    fn term(&self) -> u64;

    /// Most objects one apply or delete may carry.
    fn max_objects_per_request(&self) -> usize;

    /// Stores `resources` as one command: the store's answer (its change
    /// lines, or why it refused the whole command), or why it could not be
    /// asked.
    fn apply(
        &self,
        resources: Vec<Resource>,
    ) -> impl Future<Output = Result<Result<Vec<String>, String>, Self::Error>> + Send;

    /// Removes `keys` as one command, answered like [`Store::apply`].
    fn delete(
        &self,
        keys: Vec<ResourceKey>,
    ) -> impl Future<Output = Result<Result<Vec<String>, String>, Self::Error>> + Send;

    /// The coordinators' status (routes' cutover progress, live proxies).
    fn status(&self) -> ClusterStatus;

    /// Ticks whenever [`Store::status`] may have changed.
    fn status_changes(&self) -> watch::Receiver<u64>;
}

/// Timings of the sync.
#[derive(Debug, Clone)]
pub struct SyncSettings {
    /// Status is recomputed and written (what differs only) at least this
    /// often.
    pub status_interval: Duration,
    /// A burst of status changes (every proxy report ticks it) is folded
    /// into one publication per this much time.
    pub status_coalesce: Duration,
    /// First and longest wait before retrying a failed write to the store.
    pub retry: (Duration, Duration),
    /// The proxies' LoadBalancer Service, whose addresses are every
    /// Gateway's `status.addresses`; `None`: Gateways stay
    /// `Programmed` `False` (`AddressNotAssigned`).
    pub proxy_service: Option<ProxyService>,
}

impl SyncSettings {
    /// The defaults, with `status_interval`.
    pub fn with_status_interval(status_interval: Duration) -> Self {
        SyncSettings {
            status_interval,
            status_coalesce: Duration::from_millis(500),
            retry: (Duration::from_millis(500), Duration::from_secs(30)),
            proxy_service: None,
        }
    }
}

/// Why one sync did not finish; the next one starts over from a new plan.
#[derive(Debug, thiserror::Error)]
enum SyncError<E: std::fmt::Display> {
    /// The store was not reached (no leader, timeout, shutting down).
    #[error("{what}: {reason}")]
    Store {
        /// `apply` or `delete`, with the count.
        what: String,
        /// The store's reason.
        reason: E,
    },
    /// The store refused some resources; the rest were stored.
    #[error("{count} object(s) refused by the state machine; see the warnings above")]
    Refused {
        /// How many.
        count: usize,
    },
}

/// One term as leader: watch every source, keep the store equal to what
/// they desire, write status back, until dropped (leadership lost) or a
/// channel closes. `controller_name` picks the GatewayClasses served.
pub async fn lead_term<S: Store>(
    sources: &[ClusterSource],
    controller_name: &str,
    settings: SyncSettings,
    store: &S,
) {
    lead_term_with(
        sources,
        controller_name,
        settings,
        WatchSettings::default(),
        store,
    )
    .await;
}

/// [`lead_term`] with the watchers' timings.
pub async fn lead_term_with<S: Store>(
    sources: &[ClusterSource],
    controller_name: &str,
    settings: SyncSettings,
    watch_settings: WatchSettings,
    store: &S,
) {
    // A fresh channel per term: the new watchers list from scratch. Until
    // a cluster has listed, it contributes what the store holds from it
    // (the previous leader's work), so one unreachable cluster neither
    // holds back the others nor loses its objects.
    let (desired_tx, mut desired_rx) = watch::channel::<Option<DesiredState>>(None);
    let held = store.stored().resources;
    let watchers = watch_clusters_holding(
        sources.to_vec(),
        controller_name,
        watch_settings,
        Some(held),
        desired_tx,
        std::future::pending::<()>(),
    );
    let reconcile = async {
        let mut publisher = StatusPublisher::new(sources.to_vec(), controller_name)
            .with_proxy_service(settings.proxy_service.clone());
        let mut status_changes = store.status_changes();
        let mut ticks = tokio::time::interval(settings.status_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (retry_min, retry_max) = settings.retry;
        let mut desired: Option<DesiredState> = None;
        let mut first_plan = true;
        let mut cut_off = false;
        // Set while what the clusters desire is not yet all in the store.
        let mut retry: Option<(Instant, Duration)> = None;
        loop {
            let plan_now = tokio::select! {
                changed = desired_rx.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    desired = desired_rx.borrow_and_update().clone();
                    true
                }
                _ = sleep_until(retry.map(|(at, _)| at)) => true,
                changed = status_changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    tokio::time::sleep(settings.status_coalesce).await;
                    status_changes.borrow_and_update();
                    false
                }
                _ = ticks.tick() => false,
            };
            let Some(state) = &desired else { continue };
            if !store.may_write() {
                if !cut_off {
                    warn!("leading without a quorum: not writing to Raft or the clusters");
                    cut_off = true;
                }
                if plan_now || retry.is_some() {
                    retry = Some((Instant::now() + retry_min, retry_min));
                }
                continue;
            }
            if cut_off {
                info!("quorum back: writing again");
                cut_off = false;
            }
            if plan_now {
                match sync_once(store, state, first_plan).await {
                    Ok(()) => retry = None,
                    Err(e) => {
                        let wait = retry.map_or(retry_min, |(_, w)| (w * 2).min(retry_max));
                        warn!(error = %e, retry_in = ?wait, "cannot store what the clusters desire; retrying");
                        retry = Some((Instant::now() + wait, wait));
                    }
                }
                first_plan = false;
            }
            publish(store, &mut publisher, state).await;
        }
    };
    tokio::join!(watchers, reconcile);
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Plans against the store and proposes the difference: applies first (in
/// apply order), then deletes (routes first), in chunks within the store's
/// per-request limit — except the deletes of routes whose name changes
/// kind ([`Plan::kind_switches`]), which go first.
async fn sync_once<S: Store>(
    store: &S,
    desired: &DesiredState,
    first_of_term: bool,
) -> Result<(), SyncError<S::Error>> {
    let stored = store.stored();
    let planned = plan(&desired.resources, &stored);
    let switched = planned.kind_switches();
    let Plan { apply, delete } = planned;
    if first_of_term {
        // Says whether a new leader found the previous one's work intact.
        info!(
            desired = desired.resources.len(),
            stored = stored.resources.len(),
            to_apply = apply.len(),
            to_delete = delete.len(),
            "first plan of this term"
        );
    } else if !apply.is_empty() || !delete.is_empty() {
        info!(
            to_apply = apply.len(),
            to_delete = delete.len(),
            "clusters changed"
        );
    }
    let chunk = store.max_objects_per_request().max(1);
    let delete_in = async |keys: &[ResourceKey]| {
        for batch in keys.chunks(chunk) {
            let keys: Vec<ResourceKey> = batch.to_vec();
            let what = format!("delete of {} object(s)", keys.len());
            let answer = store
                .delete(keys)
                .await
                .map_err(|reason| SyncError::Store { what, reason })?;
            log_answer("deleted", answer);
        }
        Ok::<(), SyncError<S::Error>>(())
    };
    delete_in(&switched).await?;
    let mut refused = 0;
    for batch in apply.chunks(chunk) {
        refused += apply_batch(store, batch.to_vec()).await?;
    }
    let rest: Vec<ResourceKey> = delete
        .into_iter()
        .filter(|k| !switched.contains(k))
        .collect();
    delete_in(&rest).await?;
    if refused > 0 {
        return Err(SyncError::Refused { count: refused });
    }
    Ok(())
}

/// Applies `batch` as one command. If the store refuses it (which refuses
/// the whole command), applies each object alone so one bad object does
/// not hold back the others; returns how many were refused.
async fn apply_batch<S: Store>(
    store: &S,
    batch: Vec<Resource>,
) -> Result<usize, SyncError<S::Error>> {
    let propose = |resources: Vec<Resource>| async move {
        let what = format!("apply of {} object(s)", resources.len());
        store
            .apply(resources)
            .await
            .map_err(|reason| SyncError::Store { what, reason })
    };
    let answer = propose(batch.clone()).await?;
    if answer.is_ok() || batch.len() == 1 {
        return Ok(usize::from(!log_answer("applied", answer)));
    }
    let mut refused = 0;
    for resource in batch {
        let key = resource.key();
        let answer = propose(vec![resource]).await?;
        if !log_answer("applied", answer) {
            debug!(object = %key, "refused alone too");
            refused += 1;
        }
    }
    Ok(refused)
}

/// Logs a store's answer; true when it accepted the command.
fn log_answer(verb: &str, answer: Result<Vec<String>, String>) -> bool {
    match answer {
        Ok(changes) => {
            info!(?changes, "{verb} from the clusters");
            true
        }
        Err(e) => {
            warn!(error = %e, "the state machine refused objects from the clusters");
            false
        }
    }
}

/// Writes status computed from the store's current status (evidence,
/// applied generations and live proxies are the leader's soft state).
async fn publish<S: Store>(store: &S, publisher: &mut StatusPublisher, desired: &DesiredState) {
    let status = store.status();
    let lease = || store.may_write().then(|| store.term());
    let out = publisher
        .publish(desired, &status.routes, &status.proxies, &lease)
        .await;
    for e in out.errors {
        warn!(error = %e, retryable = e.is_retryable(), "status write-back failed; retrying on the next publish");
    }
    match out.stopped {
        Some(Stopped::Fenced(fenced)) => {
            info!(%fenced, "a newer leader writes status now; this coordinator stopped writing");
        }
        Some(Stopped::NotLeading) => debug!("status publish stopped: not leading"),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_documents;
    use std::sync::Mutex;

    /// A store in memory that refuses any command carrying an object named
    /// `bad`, or a route whose name a stored route of the other kind holds
    /// (the coordinators' one route name space, `RouteNameTaken`), and
    /// records every command's size.
    #[derive(Default)]
    struct FakeStore {
        stored: Mutex<Vec<Resource>>,
        commands: Mutex<Vec<usize>>,
    }

    impl Store for FakeStore {
        type Error = String;
        fn stored(&self) -> Stored {
            Stored {
                resources: self.stored.lock().unwrap().clone(),
                specless_routes: Vec::new(),
            }
        }
        fn may_write(&self) -> bool {
            true
        }
        fn term(&self) -> u64 {
            1
        }
        fn max_objects_per_request(&self) -> usize {
            2
        }
        async fn apply(
            &self,
            resources: Vec<Resource>,
        ) -> Result<Result<Vec<String>, String>, String> {
            self.commands.lock().unwrap().push(resources.len());
            if resources.iter().any(|r| r.meta().name == "bad") {
                return Ok(Err("bad is refused".into()));
            }
            let stored = self.stored.lock().unwrap().clone();
            let taken = resources.iter().find(|r| {
                stored.iter().any(|s| {
                    r.kind().is_route()
                        && s.kind().is_route()
                        && r.kind() != s.kind()
                        && r.meta().object_name() == s.meta().object_name()
                })
            });
            if let Some(r) = taken {
                return Ok(Err(format!("{} is taken by another route kind", r.key())));
            }
            let changes = resources.iter().map(|r| r.key().to_string()).collect();
            let mut stored = self.stored.lock().unwrap();
            stored.retain(|s| !resources.iter().any(|r| r.key() == s.key()));
            stored.extend(resources);
            Ok(Ok(changes))
        }
        async fn delete(
            &self,
            keys: Vec<ResourceKey>,
        ) -> Result<Result<Vec<String>, String>, String> {
            self.commands.lock().unwrap().push(keys.len());
            self.stored
                .lock()
                .unwrap()
                .retain(|r| !keys.contains(&r.key()));
            Ok(Ok(Vec::new()))
        }
        fn status(&self) -> ClusterStatus {
            ClusterStatus::default()
        }
        fn status_changes(&self) -> watch::Receiver<u64> {
            watch::channel(0).1
        }
    }

    fn namespaces(names: &[&str]) -> DesiredState {
        let text: String = names
            .iter()
            .map(|n| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {n}}}\n---\n"))
            .collect();
        DesiredState {
            resources: parse_documents("t", &text).unwrap(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn one_bad_object_holds_back_nothing_else_and_requests_stay_in_the_limit() {
        let store = FakeStore::default();
        let err = sync_once(&store, &namespaces(&["a", "bad", "c"]), true)
            .await
            .unwrap_err();
        assert!(matches!(err, SyncError::Refused { count: 1 }), "{err}");
        let names: Vec<String> = store
            .stored()
            .resources
            .iter()
            .map(|r| r.meta().name.clone())
            .collect();
        assert_eq!(names, ["a", "c"]);
        // [a, bad] refused as a batch, then a, bad alone; then [c].
        assert_eq!(*store.commands.lock().unwrap(), [2, 1, 1, 1]);
        // The next plan has only what is still missing, and deletes what
        // the clusters dropped.
        store.commands.lock().unwrap().clear();
        sync_once(&store, &namespaces(&["c"]), false).await.unwrap();
        assert_eq!(*store.commands.lock().unwrap(), [1], "one delete of a");
        assert_eq!(store.stored().resources.len(), 1);
    }

    #[tokio::test]
    async fn a_route_whose_name_changes_kind_is_deleted_before_the_new_one_is_applied() {
        let route = |kind: &str| {
            format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: {kind}\nmetadata: {{name: app, namespace: shop}}\nspec: {{parentRefs: [{{name: gw}}]}}\n"
            )
        };
        let store = FakeStore::default();
        *store.stored.lock().unwrap() = parse_documents("t", &route("GRPCRoute")).unwrap();
        let mut desired = namespaces(&["shop"]);
        desired
            .resources
            .extend(parse_documents("t", &route("HTTPRoute")).unwrap());
        // Applied first, the HTTPRoute would be refused for its name.
        sync_once(&store, &desired, false).await.unwrap();
        let keys: Vec<String> = store
            .stored()
            .resources
            .iter()
            .map(|r| r.key().to_string())
            .collect();
        assert_eq!(keys, ["Namespace shop", "HTTPRoute shop/app"]);
        // The delete, then one apply of both: nothing refused.
        assert_eq!(*store.commands.lock().unwrap(), [1, 2]);
    }
}
