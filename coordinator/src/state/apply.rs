//! [`ReplicatedState::apply`]: the one mutator.
//!
//! Every command is checked completely before anything changes, so a
//! rejected command leaves the state exactly as it was. Applies are checked
//! against the store-wide limits they carry; deletes never are, so an
//! operator can always shrink the store. The leader's decisions are checked
//! against their fence (`super::fence`). In debug builds the state's
//! invariants are re-checked after every apply.

use super::*;
use std::collections::BTreeSet;
use switchyard_proto::model::{
    CutoverSettings, HttpRoute, Kind, RouteGeneration, Transition, ValidationRules,
    validate_resource_with,
};

impl ReplicatedState {
    /// Applies the log entry at `at`. Total: never panics; a rejected
    /// command changes nothing but the applied position, which always
    /// advances (the entry was applied; its answer was "no").
    pub fn apply(&mut self, at: LogPosition, command: &Command) -> CommandResponse {
        self.note_entry(at);
        let may_change = derived::MayChange::before(self, command);
        let result = self.carry_out(at, command);
        may_change.after(self);
        #[cfg(debug_assertions)]
        if let Err(broken) = self.check_invariants().and_then(|()| self.check_indexes()) {
            // A broken invariant here is a bug in this file; fail loudly in
            // debug builds (tests), where it can be fixed.
            panic!("replicated state invariant broken after {command:?}: {broken}");
        }
        CommandResponse(result)
    }

    /// Carries out one command (or each decision of a batch) at `at`.
    pub(super) fn carry_out(
        &mut self,
        at: LogPosition,
        command: &Command,
    ) -> Result<Outcome, CommandError> {
        let index = at.index;
        let result = match command {
            Command::Apply {
                resources,
                defaults,
                limits,
                validation,
            } => self.apply_resources(
                index,
                resources,
                defaults,
                limits.as_ref(),
                ValidationRules::revision(*validation),
            ),
            Command::Delete { keys } => self.delete_resources(index, keys),
            Command::RegisterProxy {
                id,
                zone,
                admin_address,
            } => self.register_proxy(index, id, zone, admin_address),
            Command::RemoveProxy {
                id,
                reason,
                registration,
            } => Ok(self.remove_proxy(id, reason, *registration)),
            Command::ExpireProxy {
                id,
                registration,
                basis,
            } => self.expire_proxy(at, id, *registration, basis),
            Command::CommitTransition {
                route,
                generation,
                forced,
                basis,
            } => self.commit_transition(at, route, *generation, *forced, basis.as_ref()),
            Command::AbandonTransition {
                route,
                generation,
                reason,
                basis,
            } => self.abandon_transition(at, route, *generation, reason, basis.as_ref()),
            Command::Decisions { decisions } => self.carry_out_decisions(at, decisions),
            Command::ApplyAndCommit { apply, commits } => {
                self.carry_out_apply_and_commits(at, apply, commits)
            }
            Command::Applies { applies } => self.carry_out_applies(at, applies),
        };
        result.map(|mut outcome| {
            outcome.index = index;
            outcome
        })
    }

    /// Records that the entry at `at` was applied. Raft's own entries (a
    /// new leader's blank entry, membership changes) carry no command but
    /// move the position too, so a leader can tell when it has applied
    /// everything committed before its term.
    pub fn note_entry(&mut self, at: LogPosition) {
        self.last_index = at.index;
        self.last_term = at.term;
    }

    fn apply_resources(
        &mut self,
        index: u64,
        resources: &[Resource],
        defaults: &CutoverSettings,
        limits: Option<&StoreLimits>,
        rules: ValidationRules,
    ) -> Result<Outcome, CommandError> {
        if resources.is_empty() {
            return Err(CommandError::Empty);
        }
        let mut seen = BTreeSet::new();
        for resource in resources {
            let key = resource.key();
            if !seen.insert(key.clone()) {
                return Err(CommandError::Duplicate {
                    key: key.to_string(),
                });
            }
            validate_resource_with(resource, rules).map_err(|e| CommandError::Invalid(e.into()))?;
        }
        for resource in resources {
            if let Resource::HttpRoute(route) = resource {
                self.check_route_name_free(route)?;
            }
        }
        if let Some(limits) = limits {
            self.check_limits(resources, limits)?;
        }
        // Everything is valid: from here on nothing can fail.
        let mut outcome = Outcome::default();
        for resource in resources {
            match resource {
                Resource::HttpRoute(route) => {
                    self.apply_route(index, route, defaults, &mut outcome)
                }
                other => self.store_resource(index, other, &mut outcome),
            }
        }
        Ok(outcome)
    }

