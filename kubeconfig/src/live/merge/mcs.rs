//! The Multi-Cluster Services API (KEP-1645) as switchyard serves it: each
//! cluster's `ServiceExport`s become one clusterset `ServiceImport` per
//! exported `namespace/name`, stored as a Service named
//! [`service_import_name`] whose EndpointSlices are copies of every
//! exporting cluster's slices. A route reaches it with a `ServiceImport`
//! backendRef (GEP-1748).
//!
//! **Conflicts.** As the KEP resolves them: the oldest export (by its
//! `creationTimestamp`, then source order) defines the import's ports; a
//! later export whose Service gives a port number another name, or a port
//! name another number, is left out of the import whole (its pods would
//! otherwise take traffic for a port they may not serve, which is what
//! merging by name alone did) and reported as an [`ExportConflict`]
//! (`ServiceExportConflict`'s reason, `PortConflict`). Extra ports that do
//! not clash are added to the import. An export without a Service in its
//! cluster contributes nothing (`NoService`).
//!
//! **Flat network.** Endpoints of every exporting cluster are addresses
//! the proxies dial directly: the clusters' pod networks must be routable
//! from the proxies (one flat network, or a mesh gateway in front of
//! each). Nothing here translates addresses.
//!
//! It deliberately does no IO and does not write ServiceExport status.

use super::{ClusterObjects, cluster_label, suffixed};
use std::collections::{BTreeMap, BTreeSet};
use switchyard_proto::model::{
    EndpointSlice, ObjectMeta, ObjectName, Resource, SERVICE_NAME_LABEL, Service, ServicePort,
    service_import_name,
};

/// An export left out of its ServiceImport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportConflict {
    /// The cluster whose export is left out.
    pub cluster: String,
    /// `namespace/name` of the exported Service.
    pub service: ObjectName,
    /// `PortConflict` or `NoService`.
    pub reason: &'static str,
    /// What clashes, naming the ports and the cluster whose export won.
    pub message: String,
}

/// The derived import Services and slices, and the conflicts found.
#[derive(Debug, Default)]
pub(super) struct Imports {
    pub(super) resources: Vec<Resource>,
    pub(super) conflicts: Vec<ExportConflict>,
}

/// Whether a slice is a copy made for a ServiceImport.
pub(super) fn is_import_slice(slice: &EndpointSlice) -> bool {
    slice
        .service_name()
        .is_some_and(|s| s.ends_with(&service_import_name("")))
}

/// One cluster's export of one Service.
struct Candidate<'a> {
    order: usize,
    cluster: &'a str,
    created_ms: Option<i64>,
    service: &'a Service,
}

/// The imports of every export in `clusters` (their read objects, not
/// held ones: a held cluster's import slices are stored already).
pub(super) fn imports(clusters: &[ClusterObjects], multi: bool) -> Imports {
    let mut by_service: BTreeMap<ObjectName, Vec<Candidate<'_>>> = BTreeMap::new();
    let mut out = Imports::default();
    for (order, cluster) in clusters.iter().enumerate() {
        let services: BTreeMap<ObjectName, &Service> = cluster
            .resources
            .iter()
            .filter_map(|r| match r {
                Resource::Service(s) => Some((s.meta.object_name(), s)),
                _ => None,
            })
            .collect();
        for export in &cluster.exports {
            let name = export.object_name();
            match services.get(&name) {
                Some(service) => by_service.entry(name).or_default().push(Candidate {
                    order,
                    cluster: &cluster.name,
                    created_ms: export.creation_timestamp_ms,
                    service,
                }),
                None => out.conflicts.push(ExportConflict {
                    cluster: cluster.name.clone(),
                    message: format!(
                        "cluster {} exports {name}, but has no such Service",
                        cluster.name
                    ),
                    service: name,
                    reason: "NoService",
                }),
            }
        }
    }
    for (name, mut candidates) in by_service {
        // Oldest first; an export without a timestamp counts as newest.
        candidates.sort_by_key(|c| (c.created_ms.is_none(), c.created_ms, c.order));
        let Some((oldest, rest)) = candidates.split_first() else {
            continue;
        };
        let mut ports = oldest.service.ports.clone();
        let mut members = vec![oldest];
        for candidate in rest {
            match clash(&ports, &candidate.service.ports) {
                Some(what) => out.conflicts.push(ExportConflict {
                    cluster: candidate.cluster.to_string(),
                    message: format!(
                        "cluster {}'s export of {name} is left out: {what} (the oldest export, cluster {}'s, wins)",
                        candidate.cluster, oldest.cluster
                    ),
                    service: name.clone(),
                    reason: "PortConflict",
                }),
                None => {
                    for p in &candidate.service.ports {
                        if !ports.iter().any(|q| q.port == p.port) {
                            ports.push(p.clone());
                        }
                    }
                    members.push(candidate);
                }
            }
        }
        let import = service_import_name(&name.name);
        out.resources.push(Resource::Service(Service {
            meta: ObjectMeta {
                origin: Some(oldest.cluster.to_string()),
                ..ObjectMeta::named(&name.namespace, &import)
            },
            ports,
        }));
        let member_clusters: BTreeSet<&str> = members.iter().map(|m| m.cluster).collect();
        for cluster in clusters
            .iter()
            .filter(|c| member_clusters.contains(c.name.as_str()))
        {
            out.resources
                .extend(import_slices(cluster, &name, &import, multi));
        }
    }
    out
}

/// Copies of `cluster`'s slices of Service `name` for the import named
/// `import`, renamed apart from the Service's own slices.
fn import_slices<'a>(
    cluster: &'a ClusterObjects,
    name: &'a ObjectName,
    import: &'a str,
    multi: bool,
) -> impl Iterator<Item = Resource> + 'a {
    cluster.resources.iter().filter_map(move |r| match r {
        Resource::EndpointSlice(s)
            if s.meta.namespace == name.namespace && s.service_name() == Some(&name.name) =>
        {
            let mut copy = s.clone();
            copy.meta
                .labels
                .insert(SERVICE_NAME_LABEL.to_string(), import.to_string());
            let label = if multi {
                format!("{}.clusterset", cluster_label(&cluster.name))
            } else {
                "clusterset".to_string()
            };
            copy.meta.name = suffixed(&s.meta.name, &label);
            copy.meta.origin = Some(cluster.name.clone());
            copy.cluster = Some(cluster.name.clone());
            Some(Resource::EndpointSlice(copy))
        }
        _ => None,
    })
}

/// Why `theirs` cannot join an import whose ports are `ours`: a port
/// number named differently, or a port name on another number.
fn clash(ours: &[ServicePort], theirs: &[ServicePort]) -> Option<String> {
    let name = |p: &ServicePort| p.name.clone().filter(|n| !n.is_empty());
    for p in theirs {
        for q in ours {
            if p.port == q.port && name(p) != name(q) {
                return Some(format!(
                    "port {} is named {:?} there but {:?} in the import",
                    p.port,
                    name(p).unwrap_or_default(),
                    name(q).unwrap_or_default()
                ));
            }
            if name(p).is_some() && name(p) == name(q) && p.port != q.port {
                return Some(format!(
                    "port {:?} is {} there but {} in the import",
                    name(p).unwrap_or_default(),
                    p.port,
                    q.port
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
