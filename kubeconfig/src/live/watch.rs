//! The watchers: one kube-runtime `watcher` per cluster and kind, feeding
//! one aggregator that owns every [`ClusterCache`] and publishes the merged
//! [`DesiredState`] on a `watch` channel whenever it changes.
//!
//! kube's reflector `Store` is not used: the caches here also keep each
//! object's last good translation and the per-kind health, and swap a
//! re-listed kind in whole at `InitDone`. The watcher itself re-lists after
//! `410 Gone` and retries every other error with the backoff in
//! [`WatchSettings`]; the aggregator only records errors as health. A
//! `410` is routine (the watch fell behind the server's history), not a
//! sign of an unreachable cluster, so it is not recorded as one; a `404`
//! on a custom kind's list means its CRD is not installed.
//!
//! Each source is watched for its role's kinds only ([`super::SourceRole`]),
//! and EndpointSlices only with a `kubernetes.io/service-name` label.
//!
//! It deliberately does not write to the coordinators: the caller diffs
//! each published state against what is stored ([`super::plan`]).

use super::ClusterSource;
use super::cache::{ClusterCache, Observed, Update, WatchFailure};
use super::desired::{DesiredState, Held, desired_state};
use super::kinds::{Watched, field_selector, label_selector, watched_api_resource};
use super::translate::{object_label, translate};
use futures::StreamExt;
use kube::Api;
use kube::core::DynamicObject;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_stream};
use std::future::Future;
use std::time::{Duration, Instant};
use switchyard_proto::model::ObjectName;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::{Instrument, debug, info, info_span, warn};

/// Tuning of the watchers.
#[derive(Debug, Clone, Copy)]
pub struct WatchSettings {
    /// First retry delay after a watch error.
    pub backoff_min: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// Server-side timeout of each watch request, in seconds (the watcher
    /// reconnects after it; Kubernetes caps it near 300).
    pub watch_timeout_secs: u32,
    /// How often each cluster is asked `GET /version`: an answer after a
    /// watch error marks the cluster reachable again even when its resumed
    /// watches have nothing new to send.
    pub probe_interval: Duration,
}

impl Default for WatchSettings {
    /// client-go's reflector defaults: 800 ms doubling to 30 s; 290 s
    /// watches; a probe every 10 s.
    fn default() -> Self {
        WatchSettings {
            backoff_min: Duration::from_millis(800),
            backoff_max: Duration::from_secs(30),
            watch_timeout_secs: 290,
            probe_interval: Duration::from_secs(10),
        }
    }
}

/// [`watch_clusters_with`] with [`WatchSettings::default`].
pub async fn watch_clusters(
    sources: Vec<ClusterSource>,
    controller_name: &str,
    out: watch::Sender<Option<DesiredState>>,
    shutdown: impl Future,
) {
    watch_clusters_with(
        sources,
        controller_name,
        WatchSettings::default(),
        out,
        shutdown,
    )
    .await;
}

/// Watches every kind in every source until `shutdown` completes (or this
/// future is dropped: the watcher tasks are aborted with it). Publishes
/// `None` until every cluster has finished its first list of every kind —
/// a partial set would make [`super::plan`] delete what is merely not
/// listed yet — then the merged state whenever it changes.
pub async fn watch_clusters_with(
    sources: Vec<ClusterSource>,
    controller_name: &str,
    settings: WatchSettings,
    out: watch::Sender<Option<DesiredState>>,
    shutdown: impl Future,
) {
    watch_clusters_holding(sources, controller_name, settings, None, out, shutdown).await;
}

