//! `switchyard coordinator --kubernetes ...`: live clusters as the
//! coordinator's configuration source.
//!
//! Owns: the `--kubernetes` flags and their parsing, connecting every
//! source before the coordinator starts (a bad kubeconfig exits non-zero at
//! once), when this coordinator counts as leading, and the coordinator as
//! the live sync's [`Store`]. The sync itself — watching, the pure plan,
//! proposing it, status write-back — is `switchyard_kubeconfig::live`
//! ([`lead_term`]).
//!
//! Leadership comes from the coordinator's own Raft metrics (the handle the
//! server hands out once bound), not from a status RPC: a term counts once
//! this node leads *and* its state machine has applied its log, so the
//! first plan of a term diffs against everything the previous leader
//! stored and re-applies nothing unchanged. A leader that has lost its
//! quorum (`Coordinator::leads_with_quorum`) keeps watching but writes
//! nothing, to Raft or to the clusters, until the quorum is back.
//!
//! Deliberately not here: watching, merging, diffing, the reconcile loop
//! and status conditions (`switchyard_kubeconfig::live`), and what applying
//! means (the coordinator's state machine). The coordinator crate never
//! sees a Kubernetes type and the kubeconfig crate never sees Raft: this
//! file wires the two.

use anyhow::{anyhow, bail};
use clap::Args;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use switchyard_coordinator::server::Coordinator;
use switchyard_coordinator::state::{CommandResponse, ReplicatedState};
use switchyard_kubeconfig::live::{
    ClusterSource, ProxyService, Store, Stored, SyncSettings, connect, connect_in_cluster,
    lead_term, run_while_leader,
};
use switchyard_proto::model::{
    CONTROLLER_NAME, ClusterStatus, Kind, ObjectName, Resource, ResourceKey, parse_duration,
};
use tokio::sync::watch;
use tracing::{Instrument, info, info_span};

/// The cluster name `in-cluster` gets without a `NAME=` prefix. Stored in
/// every EndpointSlice (`cluster`), so it must not depend on the pod.
const IN_CLUSTER_NAME: &str = "local";

/// The live-cluster flags of `switchyard coordinator`.
#[derive(Debug, Clone, Args)]
pub struct KubeArgs {
    /// A Kubernetes cluster to take Gateways, HTTPRoutes, Services and EndpointSlices from
    /// (repeatable; comma-separated in the env var): `in-cluster` (this pod's ServiceAccount,
    /// named `local`), `PATH` (the kubeconfig's current context) or `PATH#CONTEXT`, each
    /// optionally prefixed `NAME=` to name the cluster (default: `local` in-cluster, else the
    /// API server's host:port, never the context name). Names are stored with what each
    /// cluster contributes, so give every coordinator the same list. The clusters are the
    /// whole truth: the leader deletes stored objects they do not have, including ones applied
    /// by hand.
    #[arg(
        long = "kubernetes",
        env = "SWITCHYARD_KUBERNETES",
        value_delimiter = ',',
        value_parser = SourceSpec::parse,
        value_name = "SOURCE"
    )]
    pub sources: Vec<SourceSpec>,
    /// A --kubernetes source (by its name) that only runs backends: it is watched for Services,
    /// EndpointSlices and ServiceExports alone, never for Gateway API objects (repeatable;
    /// comma-separated in the env var).
    #[arg(
        long = "kubernetes-endpoints-only",
        env = "SWITCHYARD_KUBERNETES_ENDPOINTS_ONLY",
        value_delimiter = ',',
        value_name = "CLUSTER"
    )]
    pub endpoints_only: Vec<String>,
    /// How often route and Gateway status is recomputed and written back even without a change
    /// the coordinator noticed (only what differs is written).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub kubernetes_status_interval: Duration,
    /// The proxies' LoadBalancer Service as `CLUSTER/NAMESPACE/NAME` (CLUSTER a --kubernetes source
    /// name): its `status.loadBalancer.ingress` addresses are every Gateway's `status.addresses`.
    /// Without it Gateways stay `Programmed: False` (`AddressNotAssigned`).
    #[arg(long, env = "SWITCHYARD_KUBERNETES_PROXY_SERVICE", value_parser = parse_proxy_service, value_name = "CLUSTER/NAMESPACE/NAME")]
    pub kubernetes_proxy_service: Option<ProxyService>,
}

