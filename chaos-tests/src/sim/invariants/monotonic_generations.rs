//! Invariant 4 — monotonic generations.
//!
//! Proxy side: within one proxy incarnation, the generation a route is
//! served at never goes back, and a served route never stops being served
//! (the simulation never deletes routes). A restart starts from nothing —
//! that is the design's own model of a restarted proxy.
//!
//! Coordinator side: every coordinator that applies log index `i` reaches
//! exactly the state the first one reached at `i` (so all apply the same
//! sequence of commits), and along the log no route's active generation
//! ever decreases.

use super::{Check, Violation};
use std::collections::BTreeMap;
use switchyard_coordinator::state::ReplicatedState;
use switchyard_proto::model::ObjectName;

const NAME: &str = "invariant 4: monotonic generations";

/// What was served and what each log index produced.
#[derive(Debug, Default)]
pub struct MonotonicGenerations {
    served: BTreeMap<usize, BTreeMap<ObjectName, u64>>,
    /// State after index `i + 1`, as first computed.
    history: Vec<ReplicatedState>,
    /// Applies compared against the history.
    pub compared: u64,
}

impl MonotonicGenerations {
    /// Proxy `n` restarted.
    pub fn proxy_restarted(&mut self, n: usize) {
        self.served.remove(&n);
    }

    /// Proxy `n` now serves `generations`.
    pub fn on_guard(
        &mut self,
        n: usize,
        id: &str,
        generations: BTreeMap<ObjectName, u64>,
    ) -> Check {
        let held = self.served.entry(n).or_default();
        for (route, before) in held.iter() {
            let now = generations.get(route).copied();
            if now.is_none_or(|g| g < *before) {
                return Err(Violation {
                    invariant: NAME,
                    detail: format!(
                        "proxy {id}: {route} went back from generation {before} to {now:?}"
                    ),
                });
            }
        }
        *held = generations;
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
                if is.0 < was.0 {
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
