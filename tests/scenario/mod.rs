//! Shared by the scenario test files (acceptance, chaos): the run profile
//! and the report row each scenario adds.

use switchyard::demo::prober::ProbeReport;
use switchyard_harness::report::{Row, record};

/// Scenarios start whole deployments; on two cores they run one at a time.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `SWITCHYARD_CHAOS_PROFILE=long` runs every scenario with five times the
/// rounds.
pub fn rounds(default: usize) -> usize {
    match std::env::var("SWITCHYARD_CHAOS_PROFILE").as_deref() {
        Ok("long") => default * 5,
        _ => default,
    }
}

/// Adds a scenario's row to `target/tmp/chaos-report-<file>.md`. A report
/// that cannot be written is said on stderr, never a test failure.
pub fn report(
    file: &str,
    scenario: &str,
    probe: &ProbeReport,
    cutovers: usize,
    faults: &str,
    started: std::time::Instant,
) {
    let row = Row {
        scenario: scenario.to_string(),
        sent: probe.sent,
        failed: probe.failed,
        cutovers,
        faults: faults.to_string(),
        duration: started.elapsed(),
    };
    if let Err(e) = record(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        file,
        &row,
    ) {
        eprintln!("could not write the chaos report: {e}");
    }
}

/// Waits until the apply at `index` is Ready, then checks that the next
/// response the prober sees comes from `backend`.
#[allow(dead_code)]
pub async fn wait_serving(
    fleet: &switchyard::demo::fleet::Fleet,
    prober: &switchyard::demo::prober::Prober,
    targets: &std::collections::BTreeMap<switchyard_proto::model::ObjectName, u64>,
    index: u64,
    timeout: std::time::Duration,
    backend: &str,
) -> anyhow::Result<()> {
    fleet
        .client()
        .wait_ready(targets, index, timeout, |_| {})
        .await?;
    let seen = prober
        .observe_after(
            tokio::time::Instant::now(),
            std::time::Duration::from_secs(5),
        )
        .await
        .expect("responses keep coming");
    assert_eq!(seen.backend, backend);
    Ok(())
}
