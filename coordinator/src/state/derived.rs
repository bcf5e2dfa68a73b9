//! Derived indexes of the replicated state: which routes have a pending
//! transition, and how many endpoint addresses the stored EndpointSlices
//! hold. They let the leader's decision pass visit pending routes only and
//! let the store-limit check count in O(change) instead of walking the
//! store on every apply.
//!
//! Owns: building the indexes from the state (lazily, on first use) and
//! keeping them up to date as [`ReplicatedState::apply`] changes the state
//! (only what a command touched is looked at again). Does not own: the
//! state itself. The indexes are never serialised and never take part in
//! the state's equality: a state read back from storage (however it was
//! loaded) or built field by field starts without them and builds them the
//! first time they are asked for. Code that edits the state's public maps
//! directly, outside `apply`, must call
//! [`ReplicatedState::invalidate_indexes`] afterwards (a stale pending set
//! is still filtered against the routes, so it can only over-report).

use super::{Command, ReplicatedState};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use switchyard_proto::model::{EndpointSlice, Kind, ObjectName, Resource, ResourceKey};

/// The indexes themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Indexes {
    /// Routes whose record has a pending transition.
    pending: BTreeSet<ObjectName>,
    /// Endpoint addresses summed over every stored EndpointSlice.
    endpoint_addresses: usize,
}

/// The lazily built indexes a [`ReplicatedState`] carries beside its data.
/// Equal to every other (the data alone decides equality), cloned with the
/// state (so a published copy does not rebuild them), skipped by serde.
#[derive(Clone, Default)]
pub struct DerivedIndexes(OnceLock<Indexes>);

impl PartialEq for DerivedIndexes {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for DerivedIndexes {}

impl std::fmt::Debug for DerivedIndexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let built = if self.0.get().is_some() {
            "built"
        } else {
            "not built"
        };
        f.write_str(built)
    }
}

/// Endpoint addresses in one slice (an endpoint listing two addresses
/// counts twice).
pub(super) fn addresses(slice: &EndpointSlice) -> usize {
    slice.endpoints.iter().map(|e| e.addresses.len()).sum()
}

fn stored_addresses(state: &ReplicatedState, key: &ResourceKey) -> usize {
    match state.resources.get(key) {
        Some(Resource::EndpointSlice(slice)) => addresses(slice),
        _ => 0,
    }
}

impl Indexes {
    /// From scratch: O(store).
    fn build(state: &ReplicatedState) -> Self {
        Indexes {
            pending: state
                .routes
                .iter()
                .filter(|(_, r)| r.pending.is_some())
                .map(|(name, _)| name.clone())
                .collect(),
            endpoint_addresses: state
                .resources
                .values()
                .map(|r| match r {
                    Resource::EndpointSlice(slice) => addresses(slice),
                    _ => 0,
                })
                .sum(),
        }
    }
}

/// What one command may change, noted before it is applied: the routes
/// whose pending transition may come or go, and each EndpointSlice key it
/// may store or remove with the addresses stored under it before.
#[derive(Debug, Default)]
pub(super) struct MayChange {
    routes: BTreeSet<ObjectName>,
    slices: BTreeMap<ResourceKey, usize>,
}

impl MayChange {
    /// Notes what `command` may change in `state`. Builds the indexes
    /// first if they are not (the first apply after a load: O(store) once),
    /// since the command's own checks read them. O(size of the command).
    pub(super) fn before(state: &ReplicatedState, command: &Command) -> Self {
        state.indexes();
        let mut touched = MayChange::default();
        touched.note(state, command);
        touched
    }

