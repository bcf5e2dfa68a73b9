//! [`ConfigDelta`]: what changed between two configuration versions — the
//! unit coordinators journal once per change and stream to every proxy
//! that accepts deltas — with [`ConfigDelta::between`] to compute one and
//! [`ConfigSnapshot::apply_delta`] to apply one.
//!
//! Owns: the delta's shape (resources and route records upserted, keys
//! removed, endpoint generations changed or removed, the `base_version` it
//! applies on), the sorted merge-walk that computes it between two
//! snapshots ([`diff_sorted`]; the coordinator diffs its state machine's
//! persistent maps instead, skipping what they share) and its
//! all-or-nothing application. Does not own: encoding, chunking or the
//! journal of recent deltas (the coordinator's), nor assembling chunks
//! (the proxy's).
//!
//! A snapshot is *canonical* when each of its lists is sorted by
//! `namespace/name` without duplicates, as coordinators build them (their
//! state is kept in sorted maps). [`ConfigSnapshot::apply_delta`] keeps a
//! snapshot canonical (it sorts a list it touches that was not), so
//! `old.apply_delta(&ConfigDelta::between(&old, &new))` gives `new` for
//! any canonical `new`.
//!
//! Cost: computing a delta is one merge-walk, O(R) comparisons for R
//! objects; applying one rebuilds only the lists it touches, O(R + C log C)
//! for a change of C objects.

use super::backend::{EndpointSlice, ReferenceGrant, Service};
use super::backend_tls::{BackendTlsPolicy, ConfigMap};
use super::gateway::{Gateway, GatewayClass, Namespace};
use super::meta::{Kind, ObjectName, ResourceKey};
use super::pairs;
use super::resource::Resource;
use super::secret::Secret;
use super::snapshot::{ConfigSnapshot, RouteRecord};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// The changes that turn the configuration at `base_version` into the one
/// at `version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ConfigDelta {
    /// The version this delta applies on: the holder must be at exactly
    /// this version.
    pub base_version: u64,
    /// The version the configuration is at once the delta is applied.
    pub version: u64,
    /// Resources other than HTTPRoutes that were created or changed, whole.
    #[serde(default)]
    pub upserted: Vec<Resource>,
    /// Route records that were created or changed, whole.
    #[serde(default)]
    pub routes: Vec<RouteRecord>,
    /// Keys removed (routes of either kind under `Kind::HTTPRoute`: route
    /// records are keyed by `namespace/name` alone).
    #[serde(default)]
    pub removed: Vec<ResourceKey>,
    /// Endpoint generations that appeared or changed.
    #[serde(default, with = "pairs")]
    pub endpoint_generations: BTreeMap<ObjectName, u64>,
    /// Services whose endpoint generation is gone.
    #[serde(default)]
    pub endpoint_generations_removed: Vec<ObjectName>,
}

/// Why a delta was not applied. The snapshot's content is unchanged when
/// one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeltaError {
    /// The delta applies on another version than the one held.
    #[error("delta {base}→{version} does not apply on version {held}")]
    WrongBase {
        /// The version held.
        held: u64,
        /// The delta's base.
        base: u64,
        /// The delta's target version.
        version: u64,
    },
    /// The delta goes backwards.
    #[error("delta {base}→{version} does not move forward")]
    Backwards {
        /// The delta's base.
        base: u64,
        /// The delta's target version.
        version: u64,
    },
    /// An HTTPRoute among `upserted`: routes travel as records.
    #[error("delta to version {version}: HTTPRoute {name} sent as a resource, not a route record")]
    RouteAsResource {
        /// The delta's target version.
        version: u64,
        /// The route.
        name: ObjectName,
    },
    /// The delta removes something the holder does not have: the holder
    /// diverged from the sender.
    #[error("delta to version {version} removes {what}, which is not held")]
    NotHeld {
        /// The delta's target version.
        version: u64,
        /// The key (or `endpoint generation of ns/name`).
        what: String,
    },
    /// The same object appears twice in the delta.
    #[error("delta to version {version} names {what} twice")]
    Duplicate {
        /// The delta's target version.
        version: u64,
        /// The key.
        what: String,
    },
}

