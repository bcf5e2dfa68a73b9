//! What users and the cluster around switchyard do: re-point a route (to
//! existing or brand-new backends, superseding whatever is pending), delete
//! a route and create it again, roll a backend's endpoints or delete its
//! slice, deliver a brand-new backend's Service only after the route that
//! uses it (as a live cluster watch may), and backends flapping.

use super::invariants::Check;
use super::run::Sim;
use super::world::World;
use switchyard_coordinator::state::{Command, CommandResponse};
use switchyard_proto::model::{Kind, ObjectName, Resource, ResourceKey};

/// A backend number no Service ever has: a route using it can never be
/// ready and must time out.
const MISSING_BACKEND: usize = 999;

impl Sim {
    /// A user re-points a random route.
    pub(super) fn route_change(&mut self) -> Check {
        if self.cluster.leader.is_none() {
            return Ok(());
        }
        let route = self.rng.index(self.config.routes);
        let refs = if self.rng.chance(150) { 2 } else { 1 };
        let mut resources: Vec<Resource> = Vec::new();
        let mut backends = Vec::new();
        for _ in 0..refs {
            let fresh =
                self.world.backends.len() < self.config.max_backends && self.rng.chance(300);
            let n = if fresh {
                let (n, created) = self.world.add_backend(&mut self.rng);
                if self.rng.chance(250) {
                    // Its Service and slice arrive later than the route.
                    self.held_back.push(created);
                } else {
                    resources.extend(created);
                }
                n
            } else {
                self.rng.index(self.world.backends.len())
            };
            backends.push((n, 1 + self.rng.range(0, 3) as u32));
        }
        if self.rng.chance(50) {
            // A weight-0 ref sends no traffic and must not be waited for.
            let n = self.rng.index(self.world.backends.len());
            backends.push((n, 0));
        }
        if self.rng.chance(30) {
            backends.push((MISSING_BACKEND, 1));
        }
        backends.sort();
        backends.dedup_by_key(|(n, _)| *n);
        resources.push(World::route(
            route,
            &backends,
            &mut self.rng,
            self.config.cutover_timeout_ms,
        ));
        self.stats.route_changes += 1;
        self.user_apply(resources).map(|_| ())
    }

    /// A user deletes a random route (a later change creates it again).
    pub(super) fn route_delete(&mut self) -> Check {
        if self.cluster.leader.is_none() {
            return Ok(());
        }
        let route = self.rng.index(self.config.routes);
        let key = ResourceKey {
            kind: Kind::HTTPRoute,
            name: ObjectName::new(super::world::NAMESPACE, format!("r{route}")),
        };
        self.stats.route_deletes += 1;
        self.append(Some(Command::Delete { keys: vec![key] }), None)
            .map(|_| ())
    }

    /// A backend's slice is deleted (its pods are gone); a later endpoint
    /// change brings a new one.
    pub(super) fn slice_delete(&mut self) -> Check {
        if self.cluster.leader.is_none() {
            return Ok(());
        }
        let n = self.rng.index(self.world.backends.len());
        if !self.world.backends[n].slice_present {
            return Ok(());
        }
        let key = self.world.slice(n).key();
        let response = self.append(Some(Command::Delete { keys: vec![key] }), None)?;
        if let Some(CommandResponse(Ok(outcome))) = response {
            self.world.note_slice_deleted(n, outcome.index);
            self.stats.slice_deletes += 1;
        }
        Ok(())
    }

    /// The oldest held-back Service and slice reach the store.
    pub(super) fn service_arrives(&mut self) -> Check {
        if self.held_back.is_empty() || self.cluster.leader.is_none() {
            return Ok(());
        }
        let resources = self.held_back.remove(0);
        self.stats.late_services += 1;
        self.user_apply(resources).map(|_| ())
    }

    /// A backend's endpoints change (a rollout): a new endpoint generation
    /// that proxies must warm again.
    pub(super) fn endpoint_change(&mut self) -> Check {
        if self.cluster.leader.is_none() {
            return Ok(());
        }
        let n = self.rng.index(self.world.backends.len());
        if self.world.backends[n].service_at.is_none() {
            // Still held back: its slice comes with its Service.
            return Ok(());
        }
        match self.world.change_endpoints(n, &mut self.rng) {
            Some(slice) => self.user_apply(vec![slice]).map(|_| ()),
            None => Ok(()),
        }
    }

    /// A flappy backend goes down or comes back.
    pub(super) fn flap(&mut self) {
        let flappy: Vec<usize> = (0..self.world.backends.len())
            .filter(|n| self.world.backends[*n].flappy)
            .collect();
        let Some(&n) = self.rng.pick(&flappy) else {
            return;
        };
        // Observe first: warmth that ends now was real until now.
        self.observe_all();
        let backend = &mut self.world.backends[n];
        backend.healthy = !backend.healthy;
        let line = format!(
            "b{n} {}",
            if backend.healthy {
                "recovers"
            } else {
                "goes down"
            }
        );
        self.note(line);
    }
}
