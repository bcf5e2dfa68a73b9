//! [`ConfigSnapshot::apply_delta`]: all or nothing — every check runs
//! before the first change, so a refused delta leaves the snapshot's
//! content as it was (a list that was not sorted may come back sorted).

use super::{ConfigDelta, DeltaError, Keyed};
use crate::model::meta::{Kind, ObjectName};
use crate::model::resource::Resource;
use crate::model::snapshot::{ConfigSnapshot, RouteRecord};
use std::collections::{BTreeMap, BTreeSet};

/// What a delta does to one list: whole objects to put, names to drop.
struct Patch<'a, T> {
    upsert: BTreeMap<ObjectName, &'a T>,
    remove: BTreeSet<ObjectName>,
}

impl<T> Default for Patch<'_, T> {
    fn default() -> Self {
        Patch {
            upsert: BTreeMap::new(),
            remove: BTreeSet::new(),
        }
    }
}

/// The patches of every resource kind (HTTPRoutes apart).
#[derive(Default)]
struct Plan<'a> {
    resources: BTreeMap<Kind, Patch<'a, Resource>>,
    routes: Patch<'a, RouteRecord>,
}

impl ConfigSnapshot {
    /// Applies `delta`, which must be based on exactly this snapshot's
    /// version; afterwards `self.version == delta.version`.
    ///
    /// Refused, with nothing changed: a delta on another version (a holder
    /// that missed one), one that does not move forward, one that names an
    /// object twice, sends an HTTPRoute as a plain resource, or removes
    /// something this snapshot does not hold (the holder diverged from the
    /// sender). The caller then needs a full snapshot.
    ///
    /// Lists the delta touches come out sorted by `namespace/name` (see the
    /// module header); lists it does not touch are left as they are. Cost:
    /// O(n + c log c) per touched list of n objects with c changes.
    pub fn apply_delta(&mut self, delta: &ConfigDelta) -> Result<(), DeltaError> {
        let version = delta.version;
        if self.version != delta.base_version {
            return Err(DeltaError::WrongBase {
                held: self.version,
                base: delta.base_version,
                version,
            });
        }
        if version <= delta.base_version {
            return Err(DeltaError::Backwards {
                base: delta.base_version,
                version,
            });
        }
        let plan = Plan::of(delta)?;
        for (kind, patch) in &plan.resources {
            self.with_list(*kind, patch, false, version)?;
        }
        prepare(&mut self.routes, &plan.routes.remove, version)?;
        for name in &delta.endpoint_generations_removed {
            if !self.endpoint_generations.0.contains_key(name) {
                return Err(DeltaError::NotHeld {
                    version,
                    what: format!("the endpoint generation of {name}"),
                });
            }
        }
        // Every check passed: from here on nothing fails.
        for (kind, patch) in &plan.resources {
            self.with_list(*kind, patch, true, version)?;
        }
        let routes = plan.routes.upsert.values().map(|r| (*r).clone()).collect();
        merge(&mut self.routes, routes, &plan.routes.remove);
        let generations = &mut self.endpoint_generations.0;
        for name in &delta.endpoint_generations_removed {
            generations.remove(name);
        }
        for (name, generation) in &delta.endpoint_generations {
            generations.insert(name.clone(), *generation);
        }
        self.version = version;
        Ok(())
    }

    /// Checks (`apply` false) or applies (`apply` true) `patch` on the list
    /// of `kind`.
    fn with_list(
        &mut self,
        kind: Kind,
        patch: &Patch<'_, Resource>,
        apply: bool,
        version: u64,
    ) -> Result<(), DeltaError> {
        macro_rules! on {
            ($list:expr, $variant:ident) => {
                on_list(&mut $list, patch, apply, version, |r| match r {
                    Resource::$variant(o) => Some(o),
                    _ => None,
                })
            };
        }
        match kind {
            Kind::GatewayClass => on!(self.gateway_classes, GatewayClass),
            Kind::Gateway => on!(self.gateways, Gateway),
            Kind::ReferenceGrant => on!(self.reference_grants, ReferenceGrant),
            Kind::Namespace => on!(self.namespaces, Namespace),
            Kind::Service => on!(self.services, Service),
            Kind::EndpointSlice => on!(self.endpoint_slices, EndpointSlice),
            Kind::Secret => on!(self.secrets, Secret),
            Kind::ConfigMap => on!(self.config_maps, ConfigMap),
            Kind::BackendTLSPolicy => on!(self.backend_tls_policies, BackendTlsPolicy),
            // `Plan::of` files routes apart.
            Kind::HTTPRoute | Kind::GRPCRoute => Ok(()),
        }
    }
}