    /// Route records are keyed by `namespace/name` alone: a route whose
    /// name a route of the other kind holds is refused rather than
    /// replacing it.
    fn check_route_name_free(&self, route: &HttpRoute) -> Result<(), CommandError> {
        let name = route.meta.object_name();
        match self.routes.get(&name) {
            Some(record) if record.kind() != route.kind.kind() => {
                Err(CommandError::RouteNameTaken {
                    route: format!("{} {name}", route.kind.kind()),
                    holder: record.kind(),
                })
            }
            _ => Ok(()),
        }
    }

    fn store_resource(&mut self, index: u64, resource: &Resource, outcome: &mut Outcome) {
        let key = resource.key();
        let mut stored = resource.clone();
        set_revision(&mut stored, 0);
        let verb = match self.resources.get(&key) {
            Some(existing) => {
                let mut old = existing.clone();
                set_revision(&mut old, 0);
                if old == stored {
                    outcome.changes.push(format!("{key} unchanged"));
                    return;
                }
                "configured"
            }
            None => "created",
        };
        set_revision(&mut stored, index);
        self.touched.resource(&key);
        if let Some(previous) = self.resources.insert(key.clone(), stored) {
            self.bump_endpoints(&previous, index);
        }
        self.bump_endpoints(resource, index);
        outcome.changes.push(format!("{key} {verb}"));
    }

    /// Something that decides how the proxies reach a Service's endpoints
    /// changed at `index` (created, replaced or deleted): a Service, one
    /// of its EndpointSlices, a BackendTLSPolicy targeting it, or a
    /// ConfigMap such a policy trusts. The Service's endpoint generation
    /// moves to `index`, so readiness evidence gathered over the old data
    /// path (say, plaintext before a policy asked for TLS) never counts for
    /// the new one. A ConfigMap change costs a pass over the stored
    /// policies (few); every other change O(1) per Service.
    fn bump_endpoints(&mut self, resource: &Resource, index: u64) {
        let services: Vec<ObjectName> = match resource {
            Resource::Service(s) => vec![s.meta.object_name()],
            Resource::EndpointSlice(slice) => slice
                .service_name()
                .map(|name| ObjectName::new(slice.meta.namespace.clone(), name))
                .into_iter()
                .collect(),
            Resource::BackendTlsPolicy(policy) => policy
                .target_services()
                .map(|(service, _)| service)
                .collect(),
            Resource::ConfigMap(map) => self
                .stored_backend_tls_policies()
                .filter_map(|r| match r {
                    Resource::BackendTlsPolicy(p)
                        if p.meta.namespace == map.meta.namespace
                            && p.validation
                                .ca_certificate_refs
                                .iter()
                                .any(|c| c.name == map.meta.name) =>
                    {
                        Some(p)
                    }
                    _ => None,
                })
                .flat_map(|p| p.target_services().map(|(service, _)| service))
                .collect(),
            _ => Vec::new(),
        };
        for service in services {
            self.touched.endpoint_generation(&service);
            self.endpoint_generations.bump(service, index);
        }
    }