/// [`watch_clusters_with`], but with what the store `held` when the term
/// began: published once every cluster has listed or failed, each cluster
/// not listed yet contributing its stored objects (see
/// [`super::desired`]).
pub(crate) async fn watch_clusters_holding(
    sources: Vec<ClusterSource>,
    controller_name: &str,
    settings: WatchSettings,
    held: Option<Held>,
    out: watch::Sender<Option<DesiredState>>,
    shutdown: impl Future,
) {
    // Bounded: a burst of events (a big re-list) waits for the aggregator
    // instead of growing memory without limit.
    let (tx, mut rx) = mpsc::channel::<Message>(1024);
    let mut tasks = JoinSet::new();
    for (index, source) in sources.iter().enumerate() {
        for &kind in source.role.watched() {
            let span = info_span!("watch", cluster = %source.name, kind = %kind);
            let task = watch_kind(index, source.clone(), kind, settings, tx.clone());
            tasks.spawn(task.instrument(span));
        }
        let span = info_span!("probe", cluster = %source.name);
        let task = probe(
            index,
            source.client.clone(),
            settings.probe_interval,
            tx.clone(),
        );
        tasks.spawn(task.instrument(span));
    }
    drop(tx);
    let mut caches: Vec<ClusterCache> = sources
        .iter()
        .map(|s| ClusterCache::new(s.name.clone(), s.role.watched()))
        .collect();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let first = tokio::select! {
            _ = &mut shutdown => break,
            m = rx.recv() => m,
        };
        // Every watcher task ended: only possible if they all panicked.
        let Some(first) = first else { break };
        let before: Vec<bool> = caches.iter().map(ClusterCache::reachable).collect();
        apply(&mut caches, first);
        // Fold a burst into one publication.
        while let Ok(more) = rx.try_recv() {
            apply(&mut caches, more);
        }
        for (cache, was) in caches.iter().zip(before) {
            match (was, cache.reachable()) {
                (true, false) => warn!(
                    cluster = %cache.name,
                    error = cache.last_error().unwrap_or_default(),
                    "cluster unreachable; keeping its last objects"
                ),
                (false, true) => info!(cluster = %cache.name, "cluster reachable again"),
                _ => {}
            }
        }
        let state = desired_state(&caches, held.as_ref(), controller_name);
        publish(&out, state);
    }
    tasks.abort_all();
}

/// Sends `state` if it differs from the last one sent.
fn publish(out: &watch::Sender<Option<DesiredState>>, state: Option<DesiredState>) {
    out.send_if_modified(|current| {
        if *current == state {
            return false;
        }
        if let Some(new) = &state {
            let old = current.as_ref().map(|c| &c.export_conflicts);
            if old != Some(&new.export_conflicts) {
                for c in &new.export_conflicts {
                    warn!(cluster = %c.cluster, service = %c.service, reason = c.reason, "{}", c.message);
                }
            }
            let names = |s: &DesiredState| -> Vec<ObjectName> {
                s.route_name_collisions
                    .iter()
                    .map(|c| c.route.meta.object_name())
                    .collect()
            };
            let old = current.as_ref().map(names);
            let now = names(new);
            if old.as_ref() != Some(&now) {
                for route in &now {
                    warn!(%route, "GRPCRoute not served: an HTTPRoute has the same namespace and name, and routes of both kinds share one name space; rename one of them");
                }
            }
        }
        *current = state;
        true
    });
}

/// What the watcher and probe tasks tell the aggregator.
enum Message {
    /// An event of one kind in cluster `.0` (boxed: a translated object is
    /// large, a probe answer small).
    Watch(usize, Watched, Box<Update>),
    /// Cluster `.0` answered a probe sent at `.1`.
    Reached(usize, Instant),
}

fn apply(caches: &mut [ClusterCache], message: Message) {
    match message {
        Message::Watch(index, kind, update) => {
            if let Some(cache) = caches.get_mut(index) {
                cache.update(kind, *update);
            }
        }
        Message::Reached(index, started) => {
            if let Some(cache) = caches.get_mut(index) {
                cache.reached(started);
            }
        }
    }
}

/// Asks the cluster `GET /version` every `interval`, reporting answers.
/// Failures are not reported: the watchers report their own.
async fn probe(index: usize, client: kube::Client, interval: Duration, tx: mpsc::Sender<Message>) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let started = Instant::now();
        match client.apiserver_version().await {
            Ok(_) => {
                if tx.send(Message::Reached(index, started)).await.is_err() {
                    return;
                }
            }
            Err(e) => debug!(error = %e, "probe failed"),
        }
    }
}

