//! The coordinators' Raft group: openraft on a sled store, talking over the
//! `switchyard.v1.RaftService` gRPC contract.
//!
//! Owns: the openraft type configuration ([`types`]), the sled store
//! ([`db`], [`log_store`], [`state_store`]), the network and service over
//! tonic, and the [`Node`] API. Does not own: what a command means (that is
//! [`crate::state`], applied here as a black box), nor the gRPC server the
//! services are mounted on.
//!
//! Layout:
//! - [`types`]: the one place openraft's types are chosen.
//! - [`db`]: sled layout, opening, cluster metadata; the only sled user
//!   besides the two stores.
//! - [`log_store`]: log entries and vote, with their durability rules;
//!   `recent_entries` keeps the newest ones decoded.
//! - [`state_store`]: state machine and snapshots.
//! - [`sm_objects`]: the state machine kept one sled key per object.
//! - [`snapshots`]: snapshot files, their record, the snapshot builder.
//! - [`fingerprint`]: cluster identity on every Raft RPC.
//! - [`network`]: openraft's client network over tonic (cached channels);
//!   `append_batch` bounds each AppendEntries by bytes.
//! - [`service`]: the `RaftService` server.
//! - [`runtime`]: the threads Raft runs on, apart from the services.
//! - [`config`], [`error`], [`node`] (and the private `membership`): the
//!   API the coordinator's services call — [`Node::start`],
//!   [`Node::propose`], [`Node::add_coordinator`].

mod append_batch;
pub mod config;
pub mod db;
pub mod error;
pub mod fingerprint;
pub mod log_store;
mod membership;
pub mod network;
pub mod node;
mod recent_entries;
pub mod runtime;
pub mod service;
pub mod sm_objects;
pub mod snapshots;
pub mod state_store;
pub mod types;

pub use config::{NodeConfig, RaftSettings};
pub use error::{NodeError, ProposeError};
pub use fingerprint::CLUSTER_HEADER;
pub use node::Node;

pub use db::{Formation, StoreError, Stores, open};
pub use log_store::LogStore;
pub use state_store::StateStore;
pub use types::TypeConfig;