/// Parses `CLUSTER/NAMESPACE/NAME`.
fn parse_proxy_service(text: &str) -> Result<ProxyService, String> {
    match text.trim().split('/').collect::<Vec<_>>().as_slice() {
        [cluster, namespace, name] if ![cluster, namespace, name].iter().any(|p| p.is_empty()) => {
            Ok(ProxyService {
                cluster: cluster.to_string(),
                service: ObjectName::new(*namespace, *name),
            })
        }
        _ => Err(format!(
            "--kubernetes-proxy-service {text:?}: expected CLUSTER/NAMESPACE/NAME, e.g. local/switchyard/proxy"
        )),
    }
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
    proxy_service: Option<ProxyService>,
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
        for name in &args.endpoints_only {
            let Some(source) = sources.iter_mut().find(|s| &s.name == name) else {
                bail!(
                    "--kubernetes-endpoints-only {name:?}: no --kubernetes source has that id (sources: {})",
                    names.iter().cloned().collect::<Vec<_>>().join(", ")
                );
            };
            *source = source.clone().endpoints_only();
            info!(cluster = %name, "kubernetes source watched for endpoints only");
        }
        if let Some(proxy) = &args.kubernetes_proxy_service
            && !names.contains(&proxy.cluster)
        {
            bail!(
                "--kubernetes-proxy-service {}/{}: no --kubernetes source is named {:?} (sources: {})",
                proxy.cluster,
                proxy.service,
                proxy.cluster,
                names.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        Ok(Some(LiveSync {
            sources,
            status_interval: args.kubernetes_status_interval,
            proxy_service: args.kubernetes_proxy_service.clone(),
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
                let mut settings = SyncSettings::with_status_interval(self.status_interval);
                settings.proxy_service = self.proxy_service.clone();
                let store = CoordinatorStore(&coordinator);
                let lead = run_while_leader(leading_rx, || {
                    lead_term(&self.sources, CONTROLLER_NAME, settings.clone(), &store)
                });
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

/// The coordinator as the live sync's [`Store`]: what its state machine
/// holds, and writes through Raft (a follower would forward them; the sync
/// runs on the leader only).
struct CoordinatorStore<'a>(&'a Coordinator);

impl Store for CoordinatorStore<'_> {
    type Error = switchyard_coordinator::raft::ProposeError;

    fn stored(&self) -> Stored {
        stored_resources(&self.0.node().state().borrow())
    }

    fn may_write(&self) -> bool {
        self.0.leads_with_quorum()
    }

    fn term(&self) -> u64 {
        self.0.node().metrics().borrow().current_term
    }

    fn max_objects_per_request(&self) -> usize {
        self.0.limits().max_objects_per_apply
    }

    async fn apply(
        &self,
        resources: Vec<Resource>,
    ) -> Result<Result<Vec<String>, String>, Self::Error> {
        let response = self.0.apply_resources(resources).await?;
        Ok(answer(response))
    }

    async fn delete(
        &self,
        keys: Vec<ResourceKey>,
    ) -> Result<Result<Vec<String>, String>, Self::Error> {
        let response = self.0.delete_resources(keys).await?;
        Ok(answer(response))
    }

    fn status(&self) -> ClusterStatus {
        self.0.status()
    }

    fn status_changes(&self) -> watch::Receiver<u64> {
        self.0.status_changes()
    }
}

/// A state-machine answer as the sync reads it.
fn answer(response: CommandResponse) -> Result<Vec<String>, String> {
    response.0.map(|o| o.changes).map_err(|e| e.to_string())
}

/// What the state machine holds, as `plan` compares it: every stored
/// resource, each route's newest spec (pending, else active), and the
/// route records with no spec at all (their first transition abandoned).
fn stored_resources(state: &ReplicatedState) -> Stored {
    let mut stored = Stored {
        resources: state.resources.values().cloned().collect(),
        specless_routes: Vec::new(),
    };
    for record in state.routes.values() {
        let newest = record
            .pending
            .as_ref()
            .map(|p| &p.target)
            .or(record.active.as_ref());
        match newest {
            Some(g) => stored.resources.push(Resource::HttpRoute(g.spec.clone())),
            None => stored.specless_routes.push(ResourceKey {
                kind: Kind::HTTPRoute,
                name: record.name.clone(),
            }),
        }
    }
    stored
}

#[cfg(test)]
mod tests;
