//! `ConfigDelta::between` and `ConfigSnapshot::apply_delta`: the round
//! trip on random pairs of canonical snapshots, and each refusal leaving
//! the snapshot untouched.

use super::*;
use crate::model::backend::{EndpointSlice, ReferenceGrant, Service};
use crate::model::gateway::{Gateway, GatewayClass, Namespace};
use crate::model::meta::ObjectMeta;
use crate::model::route::HttpRoute;
use crate::model::snapshot::RouteGeneration;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// One object present in a random snapshot: kind (0..7, 6 = route),
/// namespace and name (from small pools, so pairs share many), and a
/// "variant" that changes its content.
type Pick = (u8, u8, u8, u8);

fn meta(ns: u8, name: u8, variant: u8, cluster_scoped: bool) -> ObjectMeta {
    let mut meta = ObjectMeta::named(
        if cluster_scoped {
            String::new()
        } else {
            format!("ns{ns}")
        },
        format!("o{name}"),
    );
    meta.labels.insert("variant".into(), variant.to_string());
    meta
}

/// A canonical snapshot holding `picks` (the last pick of a key wins).
fn snapshot(version: u64, picks: &[Pick], generations: &[(u8, u64)]) -> ConfigSnapshot {
    let mut by_key: BTreeMap<(u8, u8, u8), u8> = BTreeMap::new();
    for &(kind, ns, name, variant) in picks {
        let kind = kind % 7;
        // Cluster-scoped kinds (GatewayClass, Namespace) have no namespace.
        let ns = if matches!(kind, 0 | 2) { 0 } else { ns % 2 };
        by_key.insert((kind, ns, name % 5), variant % 3);
    }
    let mut s = ConfigSnapshot {
        version,
        ..Default::default()
    };
    let mut resources = BTreeMap::new();
    for (&(kind, ns, name), &variant) in &by_key {
        let m = |scoped| meta(ns, name, variant, scoped);
        let resource = match kind {
            0 => Resource::GatewayClass(GatewayClass {
                meta: m(true),
                controller_name: format!("c{variant}"),
            }),
            1 => Resource::Gateway(Gateway {
                meta: m(false),
                gateway_class_name: "gc".into(),
                listeners: Vec::new(),
            }),
            2 => Resource::Namespace(Namespace { meta: m(true) }),
            3 => Resource::ReferenceGrant(ReferenceGrant {
                meta: m(false),
                from: Vec::new(),
                to: Vec::new(),
            }),
            4 => Resource::Service(Service {
                meta: m(false),
                ports: Vec::new(),
            }),
            5 => Resource::EndpointSlice(EndpointSlice {
                meta: m(false),
                address_type: "IPv4".into(),
                ports: Vec::new(),
                endpoints: Vec::new(),
                cluster: None,
            }),
            _ => {
                let spec = HttpRoute {
                    kind: Default::default(),
                    meta: m(false),
                    parent_refs: Vec::new(),
                    hostnames: Vec::new(),
                    rules: Vec::new(),
                };
                s.routes.push(RouteRecord {
                    name: spec.meta.object_name(),
                    active: Some(RouteGeneration {
                        generation: u64::from(variant) + 1,
                        spec,
                    }),
                    pending: None,
                    last_failure: None,
                    forced: variant == 2,
                    active_since: 0,
                });
                continue;
            }
        };
        resources.insert(resource.key(), resource);
    }
    // Filed in key order, as the coordinator builds snapshots.
    for resource in resources.into_values() {
        let _ = s.add(resource);
    }
    s.routes.sort_by(|a, b| a.name.cmp(&b.name));
    for &(service, generation) in generations {
        s.endpoint_generations.0.insert(
            ObjectName::new("ns0", format!("s{}", service % 6)),
            generation,
        );
    }
    s
}

fn picks() -> impl Strategy<Value = Vec<Pick>> {
    prop::collection::vec((0u8..7, 0u8..2, 0u8..5, 0u8..3), 0..40)
}

fn generations() -> impl Strategy<Value = Vec<(u8, u64)>> {
    prop::collection::vec((0u8..6, 1u64..4), 0..6)
}

proptest! {
    #[test]
    fn applying_the_delta_between_two_snapshots_gives_the_second(
        old in picks(), new in picks(), gens_old in generations(), gens_new in generations(),
    ) {
        let old = snapshot(10, &old, &gens_old);
        let new = snapshot(20, &new, &gens_new);
        let delta = ConfigDelta::between(&old, &new);
        let mut held = old.clone();
        held.apply_delta(&delta).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&held, &new);
        // The delta survives its own encoding.
        let json = serde_json::to_vec(&delta).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let decoded: ConfigDelta =
            serde_json::from_slice(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decoded, delta);
    }

    #[test]
    fn a_delta_names_only_what_changed(picks in picks(), gens in generations()) {
        let old = snapshot(10, &picks, &gens);
        let mut same = old.clone();
        same.version = 11;
        prop_assert!(ConfigDelta::between(&old, &same).is_empty());
    }
}

#[test]
fn a_delta_on_another_version_is_refused_and_changes_nothing() {
    let old = snapshot(10, &[(4, 0, 1, 0)], &[]);
    let new = snapshot(20, &[(4, 0, 1, 1)], &[]);
    let delta = ConfigDelta::between(&old, &new);
    let mut held = snapshot(11, &[(4, 0, 1, 0)], &[]);
    let before = held.clone();
    assert_eq!(
        held.apply_delta(&delta),
        Err(DeltaError::WrongBase {
            held: 11,
            base: 10,
            version: 20
        })
    );
    assert_eq!(held, before);
}

#[test]
fn a_delta_removing_what_is_not_held_is_refused_and_changes_nothing() {
    // The holder diverged: it lacks the Service the delta removes, while
    // the delta would also change a slice it has.
    let mut delta = ConfigDelta::between(
        &snapshot(10, &[(5, 0, 1, 0)], &[]),
        &snapshot(20, &[(5, 0, 1, 1)], &[]),
    );
    delta.removed.push(ResourceKey {
        kind: Kind::Service,
        name: ObjectName::new("ns0", "o3"),
    });
    let mut held = snapshot(10, &[(5, 0, 1, 0)], &[]);
    let before = held.clone();
    let refused = held.apply_delta(&delta);
    assert!(
        matches!(&refused, Err(DeltaError::NotHeld { what, .. }) if what == "ns0/o3"),
        "{refused:?}"
    );
    assert_eq!(held, before);
}

#[test]
fn a_route_sent_as_a_resource_or_twice_is_refused() {
    let base = snapshot(10, &[], &[]);
    let route = snapshot(20, &[(6, 0, 1, 0)], &[]).routes.remove(0);
    let spec = route.active.as_ref().map(|a| a.spec.clone());
    let mut as_resource = ConfigDelta {
        base_version: 10,
        version: 20,
        ..Default::default()
    };
    as_resource.upserted.extend(spec.map(Resource::HttpRoute));
    assert!(matches!(
        base.clone().apply_delta(&as_resource),
        Err(DeltaError::RouteAsResource { .. })
    ));
    let twice = ConfigDelta {
        base_version: 10,
        version: 20,
        routes: vec![route.clone(), route],
        ..Default::default()
    };
    assert!(matches!(
        base.clone().apply_delta(&twice),
        Err(DeltaError::Duplicate { .. })
    ));
    let backwards = ConfigDelta {
        base_version: 10,
        version: 10,
        ..Default::default()
    };
    assert!(matches!(
        base.clone().apply_delta(&backwards),
        Err(DeltaError::Backwards { .. })
    ));
}
