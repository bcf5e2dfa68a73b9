//! From every cluster's objects to the one desired set: the multi-cluster
//! merge and the choice of what switchyard serves.
//!
//! **Served objects only.** The watchers read whole clusters, but only
//! GatewayClasses whose `controllerName` is ours, their Gateways, routes
//! with a parentRef to one of those Gateways, and what those need (the
//! Services and ReferenceGrants they refer to, the slices of those
//! Services, the Namespaces of routes and Gateways, for `allowedRoutes`
//! selectors) go into the desired set. Filtering here rather than leaving
//! it to the router keeps every unrelated Service and EndpointSlice of the
//! cluster out of the Raft log and out of every proxy's snapshot: otherwise
//! each pod restart anywhere would be a Raft write and a push to the whole
//! fleet. The router still checks the class itself, so a hand-applied file
//! is filtered the same way.
//!
//! **Several clusters.** Each cluster's GatewayClasses are its own: a
//! Gateway is ours only if its class *in its own cluster* names our
//! controller, so another cluster's same-named class of another controller
//! never makes its Gateways ours. Other objects are taken from the first
//! cluster (in source order) that has them; a later cluster's different
//! copy is ignored (the first source is authoritative). A Service
//! backendRef is served by the endpoints of the cluster whose Service won,
//! never by same-named Services elsewhere: sending traffic to other
//! clusters is asked for explicitly, with a Multi-Cluster Services
//! `ServiceExport` in each and a `ServiceImport` backendRef (see
//! [`mcs`]). With more than one cluster, slice names get a `.<cluster>`
//! suffix so slices of equal names cannot collide.
//!
//! **Held objects.** A cluster not (yet) listed in this term contributes
//! the objects the store holds from it ([`ClusterObjects::held`]), exactly
//! as stored: a new leader that cannot reach a cluster keeps serving what
//! the previous leader stored from it instead of deleting it or waiting.
//! Every object is tagged with the cluster it came from (`meta.origin`).
//!
//! It deliberately does no IO and keeps no state between calls.

mod mcs;

use std::collections::{BTreeMap, BTreeSet};
use switchyard_proto::model::{
    BackendRef, BackendTlsPolicy, Filter, HttpRoute, Kind, ObjectMeta, ObjectName, Resource,
    ResourceKey,
};

use super::kinds::GATEWAY_GROUP;
pub use mcs::ExportConflict;

/// One cluster's current objects, input to [`merge_clusters`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterObjects {
    /// The cluster's id. Empty for the objects of no configured cluster
    /// (stored before origins were recorded, or from a cluster no longer
    /// configured): they have only `held` objects.
    pub name: String,
    /// Its objects as read (already translated).
    pub resources: Vec<Resource>,
    /// Its `ServiceExport`s (their namespace, name and creation time).
    pub exports: Vec<ObjectMeta>,
    /// Stored objects of this cluster, kept as they are, while it has not
    /// been listed in this term (`resources` is then empty).
    pub held: Vec<Resource>,
}

/// The merged, served set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Merged {
    /// Served objects of every cluster, in apply order ([`Kind::ALL`], then
    /// name).
    pub resources: Vec<Resource>,
    /// Per cluster, the served Services (`namespace/name`) it contributed
    /// EndpointSlices to; every input cluster has an entry.
    pub contributed: BTreeMap<String, Vec<String>>,
    /// Exports left out of a ServiceImport because they conflict with an
    /// older one.
    pub conflicts: Vec<ExportConflict>,
    /// GRPCRoutes left out because an HTTPRoute has their namespace and
    /// name (see `drop_route_name_collisions`), as read: their status says
    /// why.
    pub route_collisions: Vec<HttpRoute>,
}

