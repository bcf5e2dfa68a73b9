//! [`plan`]: what the leader must apply and delete so the stored state
//! equals the desired one.
//!
//! It deliberately does not apply anything, and does not know where the
//! stored set comes from: the caller passes what the state machine holds.

use super::merge::{apply_order, kind_rank};
use std::collections::BTreeMap;
use switchyard_proto::model::{Resource, ResourceKey};

/// What the replicated state holds, as [`plan`] compares it.
#[derive(Debug, Clone, Default)]
pub struct Stored {
    /// Every stored resource, routes as their newest spec (pending, else
    /// active). A route whose transition was abandoned compares by its
    /// active spec, so the next plan proposes the desired spec again: a
    /// fresh cutover attempt.
    pub resources: Vec<Resource>,
    /// Route records with no spec at all (their first transition was
    /// abandoned): nothing to compare, but deleted when no cluster has
    /// them any more.
    pub specless_routes: Vec<ResourceKey>,
}

/// What the leader proposes to make the store equal the clusters: apply
/// first, then delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// New or changed resources, in apply order (Namespaces first, routes
    /// last), without `meta.revision` (the state machine stamps it).
    pub apply: Vec<Resource>,
    /// Stored but no longer desired, routes first, so no route is left
    /// pointing at a Service deleted before it.
    pub delete: Vec<ResourceKey>,
}

impl Plan {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.apply.is_empty() && self.delete.is_empty()
    }

    /// The deletes that must go *before* the applies: stored routes whose
    /// `namespace/name` a route of the other kind in `apply` takes (a
    /// GRPCRoute replaced by an HTTPRoute of its name, or the reverse).
    /// The coordinators keep one route record per name and refuse a route
    /// whose name the other kind holds, so applying first would be refused
    /// and the switch would wait for the next sync.
    pub fn kind_switches(&self) -> Vec<ResourceKey> {
        self.delete
            .iter()
            .filter(|k| {
                k.kind.is_route()
                    && self.apply.iter().any(|r| {
                        r.kind().is_route()
                            && r.kind() != k.kind
                            && r.meta().object_name() == k.name
                    })
            })
            .cloned()
            .collect()
    }
}

/// Diffs `desired` (from the clusters) against `stored` (the replicated
/// state), comparing ignoring `meta.revision`. Apply first, then delete: a
/// route moved from Service A to B and A deleted in one change then never
/// points nowhere.
///
/// Everything stored that is not desired is deleted: a coordinator fed by
/// live clusters treats them as the whole truth, including over objects
/// applied by hand with `switchyard apply`.
///
/// A difference in `meta.origin` alone is not a change when the stored
/// object has none (stored before origins were recorded: adopting the tag
/// is not worth a Raft write of every object on upgrade) or is an
/// HTTPRoute (the state machine starts a cutover for any route change; a
/// route moving to another cluster with an equal spec must not start one).
/// Such an object keeps its stored origin until it really changes.
pub fn plan(desired: &[Resource], stored: &Stored) -> Plan {
    let by_key: BTreeMap<ResourceKey, Resource> = stored
        .resources
        .iter()
        .map(|r| (r.key(), without_revision(r)))
        .collect();
    let mut desired_keys = std::collections::BTreeSet::new();
    let mut apply: Vec<Resource> = Vec::new();
    for resource in desired {
        let key = resource.key();
        let wanted = without_revision(resource);
        if by_key.get(&key).is_none_or(|old| differs(old, &wanted)) {
            apply.push(wanted);
        }
        desired_keys.insert(key);
    }
    apply.sort_by_key(apply_order);
    let mut delete: Vec<ResourceKey> = by_key
        .into_keys()
        .chain(stored.specless_routes.iter().cloned())
        .filter(|k| !desired_keys.contains(k))
        .collect();
    delete.sort_by_key(|k| (std::cmp::Reverse(kind_rank(k.kind)), k.name.clone()));
    delete.dedup();
    Plan { apply, delete }
}

/// Whether `wanted` changes `old` (both without revision), by the origin
/// rule of [`plan`].
fn differs(old: &Resource, wanted: &Resource) -> bool {
    let old_origin = &old.meta().origin;
    if old_origin.is_none() || matches!(old, Resource::HttpRoute(_)) {
        let mut adopted = wanted.clone();
        adopted.meta_mut().origin = old_origin.clone();
        return *old != adopted;
    }
    old != wanted
}