/// Walks two sequences sorted by key (ascending, unique) in step and
/// reports every key of `new` whose value is absent from or different in
/// `old` (`upsert`), and every key of `old` absent from `new` (`remove`).
/// O(|old| + |new|) comparisons; allocates nothing.
pub fn diff_sorted<'a, K: Ord, V: PartialEq + 'a>(
    old: impl IntoIterator<Item = (K, &'a V)>,
    new: impl IntoIterator<Item = (K, &'a V)>,
    mut upsert: impl FnMut(K, &'a V),
    mut remove: impl FnMut(K),
) {
    let mut old = old.into_iter().peekable();
    let mut new = new.into_iter().peekable();
    loop {
        let order = match (old.peek(), new.peek()) {
            (None, None) => return,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((o, _)), Some((n, _))) => o.cmp(n),
        };
        match order {
            Ordering::Less => {
                if let Some((k, _)) = old.next() {
                    remove(k);
                }
            }
            Ordering::Greater => {
                if let Some((k, v)) = new.next() {
                    upsert(k, v);
                }
            }
            Ordering::Equal => {
                if let (Some((_, o)), Some((k, n))) = (old.next(), new.next())
                    && o != n
                {
                    upsert(k, n);
                }
            }
        }
    }
}

impl ConfigDelta {
    /// Whether nothing a proxy sees changed (only the version moved).
    pub fn is_empty(&self) -> bool {
        self.upserted.is_empty()
            && self.routes.is_empty()
            && self.removed.is_empty()
            && self.endpoint_generations.is_empty()
            && self.endpoint_generations_removed.is_empty()
    }

    /// The delta from `old` to `new` (`old.version` → `new.version`). The
    /// lists need not be sorted; each is sorted here, O(R log R) — the
    /// coordinator diffs its state machine's persistent maps instead.
    pub fn between(old: &ConfigSnapshot, new: &ConfigSnapshot) -> ConfigDelta {
        let mut delta = ConfigDelta {
            base_version: old.version,
            version: new.version,
            ..Default::default()
        };
        delta.diff_kind(
            Kind::GatewayClass,
            &old.gateway_classes,
            &new.gateway_classes,
            Resource::GatewayClass,
        );
        delta.diff_kind(
            Kind::Gateway,
            &old.gateways,
            &new.gateways,
            Resource::Gateway,
        );
        delta.diff_kind(
            Kind::Namespace,
            &old.namespaces,
            &new.namespaces,
            Resource::Namespace,
        );
        delta.diff_kind(
            Kind::ReferenceGrant,
            &old.reference_grants,
            &new.reference_grants,
            Resource::ReferenceGrant,
        );
        delta.diff_kind(
            Kind::Service,
            &old.services,
            &new.services,
            Resource::Service,
        );
        delta.diff_kind(
            Kind::EndpointSlice,
            &old.endpoint_slices,
            &new.endpoint_slices,
            Resource::EndpointSlice,
        );
        delta.diff_kind(Kind::Secret, &old.secrets, &new.secrets, Resource::Secret);
        delta.diff_kind(
            Kind::ConfigMap,
            &old.config_maps,
            &new.config_maps,
            Resource::ConfigMap,
        );
        delta.diff_kind(
            Kind::BackendTLSPolicy,
            &old.backend_tls_policies,
            &new.backend_tls_policies,
            Resource::BackendTlsPolicy,
        );
        diff_sorted(
            sorted(&old.routes),
            sorted(&new.routes),
            |_, r| delta.routes.push(r.clone()),
            |(namespace, name)| {
                delta.removed.push(ResourceKey {
                    kind: Kind::HTTPRoute,
                    name: ObjectName::new(namespace, name),
                })
            },
        );
        diff_sorted(
            old.endpoint_generations.0.iter(),
            new.endpoint_generations.0.iter(),
            |name, generation| {
                delta.endpoint_generations.insert(name.clone(), *generation);
            },
            |name| delta.endpoint_generations_removed.push(name.clone()),
        );
        delta
    }

    fn diff_kind<T: Keyed + PartialEq + Clone>(
        &mut self,
        kind: Kind,
        old: &[T],
        new: &[T],
        wrap: fn(T) -> Resource,
    ) {
        diff_sorted(
            sorted(old),
            sorted(new),
            |_, o| self.upserted.push(wrap(o.clone())),
            |(namespace, name)| {
                self.removed.push(ResourceKey {
                    kind,
                    name: ObjectName::new(namespace, name),
                })
            },
        );
    }
}

/// `list` as `(key, object)` pairs sorted by key.
fn sorted<T: Keyed>(list: &[T]) -> Vec<((&str, &str), &T)> {
    let mut v: Vec<_> = list.iter().map(|o| (o.key(), o)).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// An object's `(namespace, name)`, the order canonical lists are sorted
/// in (the same as [`ObjectName`]'s).
pub(crate) trait Keyed {
    /// `(namespace, name)`.
    fn key(&self) -> (&str, &str);
}

macro_rules! keyed_by_meta {
    ($($t:ty),*) => {$(
        impl Keyed for $t {
            fn key(&self) -> (&str, &str) {
                (self.meta.namespace.as_str(), self.meta.name.as_str())
            }
        }
    )*};
}

keyed_by_meta!(
    GatewayClass,
    Gateway,
    Namespace,
    ReferenceGrant,
    Service,
    EndpointSlice,
    Secret,
    ConfigMap,
    BackendTlsPolicy
);

impl Keyed for RouteRecord {
    fn key(&self) -> (&str, &str) {
        (self.name.namespace.as_str(), self.name.name.as_str())
    }
}

mod apply;

#[cfg(test)]
mod tests;
