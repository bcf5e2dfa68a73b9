//! The coordinators' Raft group: openraft on a sled store, talking over the
//! `switchyard.v1.RaftService` gRPC contract.
//!
//! Owns: the openraft type configuration ([`types`]), the sled store
//! ([`db`], [`log_store`], [`state_store`]) and everything needed to make
//! consensus durable. Does not own: what a command means (that is
//! [`crate::state`], applied here as a black box), nor the gRPC server the
//! services are mounted on.
//!
//! Layout:
//! - [`types`]: the one place openraft's types are chosen.
//! - [`db`]: sled layout, opening, cluster metadata; the only sled user
//!   besides the two stores.
//! - [`log_store`]: log entries and vote, with their durability rules.
//! - [`state_store`]: state machine and snapshots.

pub mod db;
pub mod log_store;
pub mod state_store;
pub mod types;

pub use db::{Formation, StoreError, Stores, open};
pub use log_store::LogStore;
pub use state_store::StateStore;
pub use types::TypeConfig;
