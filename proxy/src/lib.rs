//! switchyard's proxy: the hyper data plane that serves Gateway API
//! HTTPRoutes, warms backends before routes point at them, and drains
//! without dropping a request.
//!
//! # Layout
//!
//! - [`router`]: pure Gateway API routing (route table compile + per-request
//!   decision). No IO.
//! - [`dataplane`]: [`DataPlane`], the one object the control plane and
//!   `main` hold: install a [`ServingConfig`], keep backends warm, report
//!   readiness, serve listeners.
//! - [`server`]: downstream side — listeners, connections (HTTP/1.1 and
//!   HTTP/2 prior knowledge), graceful drain, the per-request stack.
//! - [`upstream`]: backends — endpoint discovery from the snapshot,
//!   per-endpoint keep-alive pools, power-of-two-choices balancing, passive
//!   outlier ejection, active health checks, forwarding with safe retries,
//!   request mirrors.
//! - [`metrics`], [`settings`], [`error`], [`body`]: shared pieces.
//! - [`access_log`]: the optional JSON access log (format, writer thread).
//!
//! - [`control`]: the control-plane client (watching coordinators,
//!   reporting readiness, the apply guard). It drives the data plane only
//!   through [`DataPlane`]'s public methods.

pub mod access_log;
pub mod body;
pub mod control;
pub mod dataplane;
pub mod error;
pub mod metrics;
pub mod router;
pub mod server;
pub mod settings;
pub mod upstream;

pub use access_log::AccessLogTarget;
pub use dataplane::{BackendReadiness, DataPlane, ServingConfig};
pub use server::sockets::{ListenerSpec, Listeners};
pub use server::{BoundListener, bind_reuseport};
pub use settings::{DataPlaneSettings, HealthSettings, OutlierSettings};

/// Whether this build carries the apply guard's test-only switches
/// (feature `fault-injection`; see `switchyard_coordinator::FAULT_INJECTION`).
pub const FAULT_INJECTION: bool = cfg!(feature = "fault-injection");