    fn apply_route(
        &mut self,
        index: u64,
        route: &HttpRoute,
        defaults: &CutoverSettings,
        outcome: &mut Outcome,
    ) {
        let name = route.meta.object_name();
        let kind = route.kind.kind();
        let mut spec = route.clone();
        spec.meta.revision = 0;
        let stored = self.routes.entry(name.clone()).or_insert_with(|| {
            Arc::new(RouteRecord {
                name: name.clone(),
                active: None,
                pending: None,
                last_failure: None,
                forced: false,
                active_since: 0,
            })
        });
        let same = |g: &RouteGeneration| {
            let mut s = g.spec.clone();
            s.meta.revision = 0;
            s == spec
        };
        // Looked at through the shared record; copied (below) only when it
        // changes.
        let record: &RouteRecord = stored;
        if let Some(pending) = &record.pending
            && same(&pending.target)
        {
            outcome.changes.push(format!(
                "{kind} {name} unchanged (generation {} pending)",
                pending.target.generation
            ));
            outcome.routes.push((name, pending.target.generation));
            return;
        }
        if let Some(active) = &record.active
            && same(active)
        {
            let generation = active.generation;
            match Arc::make_mut(stored).pending.take() {
                Some(withdrawn) => {
                    self.touched.route(&name);
                    outcome.changes.push(format!(
                        "{kind} {name}: pending generation {} withdrawn, spec equals active generation {generation}",
                        withdrawn.target.generation
                    ))
                }
                None => outcome
                    .changes
                    .push(format!("{kind} {name} unchanged (generation {generation})")),
            }
            outcome.routes.push((name, generation));
            return;
        }
        // Validation already parsed these annotations; the fallback cannot
        // be reached but keeps this function total.
        let settings = CutoverSettings::from_annotations(&spec.meta.annotations, *defaults)
            .unwrap_or(*defaults);
        // The entry's own index: unique for ever, so a generation never
        // names two specs (not after a withdraw, an abandon, or a delete
        // and re-create of the route).
        let generation = index;
        // Test-only fault: the old `newest + 1` numbering.
        #[cfg(feature = "fault-injection")]
        let generation = if super::faults::get().reuse_generations {
            record.newest_generation() + 1
        } else {
            generation
        };
        spec.meta.revision = index;
        self.touched.route(&name);
        let record = Arc::make_mut(stored);
        let superseded = record.pending.take();
        record.pending = Some(Transition {
            target: RouteGeneration { generation, spec },
            settings,
        });
        record.last_failure = None;
        let mut line = format!(
            "{kind} {name}: generation {generation} pending (policy {}, timeout {}ms)",
            settings.policy, settings.timeout_ms
        );
        if let Some(old) = superseded {
            line.push_str(&format!(
                ", supersedes pending generation {}",
                old.target.generation
            ));
        }
        outcome.changes.push(line);
        outcome.routes.push((name, generation));
    }

    fn delete_resources(
        &mut self,
        index: u64,
        keys: &[ResourceKey],
    ) -> Result<Outcome, CommandError> {
        if keys.is_empty() {
            return Err(CommandError::Empty);
        }
        let mut outcome = Outcome::default();
        for key in keys {
            let removed = if key.kind.is_route() {
                // Only a route of the kind named: deleting `GRPCRoute a`
                // never removes `HTTPRoute a`.
                let same_kind = self.routes.get(&key.name).map(|r| r.kind()) == Some(key.kind);
                if same_kind {
                    self.touched.route(&key.name);
                    self.routes.remove(&key.name);
                }
                same_kind
            } else {
                self.touched.resource(key);
                match self.resources.remove(key) {
                    Some(gone) => {
                        self.bump_endpoints(&gone, index);
                        true
                    }
                    None => false,
                }
            };
            let verb = if removed { "deleted" } else { "not found" };
            outcome.changes.push(format!("{key} {verb}"));
        }
        Ok(outcome)
    }

    /// The route's record when `generation` is what it has pending.
    fn pending(&self, route: &ObjectName, generation: u64) -> Result<&RouteRecord, CommandError> {
        let not_pending = |current: String| CommandError::NotPending {
            route: route.to_string(),
            generation,
            current,
        };
        let record = self
            .routes
            .get(route)
            .ok_or_else(|| not_pending("route does not exist".into()))?;
        match &record.pending {
            Some(p) if p.target.generation == generation => Ok(record),
            Some(p) => Err(not_pending(format!(
                "generation {} is pending",
                p.target.generation
            ))),
            None => Err(not_pending("nothing is pending".into())),
        }
    }