/// Route records are keyed by `namespace/name` whatever the route's kind,
/// and the coordinators refuse a route whose name a route of the other
/// kind holds — with the whole apply. So an HTTPRoute and a GRPCRoute of
/// one name (in one cluster or across clusters) cannot both be published:
/// the HTTPRoute wins, the GRPCRoute is left out (and named, for a
/// warning), and the rest of the clusters' objects are published as usual.
/// Only served routes count: an HTTPRoute of another controller's Gateway
/// takes nothing away.
fn drop_route_name_collisions(resources: &mut Vec<Resource>) -> Vec<HttpRoute> {
    let http: BTreeSet<ObjectName> = resources
        .iter()
        .filter(|r| r.kind() == Kind::HTTPRoute)
        .map(|r| r.meta().object_name())
        .collect();
    let mut dropped = Vec::new();
    resources.retain(|r| match r {
        Resource::HttpRoute(route)
            if r.kind() == Kind::GRPCRoute && http.contains(&r.meta().object_name()) =>
        {
            dropped.push(route.clone());
            false
        }
        _ => true,
    });
    dropped
}

/// Merges clusters (earlier ones win for everything but EndpointSlices)
/// and keeps only what is served by `controller_name`.
pub fn merge_clusters(clusters: &[ClusterObjects], controller_name: &str) -> Merged {
    let multi = clusters.iter().filter(|c| !c.name.is_empty()).count() > 1;
    let mut by_key: BTreeMap<ResourceKey, Resource> = BTreeMap::new();
    for cluster in clusters {
        for resource in &cluster.held {
            by_key
                .entry(resource.key())
                .or_insert_with(|| resource.clone());
        }
        for resource in ours_in_cluster(&cluster.resources, controller_name) {
            let resource = tagged(resource, &cluster.name, multi);
            by_key.entry(resource.key()).or_insert(resource);
        }
    }
    let imports = mcs::imports(clusters, multi);
    for resource in imports.resources {
        by_key.entry(resource.key()).or_insert(resource);
    }

    // A Service's own endpoints are those of the cluster its Service came
    // from; an import's slices are those of every exporting cluster.
    let winners: BTreeMap<ObjectName, Option<String>> = by_key
        .values()
        .filter_map(|r| match r {
            Resource::Service(s) => Some((s.meta.object_name(), s.meta.origin.clone())),
            _ => None,
        })
        .collect();
    by_key.retain(|_, r| match r {
        Resource::EndpointSlice(s) if !mcs::is_import_slice(s) => {
            s.service_name().is_some_and(|svc| {
                match winners.get(&ObjectName::new(&s.meta.namespace, svc)) {
                    // Stored before origins were recorded: as it was.
                    Some(None) => true,
                    Some(origin) => *origin == s.cluster,
                    None => false,
                }
            })
        }
        _ => true,
    });
    let mut resources = select_served(by_key.into_values().collect(), controller_name);
    let route_collisions = drop_route_name_collisions(&mut resources);
    let mut contributed: BTreeMap<String, BTreeSet<String>> = clusters
        .iter()
        .filter(|c| !c.name.is_empty())
        .map(|c| (c.name.clone(), BTreeSet::new()))
        .collect();
    for resource in &resources {
        if let Resource::EndpointSlice(s) = resource
            && let (Some(cluster), Some(service)) = (&s.cluster, s.service_name())
            && let Some(set) = contributed.get_mut(cluster)
        {
            set.insert(format!("{}/{service}", s.meta.namespace));
        }
    }
    Merged {
        resources,
        contributed: contributed
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().collect()))
            .collect(),
        conflicts: imports.conflicts,
        route_collisions,
    }
}

/// A cluster's objects without the GatewayClasses of other controllers and
/// the Gateways of classes that are not ours *in this cluster*.
fn ours_in_cluster<'a>(
    resources: &'a [Resource],
    controller_name: &str,
) -> impl Iterator<Item = &'a Resource> {
    let classes: BTreeSet<&str> = resources
        .iter()
        .filter_map(|r| match r {
            Resource::GatewayClass(c) if c.controller_name == controller_name => {
                Some(c.meta.name.as_str())
            }
            _ => None,
        })
        .collect();
    resources.iter().filter(move |r| match r {
        Resource::GatewayClass(c) => classes.contains(c.meta.name.as_str()),
        Resource::Gateway(g) => classes.contains(g.gateway_class_name.as_str()),
        _ => true,
    })
}