impl<'a> Plan<'a> {
    /// Groups `delta` by list, refusing duplicates and routes sent as
    /// resources.
    fn of(delta: &'a ConfigDelta) -> Result<Plan<'a>, DeltaError> {
        let version = delta.version;
        let duplicate = |what: String| DeltaError::Duplicate { version, what };
        let mut plan = Plan::default();
        for resource in &delta.upserted {
            let key = resource.key();
            if key.kind.is_route() {
                return Err(DeltaError::RouteAsResource {
                    version,
                    name: key.name,
                });
            }
            let patch = plan.resources.entry(key.kind).or_default();
            if patch.upsert.insert(key.name.clone(), resource).is_some() {
                return Err(duplicate(key.to_string()));
            }
        }
        for route in &delta.routes {
            if plan
                .routes
                .upsert
                .insert(route.name.clone(), route)
                .is_some()
            {
                return Err(duplicate(format!("HTTPRoute {}", route.name)));
            }
        }
        for key in &delta.removed {
            let (upserted, removed) = if key.kind.is_route() {
                let p = &mut plan.routes;
                (p.upsert.contains_key(&key.name), &mut p.remove)
            } else {
                let p = plan.resources.entry(key.kind).or_default();
                (p.upsert.contains_key(&key.name), &mut p.remove)
            };
            if upserted || !removed.insert(key.name.clone()) {
                return Err(duplicate(key.to_string()));
            }
        }
        Ok(plan)
    }
}

/// Checks or applies one resource kind's patch on its list.
fn on_list<T: Keyed + Clone>(
    list: &mut Vec<T>,
    patch: &Patch<'_, Resource>,
    apply: bool,
    version: u64,
    unwrap: fn(&Resource) -> Option<&T>,
) -> Result<(), DeltaError> {
    if !apply {
        return prepare(list, &patch.remove, version);
    }
    // `Plan::of` filed each resource under its own kind, so `unwrap`
    // always matches.
    let upserts = patch
        .upsert
        .values()
        .filter_map(|r| unwrap(r).cloned())
        .collect();
    merge(list, upserts, &patch.remove);
    Ok(())
}

/// Sorts `list` if it is not (a canonical snapshot already is) and checks
/// that every name in `remove` is held.
fn prepare<T: Keyed>(
    list: &mut [T],
    remove: &BTreeSet<ObjectName>,
    version: u64,
) -> Result<(), DeltaError> {
    if !list.is_sorted_by(|a, b| a.key() <= b.key()) {
        list.sort_by(|a, b| a.key().cmp(&b.key()));
    }
    for name in remove {
        let wanted = (name.namespace.as_str(), name.name.as_str());
        if list.binary_search_by(|o| o.key().cmp(&wanted)).is_err() {
            return Err(DeltaError::NotHeld {
                version,
                what: name.to_string(),
            });
        }
    }
    Ok(())
}

/// Merges `upserts` (sorted by name, as a `BTreeMap` yields them) into the
/// sorted `list`, replacing objects of the same name, and drops `remove`.
fn merge<T: Keyed>(list: &mut Vec<T>, upserts: Vec<T>, remove: &BTreeSet<ObjectName>) {
    if upserts.is_empty() && remove.is_empty() {
        return;
    }
    let remove: BTreeSet<(&str, &str)> = remove
        .iter()
        .map(|n| (n.namespace.as_str(), n.name.as_str()))
        .collect();
    let old = std::mem::take(list);
    let mut out = Vec::with_capacity(old.len() + upserts.len());
    let mut upserts = upserts.into_iter().peekable();
    for o in old {
        while let Some(u) = upserts.next_if(|u| u.key() < o.key()) {
            out.push(u);
        }
        if let Some(u) = upserts.next_if(|u| u.key() == o.key()) {
            out.push(u);
        } else if !remove.contains(&o.key()) {
            out.push(o);
        }
    }
    out.extend(upserts);
    *list = out;
}
