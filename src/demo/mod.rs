//! `switchyard demo`, the main job: a whole deployment on loopback (three
//! coordinators, three proxies in three zones, backend processes), requests
//! in flight continuously through the proxies, and the cutover sequence of
//! Knative's ingress `TestUpdate`: route changes that only change a header
//! value, then moves to brand-new backend processes whose predecessors are
//! stopped right after. Any failed request fails the demo.
//!
//! The acceptance tests (`tests/acceptance.rs`) run the same sequence with
//! faults added through [`DemoOptions`].

pub mod fleet;
pub mod manifests;
pub mod prober;

use anyhow::{Context, bail};
use fleet::{Fleet, FleetOptions};
use indicatif::{ProgressBar, ProgressStyle};
use manifests::VERSION_HEADER;
use prober::{ProbeReport, Prober};
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

/// What to run.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The `switchyard` binary to start children from.
    pub binary: PathBuf,
    /// Cutovers that only change the header value.
    pub header_updates: usize,
    /// Cutovers to brand-new backend processes.
    pub backend_swaps: usize,
    /// Request loops in flight at all times.
    pub concurrency: usize,
    /// New backends answer 503 for this long after they start.
    pub backend_unhealthy_for: Duration,
    /// Kill -9 the leader coordinator at a random moment (0-300 ms) after
    /// every Nth cutover is applied (and start it again once that cutover
    /// is Ready).
    pub kill_leader_every: Option<usize>,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

impl DemoOptions {
    /// The acceptance sequence: 10 header updates, 10 new backends.
    pub fn acceptance(binary: PathBuf) -> Self {
        DemoOptions {
            binary,
            header_updates: 10,
            backend_swaps: 10,
            concurrency: 4,
            backend_unhealthy_for: Duration::from_millis(500),
            kill_leader_every: None,
            progress: false,
        }
    }
}

/// One cutover's outcome.
#[derive(Debug, Clone)]
pub struct Cutover {
    /// What changed.
    pub label: String,
    /// From apply to Ready.
    pub time_to_ready: Duration,
    /// Whether the leader was killed during it.
    pub leader_killed: bool,
}

/// What the demo measured.
#[derive(Debug, Clone)]
pub struct DemoReport {
    /// Requests and failures.
    pub probe: ProbeReport,
    /// Each cutover.
    pub cutovers: Vec<Cutover>,
    /// Every WARN or ERROR line the fleet's processes logged. A clean run
    /// (no faults asked for) has none; each one is a bug.
    pub warnings: Vec<String>,
}

/// Runs the demo. Errors mean the sequence could not be carried out (a
/// cutover did not become Ready, a response showed the wrong backend);
/// failed requests are in the report.
pub async fn run(options: DemoOptions) -> anyhow::Result<DemoReport> {
    let fleet_options = FleetOptions::three_zones(options.binary.clone());
    let mut fleet = tokio::task::block_in_place(|| Fleet::start(fleet_options))?;
    let result = sequence(&mut fleet, &options).await;
    if result.is_err() {
        eprintln!("{}", fleet.logs());
    }
    let mut report = result?;
    report.warnings = fleet.warnings();
    Ok(report)
}

/// The acceptance sequence of `options` on a fleet someone else started
/// (for instance on external coordinators holding thousands of other
/// routes: the load tool's acceptance at scale). The report's warnings
/// are the fleet's WARN and ERROR lines.
pub async fn run_on(fleet: &mut Fleet, options: &DemoOptions) -> anyhow::Result<DemoReport> {
    if options.kill_leader_every.is_some() && fleet.coordinators.is_empty() {
        bail!("leader kills need coordinators the fleet started");
    }
    let mut report = sequence(fleet, options).await?;
    report.warnings = fleet.warnings();
    Ok(report)
}