/// `resource` as read from `cluster`: its origin recorded; a slice tagged
/// with the cluster and, with several clusters, renamed apart.
fn tagged(resource: &Resource, cluster: &str, multi: bool) -> Resource {
    let mut resource = resource.clone();
    if let Resource::EndpointSlice(slice) = &mut resource {
        slice.cluster = Some(cluster.to_string());
        if multi {
            slice.meta.name = slice_name(&slice.meta.name, cluster);
        }
    }
    resource.meta_mut().origin = Some(cluster.to_string());
    resource
}

/// Keeps what `controller_name` serves (see the module docs), in apply
/// order.
pub fn select_served(all: Vec<Resource>, controller_name: &str) -> Vec<Resource> {
    let classes: BTreeSet<&str> = all
        .iter()
        .filter_map(|r| match r {
            Resource::GatewayClass(c) if c.controller_name == controller_name => {
                Some(c.meta.name.as_str())
            }
            _ => None,
        })
        .collect();
    let gateways: BTreeSet<ObjectName> = all
        .iter()
        .filter_map(|r| match r {
            Resource::Gateway(g) if classes.contains(g.gateway_class_name.as_str()) => {
                Some(g.meta.object_name())
            }
            _ => None,
        })
        .collect();
    let routes: Vec<&HttpRoute> = all
        .iter()
        .filter_map(|r| match r {
            Resource::HttpRoute(route) if attaches_to_any(route, &gateways) => Some(route),
            _ => None,
        })
        .collect();
    // By kind and name: an HTTPRoute and a GRPCRoute may share a name.
    let served_routes: BTreeSet<(Kind, ObjectName)> = routes
        .iter()
        .map(|r| (r.kind.kind(), r.meta.object_name()))
        .collect();
    let services: BTreeSet<ObjectName> = routes
        .iter()
        .flat_map(|route| {
            service_refs(route).filter_map(|b| {
                let ns = b.namespace.as_deref().unwrap_or(&route.meta.namespace);
                Some(ObjectName::new(ns, b.stored_service()?))
            })
        })
        .collect();
    // The Secrets our Gateways' listeners name as certificates.
    let secrets: BTreeSet<ObjectName> = all
        .iter()
        .filter_map(|r| match r {
            Resource::Gateway(g) if gateways.contains(&g.meta.object_name()) => Some(g),
            _ => None,
        })
        .flat_map(|g| {
            g.listeners
                .iter()
                .filter_map(|l| l.tls.as_ref())
                .flat_map(|t| &t.certificate_refs)
                .filter(|r| r.group.is_empty() && r.kind == "Secret")
                .map(|r| {
                    let ns = r.namespace.as_deref().unwrap_or(&g.meta.namespace);
                    ObjectName::new(ns, &r.name)
                })
        })
        .collect();
    // The BackendTLSPolicies that target a served Service, and the
    // ConfigMaps they trust (policies and their CAs share a namespace).
    let policies: Vec<&BackendTlsPolicy> = all
        .iter()
        .filter_map(|r| match r {
            Resource::BackendTlsPolicy(p) => Some(p),
            _ => None,
        })
        .filter(|p| p.target_services().any(|(s, _)| services.contains(&s)))
        .collect();
    let served_policies: BTreeSet<ObjectName> =
        policies.iter().map(|p| p.meta.object_name()).collect();
    let config_maps: BTreeSet<ObjectName> = policies
        .iter()
        .flat_map(|p| {
            p.validation
                .ca_certificate_refs
                .iter()
                .map(|r| ObjectName::new(&p.meta.namespace, &r.name))
        })
        .collect();
    // ReferenceGrants matter where a backendRef or a certificateRef
    // points across namespaces.
    let backend_namespaces: BTreeSet<&str> = services
        .iter()
        .chain(&secrets)
        .map(|s| s.namespace.as_str())
        .collect();
    let namespaces: BTreeSet<&str> = routes
        .iter()
        .map(|r| r.meta.namespace.as_str())
        .chain(gateways.iter().map(|g| g.namespace.as_str()))
        .collect();
    let keep = |r: &Resource| match r {
        Resource::GatewayClass(c) => classes.contains(c.meta.name.as_str()),
        Resource::Gateway(g) => gateways.contains(&g.meta.object_name()),
        Resource::HttpRoute(route) => {
            served_routes.contains(&(route.kind.kind(), route.meta.object_name()))
        }
        Resource::ReferenceGrant(g) => backend_namespaces.contains(g.meta.namespace.as_str()),
        Resource::Namespace(n) => namespaces.contains(n.meta.name.as_str()),
        Resource::Service(s) => services.contains(&s.meta.object_name()),
        Resource::EndpointSlice(s) => s
            .service_name()
            .is_some_and(|svc| services.contains(&ObjectName::new(&s.meta.namespace, svc))),
        Resource::Secret(s) => secrets.contains(&s.meta.object_name()),
        Resource::ConfigMap(m) => config_maps.contains(&m.meta.object_name()),
        Resource::BackendTlsPolicy(p) => served_policies.contains(&p.meta.object_name()),
    };
    let mut out: Vec<Resource> = all.iter().filter(|r| keep(r)).cloned().collect();
    out.sort_by_key(apply_order);
    out
}

