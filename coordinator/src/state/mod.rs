//! The replicated state machine: what every coordinator holds once it has
//! applied the Raft log, and the one total function that changes it.
//!
//! Owns: stored resources, route records (active generation plus pending
//! transition), the registered proxies, every Service's endpoint
//! generation, and the log position of the last applied entry. Does not
//! own: leases, readiness evidence, clocks or IO — those are the leader's
//! soft state (see the cutover engine). `apply` is pure and deterministic:
//! the same log yields the same state on every coordinator.
//!
//! The leader's decisions (commit, abandon, expire) are *fenced* here: each
//! carries the term of the leader that made it and what its evidence rested
//! on, and `apply` carries it out only if the entry was appended in that
//! same term and the evidence still describes the current endpoints
//! (design invariant 9). The entry's log position is known at apply time,
//! so the check is as deterministic as the rest.

mod applies;
mod apply;
pub mod command;
mod derived;
#[cfg(feature = "fault-injection")]
pub mod faults;
mod fence;
pub mod limits;
mod proxies;
pub mod shared;
pub mod touched;
mod view;

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use switchyard_proto::model::{ObjectName, Resource, ResourceKey, RouteRecord};

pub use command::{
    Command, CommandError, CommandResponse, DecisionBasis, InvalidResource, Outcome,
};
pub use derived::DerivedIndexes;
pub use imbl::OrdMap;
pub use limits::{StoreLimit, StoreLimits};
pub use shared::Generations;

/// Where an entry sits in the Raft log: its index and the term of the
/// leader that appended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct LogPosition {
    /// Log index (1 for the first entry).
    pub index: u64,
    /// Term of the leader that appended the entry.
    pub term: u64,
}

impl LogPosition {
    /// The entry at `index`, appended in `term`.
    pub fn new(index: u64, term: u64) -> Self {
        LogPosition { index, term }
    }
}

/// A registered proxy, as replicated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyRecord {
    /// Proxy id.
    pub id: String,
    /// Its zone.
    pub zone: String,
    /// Its admin address.
    pub admin_address: String,
    /// Log index of its (latest) registration. Evidence, heartbeats and
    /// expiries name it, so nothing from an earlier run under the same id
    /// counts for this one.
    pub registered_index: u64,
}

/// Everything the Raft log builds.
///
/// Its maps are persistent ([`OrdMap`]): a clone shares every object with
/// the original and a change copies only the path to it, so publishing the
/// state after each apply batch, and handing a copy to the snapshot
/// builder, cost O(1) whatever the store holds. Serialised exactly as
/// before (the snapshot and the old data-directory layout are this JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ReplicatedState {
    /// Index of the last log entry applied (0 before any). Raft's own
    /// entries (a new leader's blank entry, membership changes) count too.
    pub last_index: u64,
    /// Term of that entry. A new leader judges nothing until this equals
    /// its own term: only then has it applied everything committed before
    /// its term (its blank entry comes after all of it).
    #[serde(default)]
    pub last_term: u64,
    /// Stored resources other than HTTPRoutes, by key.
    #[serde(with = "shared::pairs")]
    pub resources: OrdMap<ResourceKey, Resource>,
    /// HTTPRoutes, as route records. Each record is shared (`Arc`): a
    /// change to one route copies the map's path to it, and each node on
    /// that path holds up to 64 records, so copying a record whole there
    /// (spec, names, strings) cost the leader about as much as judging the
    /// change; a shared record is one count. A record itself is copied
    /// only when it changes while a published state still holds it.
    #[serde(with = "shared::pairs")]
    pub routes: OrdMap<ObjectName, Arc<RouteRecord>>,
    /// Registered proxies, by id.
    pub proxies: OrdMap<String, ProxyRecord>,
    /// Per-Service endpoint generations; they only grow.
    #[serde(default)]
    pub endpoint_generations: Generations,
    /// Indexes derived from the above (pending routes, endpoint count):
    /// never serialised, no part of equality, built on first use and kept
    /// up to date by `apply` (see `derived`).
    #[serde(skip)]
    pub derived: DerivedIndexes,
    /// Keys changed since the store last drained them (not state: never
    /// serialised, ignored by equality).
    #[serde(skip)]
    pub touched: touched::Touched,
}

#[cfg(test)]
mod tests;
