//! backendRefs: the weighted choice between them, and their validity as
//! the router needs it (the rules — known kind, existing Service and port,
//! cross-namespace references permitted by a ReferenceGrant — live in the
//! model's [`Topology`], shared with status).
//!
//! What a rule does with an invalid choice (answer 500) is the table's;
//! endpoints, health and warm-up belong to the upstream side.

use std::cell::RefCell;
use std::collections::BTreeSet;
use switchyard_proto::model::gateway_api::Topology;
use switchyard_proto::model::{BackendKey, BackendRef, HttpRoute, ObjectName};

/// Resolves backendRefs against a topology, and remembers which Services
/// it was asked about: a compiled route depends on exactly those (and on
/// the ReferenceGrants), which is what lets the next table reuse it.
pub(crate) struct BackendIndex<'t, 'a> {
    topology: &'t Topology<'a>,
    asked: RefCell<BTreeSet<ObjectName>>,
}

impl<'t, 'a> BackendIndex<'t, 'a> {
    /// Resolves against `topology`'s Services and ReferenceGrants.
    pub(crate) fn new(topology: &'t Topology<'a>) -> Self {
        BackendIndex {
            topology,
            asked: RefCell::default(),
        }
    }

    /// Resolves a backendRef of `route` to a Service port, or says why it
    /// is invalid (the reason ends up in logs and notes).
    pub(crate) fn resolve(&self, route: &HttpRoute, r: &BackendRef) -> Result<BackendKey, String> {
        let namespace = r.namespace.as_deref().unwrap_or(&route.meta.namespace);
        let service = r.stored_service().unwrap_or_else(|| r.name.clone());
        self.asked
            .borrow_mut()
            .insert(ObjectName::new(namespace, service));
        self.topology
            .resolve(route, r)
            .map_err(|why| format!("{why} ({})", why.reason()))
    }

    /// The Services asked about since the last call (one route's compile).
    pub(crate) fn take_asked(&self) -> BTreeSet<ObjectName> {
        std::mem::take(&mut self.asked.borrow_mut())
    }
}

/// Picks an index by weight with `random % total`. Weight 0 is never
/// picked; `None` when every weight is 0.
pub(crate) fn pick_weighted(
    weights: impl Iterator<Item = u32> + Clone,
    random: u64,
) -> Option<usize> {
    let total: u64 = weights.clone().map(u64::from).sum();
    if total == 0 {
        return None;
    }
    let mut point = random % total;
    for (i, w) in weights.enumerate() {
        let w = u64::from(w);
        if point < w {
            return Some(i);
        }
        point -= w;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_pick_uses_random_modulo_total() {
        let w = [7u32, 3, 0];
        let pick = |r| pick_weighted(w.iter().copied(), r);
        assert_eq!(pick(0), Some(0));
        assert_eq!(pick(6), Some(0));
        assert_eq!(pick(7), Some(1));
        assert_eq!(pick(9), Some(1));
        assert_eq!(pick(10), Some(0));
        // Weight 0 is never chosen, whatever the random number.
        assert!((0..1000).all(|r| pick(r) != Some(2)));
        assert_eq!(pick_weighted([0u32, 0].iter().copied(), 5), None);
    }
}