fn without_revision(resource: &Resource) -> Resource {
    let mut r = resource.clone();
    r.meta_mut().revision = 0;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_documents;

    const SET: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: blue, namespace: shop}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: green, namespace: shop}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: shop}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: blue, port: 80}]}]
"#;

    fn stored_as_the_state_machine_would(resources: &[Resource]) -> Stored {
        Stored {
            resources: resources
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let mut r = r.clone();
                    r.meta_mut().revision = 40 + i as u64;
                    r
                })
                .collect(),
            specless_routes: Vec::new(),
        }
    }

    #[test]
    fn an_unchanged_set_plans_nothing_whatever_the_revisions() {
        let desired = parse_documents("d", SET).unwrap();
        let stored = stored_as_the_state_machine_would(&desired);
        let p = plan(&desired, &stored);
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn new_and_changed_objects_are_applied_in_order_and_missing_ones_deleted() {
        let stored = stored_as_the_state_machine_would(&parse_documents("d", SET).unwrap());
        let changed = SET
            .replace("name: blue, port: 80", "name: green, port: 80")
            .replace("name: blue, namespace: shop", "name: teal, namespace: shop");
        let desired = parse_documents("d", &changed).unwrap();
        let p = plan(&desired, &stored);
        let applied: Vec<String> = p.apply.iter().map(|r| r.key().to_string()).collect();
        assert_eq!(applied, ["Service shop/teal", "HTTPRoute shop/app"]);
        assert!(p.apply.iter().all(|r| r.meta().revision == 0));
        let deleted: Vec<String> = p.delete.iter().map(|k| k.to_string()).collect();
        assert_eq!(deleted, ["Service shop/blue"]);
    }

    #[test]
    fn deletes_go_routes_first() {
        let stored = stored_as_the_state_machine_would(&parse_documents("d", SET).unwrap());
        let deleted: Vec<String> = plan(&[], &stored)
            .delete
            .iter()
            .map(|k| k.to_string())
            .collect();
        assert_eq!(
            deleted,
            [
                "HTTPRoute shop/app",
                "Service shop/blue",
                "Service shop/green"
            ]
        );
    }

    #[test]
    fn spec_less_routes_no_cluster_has_are_deleted_first() {
        let desired = parse_documents("d", SET).unwrap();
        let mut stored = stored_as_the_state_machine_would(&desired);
        let gone = ResourceKey {
            kind: switchyard_proto::model::Kind::HTTPRoute,
            name: switchyard_proto::model::ObjectName::new("shop", "abandoned"),
        };
        let kept = desired[2].key();
        stored.specless_routes = vec![gone.clone(), kept];
        let p = plan(&desired, &stored);
        assert_eq!(
            p.delete,
            vec![gone],
            "a spec-less route still desired stays"
        );
    }

    #[test]
    fn a_route_whose_name_changes_kind_is_a_kind_switch() {
        let desired = parse_documents("d", SET).unwrap();
        let grpc = SET.replace("kind: HTTPRoute", "kind: GRPCRoute");
        let stored = stored_as_the_state_machine_would(&parse_documents("d", &grpc).unwrap());
        let p = plan(&desired, &stored);
        let switched: Vec<String> = p.kind_switches().iter().map(|k| k.to_string()).collect();
        assert_eq!(switched, ["GRPCRoute shop/app"]);
        // An ordinary delete is none.
        let stored = stored_as_the_state_machine_would(&desired);
        assert!(plan(&[], &stored).kind_switches().is_empty());
    }

    #[test]
    fn an_origin_alone_changes_nothing_stored_without_one_nor_a_route() {
        let tagged = |origin: Option<&str>| -> Vec<Resource> {
            let mut set = parse_documents("set", SET).unwrap();
            for r in &mut set {
                r.meta_mut().origin = origin.map(str::to_string);
            }
            set
        };
        let legacy = stored_as_the_state_machine_would(&tagged(None));
        assert!(
            plan(&tagged(Some("east")), &legacy).is_empty(),
            "no upgrade churn"
        );
        let east = stored_as_the_state_machine_would(&tagged(Some("east")));
        let moved = plan(&tagged(Some("west")), &east);
        let keys: Vec<String> = moved.apply.iter().map(|r| r.key().to_string()).collect();
        assert!(!keys.is_empty(), "a Service or slice re-tagged is applied");
        assert!(
            moved
                .apply
                .iter()
                .all(|r| !matches!(r, Resource::HttpRoute(_))),
            "a route is not re-applied for its origin alone: {keys:?}"
        );
    }
}
