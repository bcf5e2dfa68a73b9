//! `switchyard coordinator --kubernetes ...`: live clusters as the
//! coordinator's configuration source.
//!
//! Owns: the `--kubernetes` flags and their parsing, connecting every
//! source before the coordinator starts (a bad kubeconfig exits non-zero at
//! once), and the task that, on the leader only, feeds what the clusters
//! desire into Raft and writes route and Gateway status back.
//!
//! Leadership comes from the coordinator's own Raft metrics (the handle the
//! server hands out once bound), not from a status RPC: a term counts once
//! this node leads *and* its state machine has applied its log, so the
//! first plan of a term diffs against everything the previous leader
//! stored and re-applies nothing unchanged. A leader that has lost its
//! quorum (`Coordinator::leads_with_quorum`) keeps watching but writes
//! nothing, to Raft or to the clusters, until the quorum is back.
//!
//! Deliberately not here: watching, merging, diffing and status conditions
//! (`switchyard_kubeconfig::live`), and what applying means (the
//! coordinator's state machine). The coordinator crate never sees a
//! Kubernetes type: this crate wires the two.

use anyhow::{anyhow, bail};
use clap::Args;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use switchyard_coordinator::server::Coordinator;
use switchyard_coordinator::state::{CommandResponse, ReplicatedState};
use switchyard_kubeconfig::live::{
    ClusterSource, DesiredState, StatusPublisher, connect, connect_in_cluster, plan,
    run_while_leader, watch_clusters,
};
use switchyard_proto::model::{CONTROLLER_NAME, Kind, Resource, ResourceKey, parse_duration};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

/// The cluster name `in-cluster` gets without a `NAME=` prefix. Stored in
/// every EndpointSlice (`cluster`), so it must not depend on the pod.
const IN_CLUSTER_NAME: &str = "local";

/// A burst of status changes (every proxy report ticks it) is folded into
/// one publication per this much time.
const STATUS_COALESCE: Duration = Duration::from_millis(500);

/// First and longest wait before retrying a failed write to Raft.
const RETRY_MIN: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// The live-cluster flags of `switchyard coordinator`.
#[derive(Debug, Clone, Args)]
pub struct KubeArgs {
    /// A Kubernetes cluster to take Gateways, HTTPRoutes, Services and EndpointSlices from
    /// (repeatable; comma-separated in the env var): `in-cluster` (this pod's ServiceAccount,
    /// named `local`), `PATH` (the kubeconfig's current context) or `PATH#CONTEXT`, each
    /// optionally prefixed `NAME=` to name the cluster (default: the context name). Names are
    /// stored, so give every coordinator the same list. The clusters are the whole truth: the
    /// leader deletes stored objects they do not have, including ones applied by hand.
    #[arg(
        long = "kubernetes",
        env = "SWITCHYARD_KUBERNETES",
        value_delimiter = ',',
        value_parser = SourceSpec::parse,
        value_name = "SOURCE"
    )]
    pub sources: Vec<SourceSpec>,
    /// How often route and Gateway status is recomputed and written back even without a change
    /// the coordinator noticed (only what differs is written).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub kubernetes_status_interval: Duration,
}

/// One `--kubernetes` value, parsed but not connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSpec {
    /// `NAME=`, when given.
    pub name: Option<String>,
    /// Where the cluster's credentials come from.
    pub location: Location,
}

/// Where a source's credentials come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The pod's ServiceAccount.
    InCluster,
    /// A kubeconfig file and a context in it (`None`: its current one).
    File {
        /// The kubeconfig.
        path: PathBuf,
        /// The context.
        context: Option<String>,
    },
}