/// One kind in one cluster, until the receiver goes away.
async fn watch_kind(
    index: usize,
    source: ClusterSource,
    kind: Watched,
    settings: WatchSettings,
    tx: mpsc::Sender<Message>,
) {
    let api: Api<DynamicObject> = Api::all_with(source.client.clone(), &watched_api_resource(kind));
    let mut config = watcher::Config::default().timeout(settings.watch_timeout_secs);
    if let Some(selector) = label_selector(kind) {
        config = config.labels(selector);
    }
    if let Some(selector) = field_selector(kind) {
        config = config.fields(selector);
    }
    let stream = watch_stream(api, config).backoff(Doubling::new(settings));
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let observe = |o: &DynamicObject| Observed {
            name: object_name(o),
            generation: o.metadata.generation,
            result: translate(&source.name, kind, o),
        };
        let update = match event {
            Ok(Event::Init) => Update::Init,
            Ok(Event::InitApply(o)) => Update::InitApply(observe(&o)),
            Ok(Event::InitDone) => Update::InitDone,
            Ok(Event::Apply(o)) => {
                debug!(object = %object_label(&o), "applied");
                Update::Apply(observe(&o))
            }
            Ok(Event::Delete(o)) => {
                debug!(object = %object_label(&o), "deleted");
                Update::Delete(object_name(&o))
            }
            Err(e) => {
                debug!(error = %e, "watch error; the watcher retries");
                match classify(kind, &e) {
                    Some(update) => update,
                    None => continue,
                }
            }
        };
        if let Update::Apply(Observed { result: Err(e), .. })
        | Update::InitApply(Observed { result: Err(e), .. }) = &update
        {
            // Debug only: most rejected objects in a cluster are not ours;
            // the served ones are in DesiredState::rejected.
            debug!(error = %e, "object rejected; its last good version stays");
        }
        if tx
            .send(Message::Watch(index, kind, Box::new(update)))
            .await
            .is_err()
        {
            return;
        }
    }
}

/// What a watcher error means for the cache: nothing for a `410 Gone`
/// (routine: the watch fell behind the server's history and the watcher
/// re-lists by itself; the cluster is fine), [`Update::Absent`] for a
/// `404` on a custom kind's list (its CRD is not installed), else a
/// failure, sticky for a refusal.
fn classify(kind: Watched, e: &watcher::Error) -> Option<Update> {
    if status_code(e) == Some(410) {
        return None;
    }
    if kind.is_custom() && is_list_not_found(e) {
        return Some(Update::Absent);
    }
    Some(Update::Error(WatchFailure {
        message: e.to_string(),
        at: Instant::now(),
        sticky: is_refusal(e),
    }))
}

/// 401 or 403: the cluster is reachable but refuses us.
fn is_refusal(e: &watcher::Error) -> bool {
    matches!(status_code(e), Some(401 | 403))
}

/// The list itself answered `404`: the API server does not serve the kind.
fn is_list_not_found(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404)
}

/// The HTTP status code the API server answered with, if it answered.
fn status_code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

fn object_name(o: &DynamicObject) -> ObjectName {
    ObjectName::new(
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// Doubling backoff between `backoff_min` and `backoff_max`, reset by the
/// stream after each success.
struct Doubling {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Doubling {
    fn new(settings: WatchSettings) -> Doubling {
        Doubling {
            min: settings.backoff_min,
            max: settings.backoff_max,
            next: settings.backoff_min,
        }
    }
}

impl Iterator for Doubling {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (now * 2).min(self.max);
        Some(now)
    }
}

impl Backoff for Doubling {
    fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use switchyard_proto::model::Kind;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            ..Status::default()
        }))
    }

    #[test]
    fn a_410_is_routine_a_404_list_of_a_crd_is_absence_and_the_rest_is_failure() {
        let expired = watcher::Error::WatchError(Box::new(Status {
            code: 410,
            ..Status::default()
        }));
        let gateway = Watched::Model(Kind::Gateway);
        let service = Watched::Model(Kind::Service);
        assert!(classify(gateway, &expired).is_none());
        assert!(classify(service, &watcher::Error::InitialListFailed(api(410))).is_none());
        assert!(matches!(
            classify(gateway, &watcher::Error::InitialListFailed(api(404))),
            Some(Update::Absent)
        ));
        assert!(matches!(
            classify(
                Watched::ServiceExport,
                &watcher::Error::InitialListFailed(api(404))
            ),
            Some(Update::Absent)
        ));
        // Core kinds always exist: a 404 there is a failure.
        let Some(Update::Error(failure)) =
            classify(service, &watcher::Error::InitialListFailed(api(404)))
        else {
            panic!("a core kind's 404 is a failure")
        };
        assert!(!failure.sticky);
        let Some(Update::Error(refused)) =
            classify(gateway, &watcher::Error::WatchStartFailed(api(403)))
        else {
            panic!("a refusal is a failure")
        };
        assert!(refused.sticky);
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_resets() {
        let mut b = Doubling::new(WatchSettings {
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_millis(300),
            watch_timeout_secs: 1,
            probe_interval: Duration::from_secs(1),
        });
        let first: Vec<u128> = (&mut b).take(4).map(|d| d.as_millis()).collect();
        assert_eq!(first, [100, 200, 300, 300]);
        b.reset();
        assert_eq!(b.next(), Some(Duration::from_millis(100)));
    }
}
