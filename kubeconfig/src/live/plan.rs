//! [`plan`]: what the leader must apply and delete so the stored state
//! equals the desired one.
//!
//! It deliberately does not apply anything, and does not know where the
//! stored set comes from: the caller passes what the state machine holds.

use super::merge::{apply_order, kind_rank};
use std::collections::BTreeMap;
use switchyard_proto::model::{Resource, ResourceKey};

/// Diffs `desired` (from the clusters) against `stored` (the replicated
/// state: for routes, the newest spec, pending if any, else active).
///
/// Returns the resources to apply — new or changed, compared ignoring
/// `meta.revision`, which the state machine stamps — in apply order
/// (Namespaces first, routes last), and the keys to delete — stored but no
/// longer desired — routes first, so no route is left pointing at a
/// Service deleted before it. Apply first, then delete: a route moved from
/// Service A to B and A deleted in one change then never points nowhere.
///
/// Everything stored that is not desired is deleted: a coordinator fed by
/// live clusters treats them as the whole truth, including over objects
/// applied by hand with `switchyard apply`.
pub fn plan(desired: &[Resource], stored: &[Resource]) -> (Vec<Resource>, Vec<ResourceKey>) {
    let stored: BTreeMap<ResourceKey, Resource> = stored
        .iter()
        .map(|r| (r.key(), without_revision(r)))
        .collect();
    let mut desired_keys = std::collections::BTreeSet::new();
    let mut to_apply: Vec<Resource> = Vec::new();
    for resource in desired {
        let key = resource.key();
        let wanted = without_revision(resource);
        if stored.get(&key) != Some(&wanted) {
            to_apply.push(wanted);
        }
        desired_keys.insert(key);
    }
    to_apply.sort_by_key(apply_order);
    let mut to_delete: Vec<ResourceKey> = stored
        .into_keys()
        .filter(|k| !desired_keys.contains(k))
        .collect();
    to_delete.sort_by_key(|k| (std::cmp::Reverse(kind_rank(k.kind)), k.name.clone()));
    (to_apply, to_delete)
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

    fn stored_as_the_state_machine_would(resources: &[Resource]) -> Vec<Resource> {
        resources
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut r = r.clone();
                r.meta_mut().revision = 40 + i as u64;
                r
            })
            .collect()
    }

    #[test]
    fn an_unchanged_set_plans_nothing_whatever_the_revisions() {
        let desired = parse_documents("d", SET).unwrap();
        let stored = stored_as_the_state_machine_would(&desired);
        let (apply, delete) = plan(&desired, &stored);
        assert!(apply.is_empty(), "{apply:?}");
        assert!(delete.is_empty(), "{delete:?}");
    }

    #[test]
    fn new_and_changed_objects_are_applied_in_order_and_missing_ones_deleted() {
        let stored = stored_as_the_state_machine_would(&parse_documents("d", SET).unwrap());
        let changed = SET
            .replace("name: blue, port: 80", "name: green, port: 80")
            .replace("name: blue, namespace: shop", "name: teal, namespace: shop");
        let desired = parse_documents("d", &changed).unwrap();
        let (apply, delete) = plan(&desired, &stored);
        let applied: Vec<String> = apply.iter().map(|r| r.key().to_string()).collect();
        assert_eq!(applied, ["Service shop/teal", "HTTPRoute shop/app"]);
        assert!(apply.iter().all(|r| r.meta().revision == 0));
        let deleted: Vec<String> = delete.iter().map(|k| k.to_string()).collect();
        assert_eq!(deleted, ["Service shop/blue"]);
    }

    #[test]
    fn deletes_go_routes_first() {
        let stored = stored_as_the_state_machine_would(&parse_documents("d", SET).unwrap());
        let (_, delete) = plan(&[], &stored);
        let deleted: Vec<String> = delete.iter().map(|k| k.to_string()).collect();
        assert_eq!(
            deleted,
            [
                "HTTPRoute shop/app",
                "Service shop/blue",
                "Service shop/green"
            ]
        );
    }
}
