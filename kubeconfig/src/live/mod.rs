//! Live Kubernetes clusters as a configuration source: watch Gateway API
//! and core objects in one or many clusters, merge them into the desired
//! set of [`Resource`](switchyard_proto::model::Resource)s the leader coordinator applies through Raft, and
//! write route and Gateway status back.
//!
//! What it owns:
//!
//! - connecting to a cluster from a kubeconfig ([`connect`]) or from inside
//!   it ([`connect_in_cluster`]);
//! - the watchers and their per-cluster caches, including the watcher's
//!   "initial list done" meaning "replace the set", and re-lists after a
//!   watch error ([`watch_clusters`]);
//! - choosing what switchyard serves (only what hangs off a GatewayClass
//!   whose `controllerName` is ours) and merging several clusters
//!   ([`merge_clusters`], [`select_served`]);
//! - what each cluster is watched for ([`SourceRole`]), and a cluster
//!   without some CRDs or not reachable failing alone: until a cluster has
//!   listed, it contributes what the store holds from it;
//! - the diff between desired and stored ([`plan`]);
//! - Gateway API status: the pure condition computation
//!   ([`route_parent_statuses`], [`gateway_status`]) and the server-side
//!   apply writers ([`StatusPublisher`], [`write_route_status`],
//!   [`write_gateway_status`], [`write_policy_status`]), BackendTLSPolicy
//!   ancestors ([`backend_tls_ancestors`]), and ServiceExport
//!   `Valid`/`Conflict` ([`export_conditions`]);
//! - running the watchers only while this coordinator leads
//!   ([`run_while_leader`]), and the term's reconcile loop around [`plan`]
//!   ([`lead_term`], talking to the coordinators through [`Store`]);
//! - the RBAC the code needs, in one list ([`REQUIRED_PERMISSIONS`]).
//!
//! What it deliberately does not do: know the coordinator (the binary
//! implements [`Store`] over it), decide cutovers, or route requests. The translation of each object into the
//! model is the file side's (`crate::gateway`, `crate::route`,
//! `crate::backend`), so a route read from a cluster and the same route read
//! from a file are the same `Resource`.
//!
//! # Wiring (for `switchyard coordinator`)
//!
//! ```text
//! let sources = vec![connect_in_cluster("local")?, connect(path, Some("west")).await?];
//! run_while_leader(is_leader, || lead_term(&sources, CONTROLLER_NAME, settings, &store)).await;
//! ```
//!
//! # Layout
//!
//! - `error`: [`LiveError`].
//! - `kinds`: the watched kinds, their API paths, [`REQUIRED_PERMISSIONS`].
//! - `translate`: one watched object into a `Resource` (or why not).
//! - `cache`: one cluster's objects, driven by watcher events.
//! - `merge`: served-object selection and the multi-cluster merge;
//!   `merge::mcs`: ServiceExports into clusterset ServiceImports.
//! - `plan`: desired versus stored ([`plan`], pure); `sync`: the term's
//!   loop that proposes the plan and publishes status ([`lead_term`]).
//! - `watch`: the watcher and probe tasks and the aggregator; `desired`:
//!   the [`DesiredState`] it publishes.
//! - `conditions`, `gateway_conditions`, `class_status`, `addresses`:
//!   pure status computation (routes, Gateways, GatewayClasses, Gateway
//!   addresses); `policy_status`: the Gateways a BackendTLSPolicy is
//!   reported on (its conditions are the model's rule) and its writer;
//!   `fence`: the Raft-term fence of every status write.
//! - `status`: the server-side apply writers; `publish`: when to write,
//!   with a [`Lease`] asked before every write; `events`: cutover Events.
//! - `leader`: [`run_while_leader`], [`Lease`].

mod addresses;
mod cache;
mod class_status;
mod conditions;
mod desired;
mod error;
mod events;
mod export_status;
mod fence;
mod gateway_conditions;
mod kinds;
mod leader;
mod merge;
mod plan;
mod policy_status;
mod publish;
mod status;
mod sync;
mod translate;
mod watch;

