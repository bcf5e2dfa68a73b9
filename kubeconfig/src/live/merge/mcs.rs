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
//! It deliberately does no IO and does not write ServiceExport status
//! (`export_status` maps these conflicts to conditions and writes them).

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
    /// The cluster's slices of that Service.
    slices: Vec<&'a EndpointSlice>,
}

/// The imports of every export in `clusters` (their read objects, not
/// held ones: a held cluster's import slices are stored already), in
/// O(objects · log objects).
pub(super) fn imports(clusters: &[ClusterObjects], multi: bool) -> Imports {
    let mut by_service: BTreeMap<ObjectName, Vec<Candidate<'_>>> = BTreeMap::new();
    let mut out = Imports::default();
    for (order, cluster) in clusters.iter().enumerate() {
        let exported: BTreeSet<ObjectName> = cluster
            .exports
            .iter()
            .map(ObjectMeta::object_name)
            .collect();
        let mut services: BTreeMap<ObjectName, &Service> = BTreeMap::new();
        let mut slices: BTreeMap<ObjectName, Vec<&EndpointSlice>> = BTreeMap::new();
        for r in &cluster.resources {
            match r {
                Resource::Service(s) if exported.contains(&s.meta.object_name()) => {
                    services.insert(s.meta.object_name(), s);
                }
                Resource::EndpointSlice(s) => {
                    if let Some(svc) = s.service_name() {
                        let name = ObjectName::new(&s.meta.namespace, svc);
                        if exported.contains(&name) {
                            slices.entry(name).or_default().push(s);
                        }
                    }
                }
                _ => {}
            }
        }
        for export in &cluster.exports {
            let name = export.object_name();
            match services.get(&name) {
                Some(service) => by_service.entry(name.clone()).or_default().push(Candidate {
                    order,
                    cluster: &cluster.name,
                    created_ms: export.creation_timestamp_ms,
                    service,
                    slices: slices.remove(&name).unwrap_or_default(),
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
        for member in &members {
            let label = if multi {
                format!("{}.clusterset", cluster_label(member.cluster))
            } else {
                "clusterset".to_string()
            };
            for slice in &member.slices {
                out.resources
                    .push(import_slice(slice, member.cluster, &import, &label));
            }
        }
    }
    out
}

/// A copy of `cluster`'s `slice` for the import named `import`, renamed
/// apart from the Service's own slices with `.<label>`.
fn import_slice(slice: &EndpointSlice, cluster: &str, import: &str, label: &str) -> Resource {
    let mut copy = slice.clone();
    copy.meta
        .labels
        .insert(SERVICE_NAME_LABEL.to_string(), import.to_string());
    copy.meta.name = suffixed(&slice.meta.name, label);
    copy.meta.origin = Some(cluster.to_string());
    copy.cluster = Some(cluster.to_string());
    Resource::EndpointSlice(copy)
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
