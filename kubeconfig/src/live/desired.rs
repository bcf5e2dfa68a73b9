//! [`DesiredState`], what the watchers publish, and how it is computed
//! from the per-cluster caches: merged, filtered to what is served, with
//! each cluster's health, the rejected objects and where each served
//! Gateway and route is defined.
//!
//! It deliberately does no IO: `watch` feeds it caches.

use super::cache::ClusterCache;
use super::merge::{ClusterObjects, merge_clusters};
use std::collections::{BTreeMap, BTreeSet};
use switchyard_proto::model::{Kind, Resource, ResourceKey};

/// What the watchers produce: the full desired set from all clusters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DesiredState {
    /// The served objects of every cluster, merged, in apply order.
    pub resources: Vec<Resource>,
    /// Every cluster, in source order.
    pub clusters: Vec<ClusterHealth>,
    /// Served objects whose newest version could not be read (their last
    /// good version is still in `resources`), and Gateways and HTTPRoutes
    /// never read at all (whose they are is unknown).
    pub rejected: Vec<Rejected>,
    /// For each served Gateway and HTTPRoute, the clusters that define it:
    /// where its status is written.
    pub origins: BTreeMap<ResourceKey, Vec<Origin>>,
}

/// One cluster's health and contribution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterHealth {
    /// The cluster's name.
    pub name: String,
    /// False while any of its watchers is failing. Its objects stay as
    /// last seen meanwhile: endpoints keep serving until their own
    /// conditions (or the proxies' health checks) say otherwise.
    pub reachable: bool,
    /// The newest watch error while unreachable, as `Kind: message`.
    pub last_error: Option<String>,
    /// Served Services (`namespace/name`) it contributes endpoints to.
    pub contributed: Vec<String>,
}

/// An object whose newest version was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The cluster it is in.
    pub cluster: String,
    /// Its key.
    pub key: ResourceKey,
    /// Why, naming the field.
    pub message: String,
}

/// Where a served Gateway or HTTPRoute is defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The cluster.
    pub cluster: String,
    /// Its `metadata.generation` there (status `observedGeneration`).
    pub generation: Option<i64>,
}

/// The merged state of all caches; `None` until every one has listed.
pub(crate) fn desired_state(
    caches: &[ClusterCache],
    controller_name: &str,
) -> Option<DesiredState> {
    if !caches.iter().all(ClusterCache::listed) {
        return None;
    }
    let inputs: Vec<ClusterObjects> = caches
        .iter()
        .map(|c| ClusterObjects {
            name: c.name.clone(),
            resources: c.resources(),
        })
        .collect();
    let mut merged = merge_clusters(&inputs, controller_name);
    let served_all: BTreeSet<ResourceKey> = merged.resources.iter().map(Resource::key).collect();
    let served: BTreeSet<&ResourceKey> = served_all
        .iter()
        .filter(|k| matches!(k.kind, Kind::Gateway | Kind::HTTPRoute))
        .collect();
    let mut origins: BTreeMap<ResourceKey, Vec<Origin>> = BTreeMap::new();
    let mut rejected = Vec::new();
    for cache in caches {
        for (kind, name, entry) in cache.entries() {
            let key = ResourceKey {
                kind,
                name: name.clone(),
            };
            // Served objects, and Gateways and routes never readable at all
            // (whether they are ours is unknown); not every unrelated
            // object in the cluster that switchyard could not read.
            let reportable = served_all.contains(&key)
                || (entry.good.is_none() && matches!(kind, Kind::Gateway | Kind::HTTPRoute));
            if let Some(message) = entry.rejected.as_ref().filter(|_| reportable) {
                rejected.push(Rejected {
                    cluster: cache.name.clone(),
                    key: key.clone(),
                    message: message.clone(),
                });
            }
            if served.contains(&key) {
                origins.entry(key).or_default().push(Origin {
                    cluster: cache.name.clone(),
                    generation: entry.generation,
                });
            }
        }
    }
    let clusters = caches
        .iter()
        .map(|c| ClusterHealth {
            name: c.name.clone(),
            reachable: c.reachable(),
            last_error: c.last_error(),
            contributed: merged.contributed.remove(&c.name).unwrap_or_default(),
        })
        .collect();
    Some(DesiredState {
        resources: merged.resources,
        clusters,
        rejected,
        origins,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::cache::{Observed, Update, WatchFailure};
    use crate::live::kinds::WATCHED;
    use crate::parse_documents;
    use switchyard_proto::model::CONTROLLER_NAME;
    use switchyard_proto::model::ObjectName;

    const SET: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ours}
spec: {controllerName: switchyard.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: shop, generation: 3}
spec: {gatewayClassName: ours, listeners: [{name: http, port: 80, protocol: HTTP}]}
"#;

    fn listed(name: &str) -> ClusterCache {
        let mut c = ClusterCache::new(name, &WATCHED);
        for kind in WATCHED {
            c.update(kind, Update::Init);
            for r in parse_documents("set", SET).unwrap() {
                if r.kind() == kind {
                    c.update(
                        kind,
                        Update::InitApply(Observed {
                            name: r.meta().object_name(),
                            generation: r.meta().k8s_generation,
                            result: Ok(r),
                        }),
                    );
                }
            }
            c.update(kind, Update::InitDone);
        }
        c
    }

    #[test]
    fn nothing_is_published_until_every_cluster_listed_every_kind() {
        let late = ClusterCache::new("west", &WATCHED);
        assert_eq!(
            desired_state(&[listed("east"), late], CONTROLLER_NAME),
            None
        );
        let state = desired_state(&[listed("east"), listed("west")], CONTROLLER_NAME).unwrap();
        assert_eq!(state.resources.len(), 2);
        let gw = ResourceKey {
            kind: Kind::Gateway,
            name: ObjectName::new("shop", "gw"),
        };
        let clusters: Vec<_> = state.origins[&gw]
            .iter()
            .map(|o| o.cluster.as_str())
            .collect();
        assert_eq!(clusters, ["east", "west"]);
        assert_eq!(state.origins[&gw][0].generation, Some(3));
    }

    #[test]
    fn an_unreachable_cluster_is_reported_and_keeps_its_objects() {
        let mut east = listed("east");
        east.update(
            Kind::Service,
            Update::Error(WatchFailure::now("connection refused")),
        );
        let state = desired_state(&[east], CONTROLLER_NAME).unwrap();
        assert_eq!(state.resources.len(), 2);
        assert!(!state.clusters[0].reachable);
        assert_eq!(
            state.clusters[0].last_error.as_deref(),
            Some("Service: connection refused")
        );
    }
}