    fn note(&mut self, state: &ReplicatedState, command: &Command) {
        match command {
            Command::Apply { resources, .. } => {
                for resource in resources {
                    match resource {
                        Resource::HttpRoute(route) => {
                            self.routes.insert(route.meta.object_name());
                        }
                        Resource::EndpointSlice(_) => self.slice(state, resource.key()),
                        _ => {}
                    }
                }
            }
            Command::Delete { keys } => {
                for key in keys {
                    match key.kind {
                        Kind::HTTPRoute | Kind::GRPCRoute => {
                            self.routes.insert(key.name.clone());
                        }
                        Kind::EndpointSlice => self.slice(state, key.clone()),
                        _ => {}
                    }
                }
            }
            Command::CommitTransition { route, .. } | Command::AbandonTransition { route, .. } => {
                self.routes.insert(route.clone());
            }
            Command::Decisions {
                decisions: commands,
            }
            | Command::Applies { applies: commands } => {
                for command in commands {
                    self.note(state, command);
                }
            }
            // The commits are of routes the apply names.
            Command::ApplyAndCommit { apply, .. } => self.note(state, apply),
            Command::RegisterProxy { .. }
            | Command::RemoveProxy { .. }
            | Command::ExpireProxy { .. } => {}
        }
    }

    fn slice(&mut self, state: &ReplicatedState, key: ResourceKey) {
        let before = stored_addresses(state, &key);
        self.slices.entry(key).or_insert(before);
    }

    /// Brings the indexes in line with `state` after the command was
    /// applied (accepted or not: a refused command changed nothing, and
    /// this then changes nothing either). O(size of the command × log R).
    pub(super) fn after(self, state: &mut ReplicatedState) {
        let fresh: Vec<(ObjectName, bool)> = self
            .routes
            .into_iter()
            .map(|name| {
                let pending = state.routes.get(&name).is_some_and(|r| r.pending.is_some());
                (name, pending)
            })
            .collect();
        let slices: Vec<(usize, usize)> = self
            .slices
            .iter()
            .map(|(key, before)| (*before, stored_addresses(state, key)))
            .collect();
        let Some(indexes) = state.derived.0.get_mut() else {
            return;
        };
        for (name, pending) in fresh {
            if pending {
                indexes.pending.insert(name);
            } else {
                indexes.pending.remove(&name);
            }
        }
        for (before, after) in slices {
            // `before` is part of the sum, so this cannot underflow.
            indexes.endpoint_addresses = indexes.endpoint_addresses - before + after;
        }
    }
}

impl ReplicatedState {
    fn indexes(&self) -> &Indexes {
        self.derived.0.get_or_init(|| Indexes::build(self))
    }

    /// Routes with a pending transition, in name order, each with its
    /// record. O(pending) once the index is built (the first call after
    /// a load builds it: O(store)).
    pub fn pending_routes(
        &self,
    ) -> impl Iterator<Item = (&ObjectName, &switchyard_proto::model::RouteRecord)> {
        self.indexes().pending.iter().filter_map(|name| {
            self.routes
                .get(name)
                .filter(|r| r.pending.is_some())
                .map(|r| (name, &**r))
        })
    }

    /// At least the number of pending transitions, in O(1) once the index
    /// is built (the index may still list a route whose transition was
    /// just decided): for weighing work against them, not for counting.
    pub fn pending_bound(&self) -> usize {
        self.indexes().pending.len()
    }

    /// How many routes have a pending transition.
    pub fn pending_count(&self) -> usize {
        self.pending_routes().count()
    }

    /// Endpoint addresses across every stored EndpointSlice, from the index.
    pub fn endpoint_count(&self) -> usize {
        self.indexes().endpoint_addresses
    }

    /// Drops the indexes, to be rebuilt on next use: for code that edits
    /// the public maps directly rather than through `apply`.
    pub fn invalidate_indexes(&mut self) {
        self.derived = DerivedIndexes::default();
    }

    /// Debug check: the maintained indexes equal a fresh build.
    #[cfg(debug_assertions)]
    pub(super) fn check_indexes(&self) -> Result<(), String> {
        match self.derived.0.get() {
            Some(kept) if *kept != Indexes::build(self) => Err(format!(
                "derived indexes out of date: kept {kept:?}, the state says {:?}",
                Indexes::build(self)
            )),
            _ => Ok(()),
        }
    }
}
