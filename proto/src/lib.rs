//! switchyard's wire contract and shared domain model.
//!
//! - [`pb`]: the generated tonic/prost code of `switchyard.v1` (see
//!   `proto/switchyard/v1/switchyard.proto` for the evolution rules).
//! - [`model`]: the domain model every crate speaks — Gateway API shaped
//!   resources, backends and endpoint sets, route records with active and
//!   pending generations, readiness policies — with validation at the edge.
//! - [`watch`]: the receiving rules of the configuration stream (chunks,
//!   deltas), shared by every watcher; [`compressed`]: the compressed form
//!   of its payloads.
//! - [`incremental`]: sets a proxy tells the leader again and again
//!   (applied generations, readiness evidence), sent whole once and then
//!   as changes; both sides' rules.
//!
//! This crate imports neither the proxy nor the coordinator; it holds no IO.

pub mod compressed;
mod convert;
pub use convert::{AppliedUpdate, EvidenceUpdate};
pub mod incremental;
pub mod model;
pub mod watch;

/// gRPC metadata key with which a coordinator that does not lead names the
/// leader's address (`HOST:PORT`) on an `UNAVAILABLE` answer, so proxies
/// and clients go there next.
pub const LEADER_HEADER: &str = "x-switchyard-leader";

/// Generated code of package `switchyard.v1`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("switchyard.v1");
}
