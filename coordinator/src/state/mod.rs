//! The replicated state machine: what every coordinator holds once it has
//! applied the Raft log, and the one total function that changes it.
//!
//! Owns: stored resources, route records (active generation plus pending
//! transition), the registered proxies, and the index of the last applied
//! entry. Does not own: leases, readiness evidence, clocks or IO — those are
//! the leader's soft state (see the cutover engine). `apply` is pure and
//! deterministic: the same log yields the same state on every coordinator.

mod apply;
pub mod command;
pub mod limits;
mod pairs;
mod view;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use switchyard_proto::model::{ObjectName, Resource, ResourceKey, RouteRecord};

pub use command::{Command, CommandError, CommandResponse, InvalidResource, Outcome};
pub use limits::{StoreLimit, StoreLimits};

/// A registered proxy, as replicated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyRecord {
    /// Proxy id.
    pub id: String,
    /// Its zone.
    pub zone: String,
    /// Its admin address.
    pub admin_address: String,
    /// Log index of its (latest) registration.
    pub registered_index: u64,
}

/// Everything the Raft log builds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ReplicatedState {
    /// Index of the last log entry applied (0 before any).
    pub last_index: u64,
    /// Stored resources other than HTTPRoutes, by key.
    #[serde(with = "pairs")]
    pub resources: BTreeMap<ResourceKey, Resource>,
    /// HTTPRoutes, as route records.
    #[serde(with = "pairs")]
    pub routes: BTreeMap<ObjectName, RouteRecord>,
    /// Registered proxies, by id.
    pub proxies: BTreeMap<String, ProxyRecord>,
}

#[cfg(test)]
mod limits_tests;
#[cfg(test)]
mod tests;