impl SourceSpec {
    /// Parses `[NAME=](in-cluster | PATH[#CONTEXT])`. A `NAME` is letters,
    /// digits, `-`, `_` and `.`; text before `=` with anything else (a
    /// `/`, say) is part of the path.
    pub fn parse(text: &str) -> Result<SourceSpec, String> {
        let text = text.trim();
        let (name, rest) = match text.split_once('=') {
            Some((name, rest))
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
            {
                (Some(name.to_string()), rest)
            }
            _ => (None, text),
        };
        if rest.is_empty() {
            return Err(format!(
                "--kubernetes {text:?}: expected in-cluster, PATH or PATH#CONTEXT, optionally NAME=..."
            ));
        }
        if rest == "in-cluster" {
            return Ok(SourceSpec {
                name,
                location: Location::InCluster,
            });
        }
        let (path, context) = match rest.rsplit_once('#') {
            Some((path, context)) if !path.is_empty() && !context.is_empty() => {
                (path, Some(context.to_string()))
            }
            Some(_) => {
                return Err(format!(
                    "--kubernetes {text:?}: PATH#CONTEXT needs both a path and a context"
                ));
            }
            None => (rest, None),
        };
        Ok(SourceSpec {
            name,
            location: Location::File {
                path: PathBuf::from(path),
                context,
            },
        })
    }
}

/// Connected sources and the settings of the sync task.
#[derive(Debug, Clone)]
pub struct LiveSync {
    sources: Vec<ClusterSource>,
    status_interval: Duration,
}

impl LiveSync {
    /// Reads every kubeconfig and builds a client per source (contacting
    /// no cluster yet). `None` without `--kubernetes`. Fails on an
    /// unreadable kubeconfig, a missing context, `in-cluster` outside a
    /// pod, or two sources with the same name.
    pub async fn connect(args: &KubeArgs) -> anyhow::Result<Option<LiveSync>> {
        if args.sources.is_empty() {
            return Ok(None);
        }
        if args.kubernetes_status_interval.is_zero() {
            bail!("--kubernetes-status-interval must be above zero");
        }
        let mut sources = Vec::new();
        let mut names = BTreeSet::new();
        for spec in &args.sources {
            // `anyhow!` with the message rather than `.context`: `LiveError`
            // already prints its source, which `{:#}` in main would repeat.
            let mut source = match &spec.location {
                Location::InCluster => {
                    let name = spec.name.as_deref().unwrap_or(IN_CLUSTER_NAME);
                    connect_in_cluster(name).map_err(|e| anyhow!("--kubernetes in-cluster: {e}"))?
                }
                Location::File { path, context } => connect(path, context.as_deref())
                    .await
                    .map_err(|e| anyhow!("--kubernetes {}: {e}", path.display()))?,
            };
            if let Some(name) = &spec.name {
                source.name = name.clone();
            }
            if !names.insert(source.name.clone()) {
                bail!(
                    "two --kubernetes sources are named {:?}; name them apart with NAME=...",
                    source.name
                );
            }
            info!(cluster = %source.name, "kubernetes source configured");
            sources.push(source);
        }
        Ok(Some(LiveSync {
            sources,
            status_interval: args.kubernetes_status_interval,
        }))
    }

    /// Runs the sync for `coordinator` until the task is aborted: the
    /// watchers and status writers run while this coordinator leads and
    /// are dropped as soon as it stops leading.
    pub fn spawn(self, coordinator: Arc<Coordinator>) -> tokio::task::JoinHandle<()> {
        let span = info_span!("kube_sync", node_id = coordinator.node().id());
        tokio::spawn(
            async move {
                let (leading_tx, leading_rx) = watch::channel(false);
                let follow = follow_leadership(&coordinator, leading_tx);
                let lead = run_while_leader(leading_rx, || lead(&self, &coordinator));
                tokio::join!(follow, lead);
            }
            .instrument(span),
        )
    }
}