/// Sort key: [`Kind::ALL`] position, then name.
pub(crate) fn apply_order(r: &Resource) -> (usize, ObjectName) {
    (kind_rank(r.kind()), r.meta().object_name())
}

/// Position of a kind in [`Kind::ALL`].
pub(crate) fn kind_rank(kind: Kind) -> usize {
    Kind::ALL
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(usize::MAX)
}

/// Whether a parentRef (group and kind defaulted) names a Gateway.
pub(crate) fn is_gateway_ref(group: &str, kind: &str) -> bool {
    (group.is_empty() || group == GATEWAY_GROUP) && (kind.is_empty() || kind == "Gateway")
}

fn attaches_to_any(route: &HttpRoute, gateways: &BTreeSet<ObjectName>) -> bool {
    route.parent_refs.iter().any(|p| {
        let ns = p.namespace.as_deref().unwrap_or(&route.meta.namespace);
        is_gateway_ref(&p.group, &p.kind) && gateways.contains(&ObjectName::new(ns, p.name.clone()))
    })
}

/// Every Service or ServiceImport backendRef of a route: rule backends and
/// mirror targets in rule and backend filters.
pub(crate) fn service_refs(route: &HttpRoute) -> impl Iterator<Item = &BackendRef> {
    route.rules.iter().flat_map(|rule| {
        let mut refs: Vec<&BackendRef> = rule.backend_refs.iter().collect();
        refs.extend(mirrors(&rule.filters));
        for b in &rule.backend_refs {
            refs.extend(mirrors(&b.filters));
        }
        refs.into_iter().filter(|b| b.stored_service().is_some())
    })
}

fn mirrors(filters: &[Filter]) -> impl Iterator<Item = &BackendRef> {
    filters.iter().filter_map(|f| match f {
        Filter::RequestMirror(m) => Some(&m.backend_ref),
        _ => None,
    })
}

/// `name.<cluster label>`, kept a valid DNS subdomain.
fn slice_name(name: &str, cluster: &str) -> String {
    suffixed(name, &cluster_label(cluster))
}

/// `name.<suffix>`, `name` shortened so the whole stays a valid DNS
/// subdomain (at most 253 characters).
pub(crate) fn suffixed(name: &str, label: &str) -> String {
    let room = 253usize.saturating_sub(label.len() + 1);
    let mut base: String = name.chars().take(room).collect();
    while base.ends_with(['-', '.']) {
        base.pop();
    }
    format!("{base}.{label}")
}

/// A cluster name as a DNS label: lowercase letters, digits and `-`, at
/// most 63 characters, never empty (context names like `admin@prod` or
/// ARNs are common).
pub(crate) fn cluster_label(cluster: &str) -> String {
    let mapped: String = cluster
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    let trimmed = mapped.trim_matches('-');
    if trimmed.is_empty() {
        "cluster".to_string()
    } else {
        trimmed.to_string()
    }
}

#[cfg(test)]
mod tests;