    /// [`Self::pending`], to change: the record is copied here if a
    /// published state still shares it.
    fn pending_mut(
        &mut self,
        route: &ObjectName,
        generation: u64,
    ) -> Result<&mut RouteRecord, CommandError> {
        self.pending(route, generation)?;
        let record = self
            .routes
            .get_mut(route)
            .expect("pending() found the record");
        Ok(Arc::make_mut(record))
    }

    pub(super) fn commit_transition(
        &mut self,
        at: LogPosition,
        route: &ObjectName,
        generation: u64,
        forced: bool,
        basis: Option<&DecisionBasis>,
    ) -> Result<Outcome, CommandError> {
        self.pending(route, generation)?;
        if let Some(basis) = basis {
            fence::check_term(basis, at)?;
            if !forced {
                self.check_evidence_basis(route, generation, basis)?;
            }
        }
        self.touched.route(route);
        let record = self.pending_mut(route, generation)?;
        if let Some(pending) = record.pending.take() {
            record.active = Some(pending.target);
            record.active_since = at.index;
        }
        record.last_failure =
            forced.then(|| format!("generation {generation} was forced after its cutover timeout"));
        record.forced = forced;
        let how = if forced { "forced" } else { "committed" };
        let kind = record.kind();
        Ok(Outcome {
            changes: vec![format!("{kind} {route}: generation {generation} {how}")],
            routes: vec![(route.clone(), generation)],
            ..Default::default()
        })
    }

    fn abandon_transition(
        &mut self,
        at: LogPosition,
        route: &ObjectName,
        generation: u64,
        reason: &str,
        basis: Option<&DecisionBasis>,
    ) -> Result<Outcome, CommandError> {
        self.pending(route, generation)?;
        if let Some(basis) = basis {
            fence::check_term(basis, at)?;
        }
        self.touched.route(route);
        let record = self.pending_mut(route, generation)?;
        record.pending = None;
        record.last_failure = Some(format!("generation {generation} abandoned: {reason}"));
        let active = record.active.as_ref().map_or(0, |a| a.generation);
        let kind = record.kind();
        Ok(Outcome {
            changes: vec![format!(
                "{kind} {route}: generation {generation} abandoned ({reason}); active stays at {active}"
            )],
            routes: vec![(route.clone(), active)],
            ..Default::default()
        })
    }

    /// The state's invariants: route records keyed by their own name, a
    /// pending generation always newer than the active one and never newer
    /// than the log, stored resources keyed by their own key and never
    /// HTTPRoutes.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (name, record) in &self.routes {
            if &record.name != name {
                return Err(format!("route record {name} is named {}", record.name));
            }
            let active = record.active.as_ref().map_or(0, |a| a.generation);
            if let Some(p) = &record.pending
                && p.target.generation <= active
            {
                return Err(format!(
                    "route {name}: pending generation {} is not newer than active {active}",
                    p.target.generation
                ));
            }
            if record.newest_generation() > self.last_index {
                return Err(format!(
                    "route {name}: generation {} is newer than the log ({})",
                    record.newest_generation(),
                    self.last_index
                ));
            }
        }
        for (key, resource) in &self.resources {
            if &resource.key() != key {
                return Err(format!("resource {key} is stored as {}", resource.key()));
            }
            if matches!(resource, Resource::HttpRoute(_)) {
                return Err(format!("route {key} stored outside the route records"));
            }
        }
        Ok(())
    }
}

impl ReplicatedState {
    /// The stored BackendTLSPolicies: a range of the store, ordered by
    /// kind first, not a pass over it.
    pub(super) fn stored_backend_tls_policies(&self) -> impl Iterator<Item = &Resource> + '_ {
        let first = ResourceKey {
            kind: Kind::BackendTLSPolicy,
            name: ObjectName::default(),
        };
        self.resources
            .range(first..)
            .take_while(|(k, _)| k.kind == Kind::BackendTLSPolicy)
            .map(|(_, r)| r)
    }
}

fn set_revision(resource: &mut Resource, revision: u64) {
    resource.meta_mut().revision = revision;
}
