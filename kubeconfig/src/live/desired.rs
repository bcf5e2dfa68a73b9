//! [`DesiredState`], what the watchers publish, and how it is computed
//! from the per-cluster caches: merged, filtered to what is served, with
//! each cluster's health, the rejected objects and where each served
//! Gateway and route is defined.
//!
//! **Held objects.** Given what the store holds ([`Held`], a leader's
//! term), a cluster not fully listed yet — unreachable since the term
//! began, say — contributes its stored objects (by their `meta.origin`)
//! instead of nothing, and the state is published as soon as every
//! cluster has either listed or failed once: one cluster that cannot be
//! reached neither holds back the others nor has its objects deleted.
//! (Waiting for that first answer keeps a term's first plan whole when
//! every cluster answers; a cluster whose connection hangs holds the rest
//! back only until the client's connect timeout.) Stored objects of no
//! configured cluster are held until every cluster has listed. Without a
//! store ([`None`]), nothing is published until every cluster has listed.
//!
//! It deliberately does no IO: `watch` feeds it caches.

use super::cache::ClusterCache;
use super::kinds::Watched;
use super::merge::{ClusterObjects, ExportConflict, merge_clusters};
use std::collections::{BTreeMap, BTreeSet};
use switchyard_proto::model::{HttpRoute, Kind, ObjectMeta, ObjectName, Resource, ResourceKey};

/// What the store held when the term began: the objects a cluster not
/// yet listed keeps contributing.
pub(crate) type Held = Vec<Resource>;

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
    /// For each served Gateway, route and BackendTLSPolicy, the clusters
    /// that define it: where its status is written.
    pub origins: BTreeMap<ResourceKey, Vec<Origin>>,
    /// ServiceExports left out of their ServiceImport (conflicts, oldest
    /// export wins).
    pub export_conflicts: Vec<ExportConflict>,
    /// GRPCRoutes not served because an HTTPRoute has their namespace and
    /// name (the HTTPRoute wins), with the clusters defining each: their
    /// status says so there.
    pub route_name_collisions: Vec<RouteCollision>,
    /// Every ServiceExport of every listed cluster: where export status
    /// (`Valid`, `Conflict`) is written.
    pub exports: Vec<ExportOrigin>,
}

/// One cluster's ServiceExport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportOrigin {
    /// The cluster that holds it.
    pub cluster: String,
    /// `namespace/name`: the exported Service's.
    pub name: ObjectName,
    /// Its `metadata.generation`.
    pub generation: Option<i64>,
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
    /// Whether every watched kind has been listed in this term. Until it
    /// has, the cluster contributes what the store held from it.
    pub listed: bool,
    /// Watched kinds whose CRD the cluster does not have (their lists are
    /// answered `404`), such as `Gateway` in a cluster without the
    /// Gateway API: treated as empty.
    pub absent_kinds: Vec<String>,
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

/// A GRPCRoute left out for its name, and where it is defined.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteCollision {
    /// The GRPCRoute left out, as read.
    pub route: HttpRoute,
    /// The clusters that define it.
    pub origins: Vec<Origin>,
}

/// Where a served Gateway, route or BackendTLSPolicy is defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The cluster.
    pub cluster: String,
    /// Its `metadata.generation` there (status `observedGeneration`).
    pub generation: Option<i64>,
}

