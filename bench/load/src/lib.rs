//! `switchyard-load`: the load tool of issue 14. It drives real
//! coordinator processes with a generated store of N routes and M
//! simulated proxy agents, and measures the figures of the scale goals
//! (bulk apply, resync, apply → Ready, update throughput, CPU per update,
//! memory, data directory, leader kill, and optionally the zero-drop
//! acceptance sequence through real proxies at that size), printed as one
//! table under the command line that produced it.
//!
//! # Layout
//!
//! - [`routes`]: the deterministic route generator (model resources and
//!   Kubernetes YAML).
//! - [`cluster`]: the coordinators (started on 127.0.0.1 or given), their
//!   `/proc`, data directories and `/metrics`; certificates under TLS.
//! - [`admin`]: `AdminService` calls (apply, status, wait for Ready).
//! - [`agent`]: the simulated proxies (register, watch, warm, heartbeat).
//! - [`figures`]: the phases of a run, in order.
//! - [`report`]: the figures and their table.
//!
//! Everything runs on loopback; every wait is bounded; every process the
//! tool starts is killed by PID when the run ends.

pub mod admin;
pub mod agent;
pub mod cluster;
pub mod figures;
pub mod report;
pub mod routes;

use std::time::Duration;

/// What one run does.
#[derive(Debug, Clone)]
pub struct Options {
    /// Routes in the store (each with its Service and EndpointSlice).
    pub routes: usize,
    /// Simulated proxy agents.
    pub agents: usize,
    /// The coordinators.
    pub cluster: cluster::ClusterSpec,
    /// Objects per apply in the bulk apply (the coordinators' limit).
    pub batch: usize,
    /// Single-route changes per latency and per CPU measurement.
    pub changes: usize,
    /// Routes in the CPU reference measurement.
    pub cpu_reference_routes: usize,
    /// Concurrent clients of the throughput figure.
    pub clients: usize,
    /// Length of the throughput figure, seconds.
    pub seconds: f64,
    /// Transitions pending when the leader is killed.
    pub pending: usize,
    /// Bound of every wait.
    pub wait: Duration,
    /// Also run the acceptance sequence through three real proxies at this
    /// size (needs coordinators started here, without TLS).
    pub acceptance: bool,
    /// Write each started coordinator's whole log into this directory at
    /// the end (`coordinator-<id>.log`), for a look at what a figure hid.
    pub keep_logs: Option<std::path::PathBuf>,
    /// The command line, printed above the table.
    pub command: String,
}

/// Runs every phase (see [`figures`]) and returns the figures.
pub async fn run(options: &Options) -> anyhow::Result<report::Report> {
    figures::run(options).await
}
