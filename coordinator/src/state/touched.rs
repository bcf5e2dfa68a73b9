//! Which keys of the replicated state an apply touched: the by-product the
//! store persists per object, so an apply batch writes what changed and not
//! the whole state.
//!
//! Owns: [`Touched`], the set of resource keys, route names, proxy ids and
//! Service names (endpoint generations) that `apply` may have changed since
//! the store last drained it. Does not own: what the keys now hold — the
//! store reads each touched key back from the state (present: write it,
//! absent: delete it), so "upserted or removed" is decided by the state
//! itself and a recorded key that did not really change costs one rewrite,
//! never a wrong value.
//!
//! The recorder is not part of the state: it is never serialised, it does
//! not take part in equality, and `apply` only ever adds to it, so it cannot
//! change what `apply` decides (purity and determinism are untouched).

use std::collections::BTreeSet;
use switchyard_proto::model::{ObjectName, ResourceKey};

/// Keys touched since the last [`Touched::take`].
#[derive(Debug, Clone, Default)]
pub struct Touched {
    /// Stored resources (every kind but HTTPRoute).
    pub resources: BTreeSet<ResourceKey>,
    /// Route records.
    pub routes: BTreeSet<ObjectName>,
    /// Registered proxies, by id.
    pub proxies: BTreeSet<String>,
    /// Services whose endpoint generation moved.
    pub endpoint_generations: BTreeSet<ObjectName>,
}

impl Touched {
    pub(crate) fn resource(&mut self, key: &ResourceKey) {
        self.resources.insert(key.clone());
    }

    pub(crate) fn route(&mut self, name: &ObjectName) {
        self.routes.insert(name.clone());
    }

    pub(crate) fn proxy(&mut self, id: &str) {
        self.proxies.insert(id.to_owned());
    }

    pub(crate) fn endpoint_generation(&mut self, service: &ObjectName) {
        self.endpoint_generations.insert(service.clone());
    }

    /// How many keys are recorded.
    pub fn len(&self) -> usize {
        self.resources.len()
            + self.routes.len()
            + self.proxies.len()
            + self.endpoint_generations.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands over what was recorded and starts afresh.
    pub fn take(&mut self) -> Touched {
        std::mem::take(self)
    }
}

/// Not part of the state: two states that hold the same objects are equal
/// whatever their recorders saw.
impl PartialEq for Touched {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for Touched {}