/// The merged state of all caches, with the objects `held` for clusters
/// not listed yet; `None` until every cluster has listed (without `held`)
/// or has listed or failed (with it).
pub(crate) fn desired_state(
    caches: &[ClusterCache],
    held: Option<&Held>,
    controller_name: &str,
) -> Option<DesiredState> {
    let all_listed = caches.iter().all(ClusterCache::listed);
    let ready = match held {
        Some(_) => caches.iter().all(ClusterCache::settled),
        None => all_listed,
    };
    if !ready {
        return None;
    }
    let held = held.map(Vec::as_slice).unwrap_or_default();
    let mut inputs: Vec<ClusterObjects> = caches
        .iter()
        .map(|c| {
            if c.listed() {
                ClusterObjects {
                    name: c.name.clone(),
                    resources: c.resources(),
                    exports: c.exports(),
                    held: Vec::new(),
                }
            } else {
                ClusterObjects {
                    name: c.name.clone(),
                    held: held
                        .iter()
                        .filter(|r| r.meta().origin.as_deref() == Some(c.name.as_str()))
                        .cloned()
                        .collect(),
                    ..ClusterObjects::default()
                }
            }
        })
        .collect();
    if !all_listed {
        let known: BTreeSet<&str> = caches.iter().map(|c| c.name.as_str()).collect();
        inputs.push(ClusterObjects {
            held: held
                .iter()
                .filter(|r| {
                    !r.meta()
                        .origin
                        .as_deref()
                        .is_some_and(|o| known.contains(o))
                })
                .cloned()
                .collect(),
            ..ClusterObjects::default()
        });
    }
    let exports = inputs
        .iter()
        .flat_map(|c| {
            c.exports.iter().map(|e: &ObjectMeta| ExportOrigin {
                cluster: c.name.clone(),
                name: e.object_name(),
                generation: e.k8s_generation,
            })
        })
        .collect();
    let mut merged = merge_clusters(&inputs, controller_name);
    let served_all: BTreeSet<ResourceKey> = merged.resources.iter().map(Resource::key).collect();
    let served: BTreeSet<&ResourceKey> = served_all
        .iter()
        .filter(|k| {
            // The kinds whose status is written, in each cluster defining
            // them (at that cluster's generation).
            matches!(k.kind, Kind::Gateway | Kind::BackendTLSPolicy) || k.kind.is_route()
        })
        .collect();
    let mut origins: BTreeMap<ResourceKey, Vec<Origin>> = BTreeMap::new();
    let collided: BTreeSet<ResourceKey> = merged
        .route_collisions
        .iter()
        .map(|r| ResourceKey {
            kind: Kind::GRPCRoute,
            name: r.meta.object_name(),
        })
        .collect();
    let mut collision_origins: BTreeMap<ResourceKey, Vec<Origin>> = BTreeMap::new();
    let mut rejected = Vec::new();
    for cache in caches {
        for (watched, name, entry) in cache.entries() {
            let Watched::Model(kind) = watched else {
                continue;
            };
            let key = ResourceKey {
                kind,
                name: name.clone(),
            };
            // Served objects, and Gateways and routes never readable at all
            // (whether they are ours is unknown); not every unrelated
            // object in the cluster that switchyard could not read.
            let reportable = served_all.contains(&key)
                || (entry.good.is_none() && (kind == Kind::Gateway || kind.is_route()));
            if let Some(message) = entry.rejected.as_ref().filter(|_| reportable) {
                rejected.push(Rejected {
                    cluster: cache.name.clone(),
                    key: key.clone(),
                    message: message.clone(),
                });
            }
            let origin = Origin {
                cluster: cache.name.clone(),
                generation: entry.generation,
            };
            if served.contains(&key) {
                origins.entry(key).or_default().push(origin);
            } else if collided.contains(&key) && entry.good.is_some() {
                collision_origins.entry(key).or_default().push(origin);
            }
        }
    }
    let clusters = caches
        .iter()
        .map(|c| ClusterHealth {
            name: c.name.clone(),
            reachable: c.reachable(),
            last_error: c.last_error(),
            listed: c.listed(),
            absent_kinds: c.absent_kinds(),
            contributed: merged.contributed.remove(&c.name).unwrap_or_default(),
        })
        .collect();
    Some(DesiredState {
        resources: merged.resources,
        clusters,
        rejected,
        origins,
        export_conflicts: merged.conflicts,
        route_name_collisions: merged
            .route_collisions
            .into_iter()
            .map(|route| {
                let key = ResourceKey {
                    kind: Kind::GRPCRoute,
                    name: route.meta.object_name(),
                };
                RouteCollision {
                    origins: collision_origins.remove(&key).unwrap_or_default(),
                    route,
                }
            })
            .collect(),
        exports,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::cache::{Object, Observed, Update, WatchFailure};
    use crate::live::kinds::SourceRole;
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
        let watched = SourceRole::Full.watched();
        let mut c = ClusterCache::new(name, watched);
        for &w in watched {
            c.update(w, Update::Init);
            for r in parse_documents("set", SET).unwrap() {
                if Watched::Model(r.kind()) == w {
                    c.update(
                        w,
                        Update::InitApply(Observed {
                            name: r.meta().object_name(),
                            generation: r.meta().k8s_generation,
                            result: Ok(Object::Resource(r)),
                        }),
                    );
                }
            }
            c.update(w, Update::InitDone);
        }
        c
    }

    fn gw() -> ResourceKey {
        ResourceKey {
            kind: Kind::Gateway,
            name: ObjectName::new("shop", "gw"),
        }
    }

    #[test]
    fn without_a_store_nothing_is_published_until_every_cluster_listed_every_kind() {
        let late = ClusterCache::new("west", SourceRole::Full.watched());
        assert_eq!(
            desired_state(&[listed("east"), late], None, CONTROLLER_NAME),
            None
        );
        let state =
            desired_state(&[listed("east"), listed("west")], None, CONTROLLER_NAME).unwrap();
        assert_eq!(state.resources.len(), 2);
        let clusters: Vec<_> = state.origins[&gw()]
            .iter()
            .map(|o| o.cluster.as_str())
            .collect();
        assert_eq!(clusters, ["east", "west"]);
        assert_eq!(state.origins[&gw()][0].generation, Some(3));
        let origin = state.resources[1].meta().origin.as_deref();
        assert_eq!(origin, Some("east"), "the first cluster's copy, tagged");
    }

    #[test]
    fn a_cluster_not_listed_yet_contributes_what_the_store_held_from_it() {
        let east = listed("east");
        let mut stored = desired_state(&[listed("west")], None, CONTROLLER_NAME)
            .unwrap()
            .resources;
        // A Namespace stored before origins were recorded, and one from a
        // cluster no longer configured.
        let mut legacy = parse_documents(
            "old",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
        )
        .unwrap();
        stored.push(legacy.remove(0));
        let mut west = ClusterCache::new("west", SourceRole::Full.watched());
        assert_eq!(
            desired_state(
                &[
                    listed("east"),
                    ClusterCache::new("west", SourceRole::Full.watched())
                ],
                Some(&stored),
                CONTROLLER_NAME
            ),
            None,
            "west has neither answered nor failed yet"
        );
        west.update(
            Watched::Model(Kind::Service),
            Update::Error(WatchFailure::now("connection refused")),
        );
        let state = desired_state(&[east, west], Some(&stored), CONTROLLER_NAME).unwrap();
        assert!(!state.clusters[1].listed);
        let origins: Vec<_> = state
            .resources
            .iter()
            .map(|r| (r.key().to_string(), r.meta().origin.clone()))
            .collect();
        // East wins what both have; the unknown-origin Namespace is held
        // while a cluster is not listed...
        assert!(
            origins.contains(&("Namespace shop".into(), None)),
            "{origins:?}"
        );
        assert!(origins.contains(&("Gateway shop/gw".into(), Some("east".into()))));
        // ... and dropped once every cluster has listed.
        let state = desired_state(
            &[listed("east"), listed("west")],
            Some(&stored),
            CONTROLLER_NAME,
        )
        .unwrap();
        assert!(!state.resources.iter().any(|r| r.kind() == Kind::Namespace));
        // Only west's stored objects when east has not listed either.
        let failed = |name: &str| {
            let mut c = ClusterCache::new(name, SourceRole::Full.watched());
            c.update(
                Watched::Model(Kind::Namespace),
                Update::Error(WatchFailure::now("connection refused")),
            );
            c
        };
        let state = desired_state(
            &[failed("east"), failed("west")],
            Some(&stored),
            CONTROLLER_NAME,
        )
        .unwrap();
        let gateway = state.resources.iter().find(|r| r.key() == gw()).unwrap();
        assert_eq!(gateway.meta().origin.as_deref(), Some("west"));
    }

    #[test]
    fn an_unreachable_cluster_is_reported_and_keeps_its_objects() {
        let mut east = listed("east");
        east.update(
            Watched::Model(Kind::Service),
            Update::Error(WatchFailure::now("connection refused")),
        );
        let state = desired_state(&[east], None, CONTROLLER_NAME).unwrap();
        assert_eq!(state.resources.len(), 2);
        assert!(!state.clusters[0].reachable);
        assert_eq!(
            state.clusters[0].last_error.as_deref(),
            Some("Service: connection refused")
        );
    }

    #[test]
    fn a_cluster_without_the_gateway_api_is_listed_and_says_so() {
        let watched = SourceRole::Full.watched();
        let mut bare = ClusterCache::new("bare", watched);
        for &w in watched {
            if w.is_custom() {
                bare.update(w, Update::Absent);
            } else {
                bare.update(w, Update::Init);
                bare.update(w, Update::InitDone);
            }
        }
        let state = desired_state(&[listed("east"), bare], None, CONTROLLER_NAME).unwrap();
        let health = &state.clusters[1];
        assert!(health.listed && health.reachable);
        assert!(health.absent_kinds.contains(&"HTTPRoute".to_string()));
        assert!(health.absent_kinds.contains(&"ServiceExport".to_string()));
    }
}
