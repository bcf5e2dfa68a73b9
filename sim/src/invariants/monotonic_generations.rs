//! Invariant 4 — monotonic generations.
//!
//! Proxy side: within one proxy incarnation, the generation a route is
//! served at never goes back — not even across a delete and re-create of
//! the route (a proxy that missed the delete must see the new route as
//! newer) — and a served route stops being served only when the snapshot
//! it just took no longer holds it. A restart starts from nothing — that
//! is the design's own model of a restarted proxy.
//!
//! Coordinator side: every coordinator that applies log index `i` reaches
//! exactly the state the first one reached at `i` (so all apply the same
//! sequence of commits), and along the log no route's active generation
//! ever decreases while the route exists.

use super::{Check, Violation};
use std::collections::BTreeMap;
use switchyard_coordinator::state::ReplicatedState;
use switchyard_proto::model::{ConfigSnapshot, ObjectName};

const NAME: &str = "invariant 4: monotonic generations";

/// What was served and what each log index produced.
#[derive(Debug, Default)]
pub struct MonotonicGenerations {
    /// Per proxy: the highest generation each route was ever served at.
    served: BTreeMap<usize, BTreeMap<ObjectName, u64>>,
    /// Per proxy: what its previous guard run left it serving.
    last: BTreeMap<usize, BTreeMap<ObjectName, u64>>,
    /// State after index `i + 1`, as first computed.
    history: Vec<ReplicatedState>,
    /// Applies compared against the history.
    pub compared: u64,
}

impl MonotonicGenerations {
    /// Proxy `n` restarted.
    pub fn proxy_restarted(&mut self, n: usize) {
        self.served.remove(&n);
        self.last.remove(&n);
    }

    /// Proxy `n` now serves `generations`, after taking `snapshot`.
    pub fn on_guard(
        &mut self,
        n: usize,
        id: &str,
        snapshot: &ConfigSnapshot,
        generations: BTreeMap<ObjectName, u64>,
    ) -> Check {
        let fail = |detail: String| Violation {
            invariant: NAME,
            detail: format!("proxy {id}: {detail}"),
        };
        let before = self.last.remove(&n).unwrap_or_default();
        for route in before.keys() {
            let in_snapshot = snapshot.routes.iter().any(|r| &r.name == route);
            if in_snapshot && !generations.contains_key(route) {
                return Err(fail(format!(
                    "{route} stopped being served though the snapshot still holds it"
                )));
            }
        }
        let highest = self.served.entry(n).or_default();
        for (route, g) in &generations {
            let top = highest.entry(route.clone()).or_insert(*g);
            if g < top {
                return Err(fail(format!(
                    "{route} went back from generation {top} to {g}"
                )));
            }
            *top = *g;
        }
        self.last.insert(n, generations);
        Ok(())
    }

    /// Coordinator `c` applied log `index` and holds `state`.
    pub fn on_apply(&mut self, c: usize, index: u64, state: &ReplicatedState) -> Check {
        let fail = |detail: String| Violation {
            invariant: NAME,
            detail: format!("coordinator {c} at log index {index}: {detail}"),
        };
        let slot = usize::try_from(index)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .ok_or_else(|| fail("log indexes start at 1".into()))?;
        if let Some(reference) = self.history.get(slot) {
            self.compared += 1;
            if reference != state {
                return Err(fail(format!(
                    "state differs from the one first reached at this index: routes {:?} vs {:?}",
                    summary(state),
                    summary(reference)
                )));
            }
            return Ok(());
        }
        if slot != self.history.len() {
            return Err(fail(format!(
                "applied out of order: history holds {} entries",
                self.history.len()
            )));
        }
        if let Some(previous) = self.history.last() {
            for (route, was) in summary(previous) {
                let is = summary_of(state, &route);
                // A deleted route has no generation to go back from.
                if state.routes.contains_key(&route) && is.0 < was.0 {
                    return Err(fail(format!(
                        "{route} active generation went back from {} to {}",
                        was.0, is.0
                    )));
                }
            }
        }
        self.history.push(state.clone());
        Ok(())
    }
}

/// Route to (active, pending) generations.
fn summary(state: &ReplicatedState) -> BTreeMap<ObjectName, (u64, u64)> {
    state
        .routes
        .keys()
        .map(|name| (name.clone(), summary_of(state, name)))
        .collect()
}

fn summary_of(state: &ReplicatedState, route: &ObjectName) -> (u64, u64) {
    state.routes.get(route).map_or((0, 0), |r| {
        (
            r.active.as_ref().map_or(0, |a| a.generation),
            r.pending.as_ref().map_or(0, |p| p.target.generation),
        )
    })
}
