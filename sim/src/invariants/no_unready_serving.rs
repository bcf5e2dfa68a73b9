//! Invariant 3 — no unready serving.
//!
//! Checked at every guard run, against the simulated data plane (ground
//! truth): every route whose served generation moved must be listed as
//! applied; an applied generation not listed as `forced` must have every
//! backend it sends traffic to really warm on this proxy right then; a
//! forced one is allowed only once the local wait limit has run out since
//! this proxy incarnation first saw that generation committed. Forced
//! applies are counted separately.
//!
//! Deliberately not checked: a backend that goes unhealthy *after* the
//! apply (that is the data plane's outlier handling, not a cutover).

use super::{Check, Violation};
use crate::proxy::SimProxy;
use crate::world::World;
use std::collections::BTreeMap;
use switchyard_proto::model::{ConfigSnapshot, ObjectName};
use switchyard_proxy::control::guard::GuardReport;

const NAME: &str = "invariant 3: no unready serving";

/// Per proxy incarnation: when each committed generation was first seen.
#[derive(Debug, Default)]
pub struct NoUnreadyServing {
    first_seen: BTreeMap<(usize, ObjectName, u64), u64>,
    /// Applies with every backend warm.
    pub warm_applies: u64,
    /// Applies through the local wait limit.
    pub forced_applies: u64,
}

impl NoUnreadyServing {
    /// Proxy `n` restarted.
    pub fn proxy_restarted(&mut self, n: usize) {
        self.first_seen.retain(|(p, _, _), _| *p != n);
    }

    /// Checks one guard run of proxy `n` on `snapshot`; `before` is what it
    /// served just before.
    #[allow(clippy::too_many_arguments)]
    pub fn on_guard(
        &mut self,
        n: usize,
        before: &BTreeMap<ObjectName, u64>,
        proxy: &SimProxy,
        snapshot: &ConfigSnapshot,
        report: &GuardReport,
        world: &World,
        now_ms: u64,
        wait_limit_ms: u64,
    ) -> Check {
        let fail = |detail: String| Violation {
            invariant: NAME,
            detail: format!("proxy {}: {detail}", proxy.id),
        };
        for record in &snapshot.routes {
            if let Some(active) = &record.active
                && active.generation > before.get(&record.name).copied().unwrap_or(0)
            {
                self.first_seen
                    .entry((n, record.name.clone(), active.generation))
                    .or_insert(now_ms);
            }
        }
        let after = proxy.guard.generations();
        for (route, generation) in &after {
            if before.get(route) != Some(generation)
                && !report.applied.contains(&(route.clone(), *generation))
            {
                return Err(fail(format!(
                    "{route} moved to generation {generation} without the guard reporting it"
                )));
            }
        }
        for (route, generation) in &report.applied {
            let spec = snapshot
                .routes
                .iter()
                .find(|r| &r.name == route)
                .and_then(|r| r.active.as_ref())
                .filter(|a| a.generation == *generation)
                .ok_or_else(|| {
                    fail(format!(
                        "applied {route} generation {generation}, which the snapshot does not hold as active"
                    ))
                })?;
            let cold: Vec<String> = spec
                .spec
                .traffic_backends()
                .iter()
                .filter(|b| !proxy.is_warm(snapshot, b, world, now_ms))
                .map(|b| {
                    let has = proxy.readiness(b, world, now_ms);
                    format!(
                        "{b} (needs endpoints {:?}, has {has:?})",
                        snapshot.endpoint_generation(b)
                    )
                })
                .collect();
            if report.forced.contains(&(route.clone(), *generation)) {
                self.forced_applies += 1;
                let seen = self
                    .first_seen
                    .get(&(n, route.clone(), *generation))
                    .copied()
                    .unwrap_or(now_ms);
                if now_ms.saturating_sub(seen) < wait_limit_ms {
                    return Err(fail(format!(
                        "forced {route} generation {generation} after {}ms, before the {wait_limit_ms}ms wait limit",
                        now_ms.saturating_sub(seen)
                    )));
                }
            } else if cold.is_empty() {
                self.warm_applies += 1;
            } else {
                return Err(fail(format!(
                    "routes {route} by generation {generation} (not forced) while not warm: {}",
                    cold.join(", ")
                )));
            }
        }
        Ok(())
    }
}