/// Drives `leading` from Raft metrics until they end. True from the moment
/// this node leads a term and has applied its whole log in it (the blank
/// entry of the term included), until it stops leading; applying more
/// entries later in the term never makes it false again.
async fn follow_leadership(coordinator: &Coordinator, leading: watch::Sender<bool>) {
    let id = coordinator.node().id();
    let mut metrics = coordinator.node().metrics();
    let mut caught_up_in: Option<u64> = None;
    loop {
        let now = {
            let m = metrics.borrow_and_update();
            let leader = m.state.is_leader() && m.current_leader == Some(id);
            let applied = m.last_applied.map_or(0, |l| l.index);
            if !leader {
                caught_up_in = None;
            } else if caught_up_in != Some(m.current_term)
                && applied >= m.last_log_index.unwrap_or(0)
            {
                caught_up_in = Some(m.current_term);
            }
            leader && caught_up_in == Some(m.current_term)
        };
        leading.send_if_modified(|was| std::mem::replace(was, now) != now);
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// One term as leader: watch every cluster, keep Raft equal to what they
/// desire, write status back. Dropped when leadership is lost.
async fn lead(sync: &LiveSync, coordinator: &Coordinator) {
    // A fresh channel per term: the new watchers list from scratch and
    // publish nothing until every cluster has listed every kind.
    let (desired_tx, mut desired_rx) = watch::channel::<Option<DesiredState>>(None);
    let watchers = watch_clusters(
        sync.sources.clone(),
        CONTROLLER_NAME,
        desired_tx,
        std::future::pending::<()>(),
    );
    let reconcile = async {
        let mut publisher = StatusPublisher::new(sync.sources.clone(), CONTROLLER_NAME);
        let mut status_changes = coordinator.status_changes();
        let mut ticks = tokio::time::interval(sync.status_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut desired: Option<DesiredState> = None;
        let mut first_plan = true;
        let mut cut_off = false;
        // Set while what the clusters desire is not yet all in Raft.
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
                    tokio::time::sleep(STATUS_COALESCE).await;
                    status_changes.borrow_and_update();
                    false
                }
                _ = ticks.tick() => false,
            };
            let Some(state) = &desired else { continue };
            // A leader cut off from the majority keeps its watchers (a
            // re-list of every cluster is expensive, and the partition may
            // heal) but writes nothing: its proposals cannot commit, and
            // its status (its cutover engine stops) would fight the real
            // leader's.
            if !coordinator.leads_with_quorum() {
                if !cut_off {
                    warn!("leading without a quorum: not writing to Raft or the clusters");
                    cut_off = true;
                }
                if plan_now || retry.is_some() {
                    retry = Some((Instant::now() + RETRY_MIN, RETRY_MIN));
                }
                continue;
            }
            if cut_off {
                info!("quorum back: writing again");
                cut_off = false;
            }
            if plan_now {
                match sync_once(coordinator, state, first_plan).await {
                    Ok(()) => retry = None,
                    Err(e) => {
                        let wait = retry.map_or(RETRY_MIN, |(_, w)| (w * 2).min(RETRY_MAX));
                        warn!(error = %e, retry_in = ?wait, "cannot store what the clusters desire; retrying");
                        retry = Some((Instant::now() + wait, wait));
                    }
                }
                first_plan = false;
            }
            publish(coordinator, &mut publisher, state).await;
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

/// What the state machine holds, as `plan` compares it: every stored
/// resource, and each route's newest spec (pending, else active). A route
/// whose transition was abandoned compares by its active spec, so the
/// next plan (after any cluster change, or in a new term) proposes the
/// desired spec again: a fresh cutover attempt. Also returns the route
/// records with no spec at all (their first transition abandoned), which
/// `plan` cannot see.
fn stored_resources(state: &ReplicatedState) -> (Vec<Resource>, Vec<ResourceKey>) {
    let mut specless = Vec::new();
    let mut stored: Vec<Resource> = state.resources.values().cloned().collect();
    for record in state.routes.values() {
        let newest = record
            .pending
            .as_ref()
            .map(|p| &p.target)
            .or(record.active.as_ref());
        match newest {
            Some(g) => stored.push(Resource::HttpRoute(g.spec.clone())),
            None => specless.push(ResourceKey {
                kind: Kind::HTTPRoute,
                name: record.name.clone(),
            }),
        }
    }
    (stored, specless)
}

/// Why one sync did not finish; the next one starts over from a new plan.
#[derive(Debug, thiserror::Error)]
enum SyncError {
    /// Raft did not take the command (no leader, timeout, shutting down).
    #[error("{what}: {source}")]
    Propose {
        /// `apply` or `delete`, with the count.
        what: String,
        /// The coordinator's reason.
        source: switchyard_coordinator::raft::ProposeError,
    },
    /// The state machine refused some resources; the rest were stored.
    #[error("{count} object(s) refused by the state machine; see the warnings above")]
    Refused {
        /// How many.
        count: usize,
    },
}

/// Plans against the state machine and proposes the difference: applies
/// first (in apply order), then deletes (routes first), in chunks within
/// the coordinator's per-request limit.
async fn sync_once(
    coordinator: &Coordinator,
    desired: &DesiredState,
    first_of_term: bool,
) -> Result<(), SyncError> {
    let (stored, specless) = stored_resources(&coordinator.node().state().borrow());
    let (to_apply, mut to_delete) = plan(&desired.resources, &stored);
    // Spec-less route records no cluster has any more go too, first (as
    // `plan` orders deletes: routes before what they use).
    let wanted: BTreeSet<ResourceKey> = desired.resources.iter().map(Resource::key).collect();
    let orphans = specless.into_iter().filter(|k| !wanted.contains(k));
    to_delete = orphans.chain(to_delete).collect();
    if first_of_term {
        // Says whether a new leader found the previous one's work intact.
        info!(
            desired = desired.resources.len(),
            stored = stored.len(),
            to_apply = to_apply.len(),
            to_delete = to_delete.len(),
            "first plan of this term"
        );
    } else if !to_apply.is_empty() || !to_delete.is_empty() {
        info!(
            to_apply = to_apply.len(),
            to_delete = to_delete.len(),
            "clusters changed"
        );
    }
    let chunk = coordinator.limits().max_objects_per_apply.max(1);
    let mut refused = 0;
    for batch in to_apply.chunks(chunk) {
        refused += apply_batch(coordinator, batch.to_vec()).await?;
    }
    for batch in to_delete.chunks(chunk) {
        let keys: Vec<ResourceKey> = batch.to_vec();
        let what = format!("delete of {} object(s)", keys.len());
        let response = coordinator
            .delete_resources(keys)
            .await
            .map_err(|source| SyncError::Propose { what, source })?;
        log_outcome("deleted", response);
    }
    if refused > 0 {
        return Err(SyncError::Refused { count: refused });
    }
    Ok(())
}

/// Applies `batch` as one command. If the state machine refuses it (which
/// refuses the whole command), applies each object alone so one bad object
/// does not hold back the others; returns how many were refused.
async fn apply_batch(coordinator: &Coordinator, batch: Vec<Resource>) -> Result<usize, SyncError> {
    let propose = |resources: Vec<Resource>| async move {
        let what = format!("apply of {} object(s)", resources.len());
        coordinator
            .apply_resources(resources)
            .await
            .map_err(|source| SyncError::Propose { what, source })
    };
    let response = propose(batch.clone()).await?;
    if response.0.is_ok() || batch.len() == 1 {
        return Ok(usize::from(!log_outcome("applied", response)));
    }
    let mut refused = 0;
    for resource in batch {
        let key = resource.key();
        let response = propose(vec![resource]).await?;
        if !log_outcome("applied", response) {
            debug!(object = %key, "refused alone too");
            refused += 1;
        }
    }
    Ok(refused)
}

/// Logs a state-machine answer; true when it accepted the command.
fn log_outcome(verb: &str, response: CommandResponse) -> bool {
    match response.0 {
        Ok(outcome) => {
            info!(changes = ?outcome.changes, "{verb} from the clusters");
            true
        }
        Err(e) => {
            warn!(error = %e, "the state machine refused objects from the clusters");
            false
        }
    }
}

/// Writes status computed from the coordinator's current status (evidence,
/// applied generations and live proxies are this leader's soft state).
async fn publish(
    coordinator: &Coordinator,
    publisher: &mut StatusPublisher,
    desired: &DesiredState,
) {
    let status = coordinator.status();
    let live = status.proxies.iter().filter(|p| p.live).count();
    for e in publisher.publish(desired, &status.routes, live).await {
        warn!(error = %e, retryable = e.is_retryable(), "status write-back failed; retrying on the next publish");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, context: Option<&str>) -> Location {
        Location::File {
            path: PathBuf::from(path),
            context: context.map(str::to_string),
        }
    }

    #[test]
    fn source_shapes_parse() {
        let cases = [
            ("in-cluster", None, Location::InCluster),
            ("home=in-cluster", Some("home"), Location::InCluster),
            ("/etc/kube/config", None, file("/etc/kube/config", None)),
            (
                "/etc/kube/west.yaml#ctx",
                None,
                file("/etc/kube/west.yaml", Some("ctx")),
            ),
            (
                "west=/etc/kube/west.yaml#ctx",
                Some("west"),
                file("/etc/kube/west.yaml", Some("ctx")),
            ),
            // A `/` before the `=` makes it part of the path.
            ("/etc/a=b.yaml", None, file("/etc/a=b.yaml", None)),
        ];
        for (text, name, location) in cases {
            let spec = SourceSpec::parse(text).unwrap();
            assert_eq!(spec.name.as_deref(), name, "{text}");
            assert_eq!(spec.location, location, "{text}");
        }
    }

    #[test]
    fn malformed_sources_are_refused() {
        for text in ["", "west=", "config#", "#ctx"] {
            assert!(SourceSpec::parse(text).is_err(), "{text:?} accepted");
        }
    }

    #[test]
    fn stored_routes_compare_by_their_newest_spec() {
        use switchyard_proto::model::{RouteGeneration, RouteRecord};
        let route = |backend: &str| {
            let text = format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
                 metadata: {{name: app, namespace: shop}}\n\
                 spec: {{rules: [{{backendRefs: [{{name: {backend}, port: 80}}]}}]}}\n"
            );
            match switchyard_kubeconfig::parse_documents("t", &text)
                .unwrap()
                .remove(0)
            {
                Resource::HttpRoute(r) => r,
                other => panic!("not a route: {other:?}"),
            }
        };
        let generation = |n, backend| RouteGeneration {
            generation: n,
            spec: route(backend),
        };
        let record = |name: &str, active, pending: Option<RouteGeneration>| RouteRecord {
            name: switchyard_proto::model::ObjectName::new("shop", name),
            active,
            pending: pending.map(|target| switchyard_proto::model::Transition {
                target,
                settings: Default::default(),
            }),
            last_failure: None,
            forced: false,
        };
        let mut state = ReplicatedState::default();
        for r in [
            record(
                "pending",
                Some(generation(1, "blue")),
                Some(generation(2, "green")),
            ),
            record("active", Some(generation(1, "blue")), None),
            record("abandoned-first", None, None),
        ] {
            state.routes.insert(r.name.clone(), r);
        }
        let (stored, specless) = stored_resources(&state);
        let backends: Vec<String> = stored
            .iter()
            .map(|r| match r {
                Resource::HttpRoute(r) => r.rules[0].backend_refs[0].name.clone(),
                _ => unreachable!(),
            })
            .collect();
        // BTreeMap order: "active" (blue), then "pending" (its green).
        assert_eq!(backends, ["blue", "green"]);
        assert_eq!(specless.len(), 1);
        assert_eq!(specless[0].name.name, "abandoned-first");
    }

    #[test]
    fn flags_repeat_and_split_on_commas() {
        #[derive(Debug, clap::Parser)]
        struct Cli {
            #[command(flatten)]
            kube: KubeArgs,
        }
        let cli = <Cli as clap::Parser>::try_parse_from([
            "x",
            "--kubernetes",
            "in-cluster",
            "--kubernetes",
            "a=one.yaml#c1,b=two.yaml",
        ])
        .unwrap();
        let names: Vec<_> = cli.kube.sources.iter().map(|s| s.name.clone()).collect();
        assert_eq!(names, [None, Some("a".into()), Some("b".into())]);
        assert_eq!(cli.kube.kubernetes_status_interval, Duration::from_secs(10));
    }
}
