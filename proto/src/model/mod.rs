//! The domain model: what users declare (Kubernetes-shaped resources) and
//! what the control plane derives from it (route records, transitions,
//! readiness policies, status).
//!
//! Types here are plain data with serde; they are the JSON carried in the
//! `*_json` fields of the protobuf contract, so they follow its evolution
//! rules: new fields get `#[serde(default)]`, nothing is renamed.
//!
//! Validation lives in [`validate`]; it is the one place that decides whether
//! a resource is well formed, and its errors name the object and the field.

pub mod backend;
pub mod backend_tls;
pub mod delta;
pub mod gateway;
pub mod gateway_api;
pub mod meta;
pub mod pairs;
pub mod policy;
pub mod resource;
pub mod route;
pub mod secret;
pub mod snapshot;
pub mod status;
pub mod validate;

pub use backend::*;
pub use backend_tls::*;
pub use delta::{ConfigDelta, DeltaError, diff_sorted};
pub use gateway::*;
pub use meta::*;
pub use policy::*;
pub use resource::*;
pub use route::*;
pub use secret::*;
pub use snapshot::*;
pub use status::*;
pub use validate::{ValidationError, ValidationRules, validate_resource, validate_resource_with};