pub use addresses::{Assignment, Fleet, GatewayAddress, HOSTNAME, IP_ADDRESS, assign};
pub use class_status::{ClassStatus, SUPPORTED_FEATURES, UNCLAIMED_FEATURES, class_status};
pub use conditions::{
    CUTOVER_CONDITION, Condition, ConditionStatus, FallBack, PARTIALLY_INVALID_CONDITION,
    ParentReference, RouteParentStatus, World, route_parent_statuses, unread_route_parent_statuses,
};
pub use desired::{ClusterHealth, DesiredState, ExportOrigin, Origin, Rejected};
pub use error::LiveError;
pub use events::{CutoverEvent, transitions};
pub use export_status::{export_conditions, write_export_status};
pub use fence::{FENCE_WINDOW, Fenced, LEADER_TERM_CONDITION};
pub use gateway_conditions::{GatewayStatus, ListenerStatus, gateway_status, with_addresses};
pub use kinds::{FIELD_MANAGER, REQUIRED_PERMISSIONS, SourceRole};
pub use leader::{Lease, run_while_leader};
pub use merge::{ClusterObjects, ExportConflict, Merged, merge_clusters, select_served};
pub use plan::{Plan, Stored, plan};
pub use policy_status::{PolicyAncestorStatus, backend_tls_ancestors};
pub use publish::{DEFAULT_VERIFY_EVERY, ProxyService, Publication, StatusPublisher, Stopped};
pub use status::{
    WriteOutcome, write_class_status, write_gateway_status, write_policy_status,
    write_route_status, write_unread_route_status,
};
pub use sync::{Store, SyncSettings, lead_term, lead_term_with};
pub use watch::{WatchSettings, watch_clusters, watch_clusters_with};

use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::Path;

/// One cluster to watch: a client, the id that tags what came from it
/// (`meta.origin`, EndpointSlice `cluster`, [`ClusterHealth::name`], log
/// fields) and what it is watched for.
#[derive(Clone)]
pub struct ClusterSource {
    /// The cluster's id: unique among the sources watched together, and
    /// the same on every coordinator and across restarts. It is stored
    /// (`meta.origin`, EndpointSlice `cluster`): a new leader naming the
    /// cluster differently would rewrite every slice, and could not tell
    /// which stored objects an unreachable cluster had contributed. Give
    /// it explicitly (the KEP-2149 `cluster.clusterset.k8s.io` id is a
    /// good choice); [`connect`]'s default is the API server's address,
    /// never a kubeconfig context name (a local alias each operator picks).
    pub name: String,
    /// The client for this cluster.
    pub client: kube::Client,
    /// What the cluster is watched for.
    pub role: SourceRole,
}

impl ClusterSource {
    /// A full source (Gateway API and backends) named `name`.
    pub fn new(name: impl Into<String>, client: kube::Client) -> ClusterSource {
        ClusterSource {
            name: name.into(),
            client,
            role: SourceRole::Full,
        }
    }

    /// The same source, watched for backends only
    /// ([`SourceRole::Endpoints`]).
    pub fn endpoints_only(self) -> ClusterSource {
        ClusterSource {
            role: SourceRole::Endpoints,
            ..self
        }
    }
}

impl std::fmt::Debug for ClusterSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSource")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// Reads a kubeconfig file and builds a client for `context` (the file's
/// current context when `None`). Connects to nothing yet: an unreachable
/// cluster shows up later as [`ClusterHealth::reachable`] `false`. The
/// source is named by its API server's `host:port`, which every
/// coordinator's kubeconfig for that cluster shares whatever it calls the
/// context; callers with a better id (`NAME=`) overwrite it.
pub async fn connect(kubeconfig: &Path, context: Option<&str>) -> Result<ClusterSource, LiveError> {
    let path = kubeconfig.display().to_string();
    let file = Kubeconfig::read_from(kubeconfig).map_err(|source| LiveError::Kubeconfig {
        path: path.clone(),
        context: context.map(str::to_string),
        cause: source,
    })?;
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(file, &options)
        .await
        .map_err(|source| LiveError::Kubeconfig {
            path: path.clone(),
            context: context.map(str::to_string),
            cause: source,
        })?;
    let name = server_id(&config).unwrap_or(path);
    let client = kube::Client::try_from(config).map_err(|source| LiveError::Client {
        cluster: name.clone(),
        cause: Box::new(source),
    })?;
    Ok(ClusterSource::new(name, client))
}

/// `host:port` of the API server's URL, the port defaulted by scheme.
fn server_id(config: &kube::Config) -> Option<String> {
    let url = &config.cluster_url;
    let host = url.host()?;
    let port = url
        .port_u16()
        .unwrap_or(if url.scheme_str() == Some("http") {
            80
        } else {
            443
        });
    Some(format!("{host}:{port}"))
}

/// A client for the cluster this process runs in (its ServiceAccount
/// token and CA, `KUBERNETES_SERVICE_HOST`), tagged `name`.
pub fn connect_in_cluster(name: &str) -> Result<ClusterSource, LiveError> {
    let config =
        kube::Config::incluster().map_err(|source| LiveError::InCluster { cause: source })?;
    let client = kube::Client::try_from(config).map_err(|source| LiveError::Client {
        cluster: name.to_string(),
        cause: Box::new(source),
    })?;
    Ok(ClusterSource::new(name, client))
}