async fn sequence(fleet: &mut Fleet, options: &DemoOptions) -> anyhow::Result<DemoReport> {
    let urls = fleet.proxy_urls()?;
    serve_first_route(fleet, &urls).await?;
    let prober = Prober::start(
        urls,
        options.concurrency,
        VERSION_HEADER,
        Duration::from_secs(600),
    );
    let total = options.header_updates + options.backend_swaps;
    let bar = if options.progress {
        let bar = ProgressBar::new(total as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} cutovers  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };

    let mut cutovers = Vec::new();
    let mut backend = FIRST_BACKEND.to_string();
    let mut version = FIRST_VERSION.to_string();
    for step in 1..=total {
        let swap = step > options.header_updates;
        let mut yaml = String::new();
        let label;
        if swap {
            let name = format!("v{}", step - options.header_updates + 1);
            let unhealthy = format!("{}ms", options.backend_unhealthy_for.as_millis());
            let address = tokio::task::block_in_place(|| {
                fleet.start_backend(&name, &["--unhealthy-for", &unhealthy])
            })?;
            yaml.push_str(&manifests::backend(&name, address));
            label = format!("backend {backend} -> {name}");
            backend = name;
        } else {
            let next = format!("h{step}");
            label = format!("header {version} -> {next}");
            version = next;
        }
        yaml.push_str(&manifests::route(&backend, &version, "30s"));

        let started = Instant::now();
        let (targets, index) = fleet.apply(&yaml).await?;
        let kill_leader = options
            .kill_leader_every
            .is_some_and(|n| n > 0 && step % n == 0);
        let mut killed = None;
        if kill_leader {
            // At a random moment of the transition: anywhere from right
            // after the apply to well past a typical commit.
            tokio::time::sleep(Duration::from_millis(random_below(300))).await;
            // A status call can miss the leader for a moment (an election
            // in flight, a slow reply); wait for one rather than skip the
            // kill, so every requested kill happens.
            let leader = fleet
                .wait_leader(Duration::from_secs(20))
                .await
                .with_context(|| format!("no leader to kill during cutover {step}"))?;
            fleet.coordinators[leader].kill();
            killed = Some(leader);
        }
        let waited = fleet
            .client()
            .wait_ready(&targets, index, Duration::from_secs(60), |_| {})
            .await;
        let time_to_ready = started.elapsed();
        if let Some(leader) = killed {
            tokio::task::block_in_place(|| fleet.coordinators[leader].restart())?;
        }
        waited.with_context(|| format!("cutover {step} ({label}) did not become Ready"))?;
        let ready_at = Instant::now();
        let seen = prober
            .observe_after(ready_at, Duration::from_secs(10))
            .await
            .with_context(|| format!("no successful response after cutover {step} ({label})"))?;
        if seen.backend != backend || seen.version != version {
            bail!(
                "after cutover {step} ({label}) was Ready, a response came from {} with version {:?}; expected {backend} with {version:?}",
                seen.backend,
                seen.version
            );
        }
        if swap {
            let previous = format!("v{}", step - options.header_updates);
            tokio::task::block_in_place(|| fleet.stop_backend(&previous));
        }
        cutovers.push(Cutover {
            label,
            time_to_ready,
            leader_killed: killed.is_some(),
        });
        let report = prober.report();
        bar.set_message(format!(
            "{} requests, {} failed",
            report.sent, report.failed
        ));
        bar.inc(1);
    }
    bar.finish_and_clear();
    let probe = prober.stop().await;
    Ok(DemoReport {
        probe,
        cutovers,
        warnings: Vec::new(),
    })
}

/// The backend and header value route `demo/app` starts with.
const FIRST_BACKEND: &str = "v1";
const FIRST_VERSION: &str = "h0";

/// The starting point of the sequence and of the fault scenarios: a
/// leader, every proxy of `fleet` counted, route `demo/app` Ready on
/// backend [`FIRST_BACKEND`], and each of `urls` answering for it.
async fn serve_first_route(fleet: &mut Fleet, urls: &[String]) -> anyhow::Result<()> {
    fleet.wait_leader(Duration::from_secs(20)).await?;
    // Every proxy counted before the first route: a proxy not registered
    // yet (or whose lease ran out while it installed a large store) does
    // not hold the route's commit back, and would not serve it when the
    // prober starts.
    fleet.wait_proxies_live(Duration::from_secs(60)).await?;
    let address = tokio::task::block_in_place(|| fleet.start_backend(FIRST_BACKEND, &[]))?;
    let yaml = format!(
        "{}{}{}",
        manifests::base(),
        manifests::backend(FIRST_BACKEND, address),
        manifests::route(FIRST_BACKEND, FIRST_VERSION, "30s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;
    fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(60), |_| {})
        .await
        .context("the first route never became Ready")?;
    // A proxy whose lease ran out after it was counted (its first install
    // of a large store kept its heartbeats back) is not counted, nor
    // serving, when the route is Ready.
    prober::wait_until_each_answers(urls, VERSION_HEADER, Duration::from_secs(60)).await
}

/// A fleet serving route `demo/app` from backend `v1` (already Ready), and
/// a prober through `probe_proxies` of its proxies (all when empty): the
/// starting point of the fault scenarios.
pub async fn start_serving(
    options: FleetOptions,
    probe_proxies: &[usize],
) -> anyhow::Result<(Fleet, Prober)> {
    let mut fleet = tokio::task::block_in_place(|| Fleet::start(options))?;
    let urls = fleet.proxy_urls()?;
    let urls: Vec<String> = if probe_proxies.is_empty() {
        urls
    } else {
        probe_proxies.iter().map(|i| urls[*i].clone()).collect()
    };
    serve_first_route(&mut fleet, &urls).await?;
    let prober = Prober::start(urls, 4, VERSION_HEADER, Duration::from_secs(300));
    Ok((fleet, prober))
}

/// A number below `bound` that differs from call to call (for fault
/// timing; not for anything that needs real randomness).
fn random_below(bound: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish() % bound.max(1)
}

/// The closing table.
pub fn render(report: &DemoReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "| # | cutover | time to Ready | leader killed |");
    let _ = writeln!(out, "|---|---|---|---|");
    for (i, c) in report.cutovers.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} | {} | {} ms | {} |",
            i + 1,
            c.label,
            c.time_to_ready.as_millis(),
            if c.leader_killed { "yes" } else { "" }
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "requests sent: {}", report.probe.sent);
    let _ = writeln!(out, "requests failed: {}", report.probe.failed);
    for failure in &report.probe.failures {
        let _ = writeln!(out, "  failed: {failure}");
    }
    out
}
