//! Invariant 8 — a generation names one spec, forever.
//!
//! Checked after every apply on every coordinator: each route's active and
//! pending generation must name the same spec it named the first time the
//! run saw that (route, generation) — across withdraws, abandons, deletes
//! and re-creates of the route, restarts and replays. The record is never
//! cleared, so a number handed out twice shows however far apart the two
//! uses are.

use super::{Check, Violation};
use std::collections::BTreeMap;
use switchyard_coordinator::state::ReplicatedState;
use switchyard_proto::model::{HttpRoute, ObjectName};

const NAME: &str = "invariant 8: a generation names one spec";

/// Every (route, generation) seen, with its spec.
#[derive(Debug, Default)]
pub struct GenerationNamesOneSpec {
    specs: BTreeMap<(ObjectName, u64), HttpRoute>,
    /// Generations checked against an earlier sighting.
    pub compared: u64,
}

impl GenerationNamesOneSpec {
    /// Coordinator `c` applied log `index` and holds `state`.
    pub fn on_apply(&mut self, c: usize, index: u64, state: &ReplicatedState) -> Check {
        for (name, record) in &state.routes {
            let generations = record
                .active
                .iter()
                .chain(record.pending.iter().map(|p| &p.target));
            for generation in generations {
                // The stored spec carries the revision of the apply that
                // made it; the spec proper is everything else.
                let mut spec = generation.spec.clone();
                spec.meta.revision = 0;
                let key = (name.clone(), generation.generation);
                match self.specs.get(&key) {
                    Some(first) if *first != spec => {
                        return Err(Violation {
                            invariant: NAME,
                            detail: format!(
                                "coordinator {c} at log index {index}: {name} generation {} names {:?}, but first named {:?}",
                                generation.generation,
                                backends(&spec),
                                backends(first)
                            ),
                        });
                    }
                    Some(_) => self.compared += 1,
                    None => {
                        self.specs.insert(key, spec);
                    }
                }
            }
        }
        Ok(())
    }
}

/// A spec's backends and annotations, enough to tell two specs apart in a
/// message.
fn backends(spec: &HttpRoute) -> Vec<String> {
    spec.rules
        .iter()
        .flat_map(|r| &r.backend_refs)
        .map(|b| format!("{}:{}", b.name, b.weight))
        .chain(spec.meta.annotations.values().cloned())
        .collect()
}
