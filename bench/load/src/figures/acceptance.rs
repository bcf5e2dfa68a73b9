//! The acceptance sequence at scale: the zero-drop sequence of the
//! cutover issue (10 header changes, 10 fresh backends, a prober sending
//! requests back to back through three real proxies, 0 failures allowed)
//! run while the store holds every generated route and the agents are
//! connected — `switchyard::demo::run_on` against this run's coordinators.
//!
//! The real proxies health-check what every EndpointSlice lists, so a run
//! with this phase generates slices that all list one real backend on
//! loopback ([`crate::routes::Endpoints::Shared`], started by
//! [`SharedBackend::start`]): the proxies share one endpoint among the
//! generated Services, and nothing is ever sent off this machine.
//!
//! It also reads what the issue asks of one real proxy at this size: its
//! memory (`/proc`, before it stops) and how long installing a route
//! table took (each "configuration installed" line of its log: the whole
//! table once, then every update).

use super::Context;
use crate::cluster::{ClusterSpec, proc_stats};
use crate::report::{Acceptance, Latencies, RealProxies};
use anyhow::{Context as _, bail};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard::demo::{DemoOptions, run_on};
use switchyard_harness::{Process, ProcessSpec};

/// The backend every generated EndpointSlice lists.
pub struct SharedBackend {
    _process: Process,
    /// Where it listens.
    pub address: SocketAddr,
}

impl SharedBackend {
    /// Starts `switchyard backend` on 127.0.0.1 from `binary`.
    pub fn start(binary: &PathBuf) -> anyhow::Result<SharedBackend> {
        let process = Process::start(ProcessSpec::new(
            "backend-shared",
            binary,
            vec!["backend".into(), "--name".into(), "shared".into()],
        ))?;
        let address = process
            .address("http")?
            .parse()
            .context("the shared backend's address")?;
        Ok(SharedBackend {
            _process: process,
            address,
        })
    }
}

/// The binary the cluster runs, when this tool started it without TLS
/// (the demo fleet's proxies join plaintext coordinators only).
pub fn binary(spec: &ClusterSpec) -> Option<PathBuf> {
    match spec {
        ClusterSpec::Start {
            binary, tls: false, ..
        } => Some(binary.clone()),
        _ => None,
    }
}

/// Runs the sequence through three real proxies on this run's
/// coordinators; with `keep_logs`, writes their logs (and the backends')
/// there as `acceptance.log`.
pub async fn run(
    ctx: &Context,
    binary: PathBuf,
    keep_logs: Option<&Path>,
) -> anyhow::Result<Acceptance> {
    let mut options = FleetOptions::three_zones(binary.clone());
    options.tls = false;
    options.external_coordinators = Some(ctx.cluster.addresses.clone());
    let mut fleet = tokio::task::block_in_place(|| Fleet::start(options))?;
    let demo = DemoOptions::acceptance(binary);
    let outcome = run_on(&mut fleet, &demo).await;
    let real = real_proxies(&fleet.proxies);
    if let Some(dir) = keep_logs {
        let path = dir.join("acceptance.log");
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, fleet.logs()))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    // Gracefully, as pods are deleted: each proxy deregisters, so no lease
    // is left to expire (and to hold up the next phase's cutovers).
    tokio::task::block_in_place(|| {
        for proxy in &mut fleet.proxies {
            proxy.terminate(Duration::from_secs(10));
        }
    });
    let report = match outcome {
        Ok(report) => report,
        Err(e) => {
            // The proxies' logs say why (a route never Ready, a refusal).
            let logs = fleet.logs();
            let tail: Vec<&str> = logs.lines().rev().take(40).collect();
            bail!(
                "{e:#}\nlast proxy log lines:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    };
    let ready: Vec<Duration> = report.cutovers.iter().map(|c| c.time_to_ready).collect();
    // The one warning a plaintext fleet is meant to print, once per
    // process, is not a fault of the run.
    let warnings: Vec<String> = report
        .warnings
        .into_iter()
        .filter(|w| !w.contains("--insecure: gRPC runs without TLS"))
        .collect();
    Ok(Acceptance {
        sent: report.probe.sent,
        failed: report.probe.failed,
        first_failures: report.probe.failures.into_iter().take(3).collect(),
        cutovers: report.cutovers.len(),
        ready: crate::report::Latencies::of(ready),
        warnings: warnings.len(),
        first_warning: warnings.first().cloned(),
        real,
    })
}

/// One "configuration installed" line of a proxy's log.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Install {
    routes: usize,
    compiled: usize,
    seconds: f64,
}

/// The install a log line reports, if it is one.
fn install_of(line: &str) -> Option<Install> {
    if !line.contains("configuration installed") {
        return None;
    }
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
    };
    Some(Install {
        routes: field("routes")?.parse().ok()?,
        compiled: field("compiled")?.parse().ok()?,
        seconds: field("seconds")?.parse().ok()?,
    })
}

/// The real proxies' memory now and their route-table installs so far: an
/// install that compiled more than half of its routes counts as a whole
/// table, the others as updates.
fn real_proxies(proxies: &[switchyard_harness::Process]) -> RealProxies {
    let stats: Vec<_> = proxies
        .iter()
        .filter_map(|p| p.pid().and_then(|pid| proc_stats(pid).ok()))
        .collect();
    let installs: Vec<Install> = proxies
        .iter()
        .flat_map(|p| p.log_lines())
        .filter_map(|line| install_of(&line))
        .collect();
    let (whole, updates): (Vec<Install>, Vec<Install>) = installs
        .iter()
        .partition(|i| i.routes > 0 && i.compiled * 2 > i.routes);
    let seconds = |v: &[Install]| -> Vec<Duration> {
        v.iter()
            .map(|i| Duration::from_secs_f64(i.seconds))
            .collect()
    };
    RealProxies {
        rss: stats.iter().map(|s| s.rss).max().unwrap_or(0),
        hwm: stats.iter().map(|s| s.hwm).max().unwrap_or(0),
        routes: installs.iter().map(|i| i.routes).max().unwrap_or(0),
        whole_tables: Latencies::of(seconds(&whole)),
        updates: Latencies::of(seconds(&updates)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_line_gives_its_routes_and_seconds() {
        let line = "[proxy-a] 2026-12-05T22:25:48.435073Z  INFO switchyard_proxy::dataplane: configuration installed version=1 routes=10001 compiled=3 reused=9998 seconds=0.0123";
        assert_eq!(
            install_of(line),
            Some(Install {
                routes: 10001,
                compiled: 3,
                seconds: 0.0123
            })
        );
        assert_eq!(install_of("proxy starting id=p1"), None);
    }
}
