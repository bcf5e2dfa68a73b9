//! Shared by the scenario test files (acceptance, chaos): the run profile
//! and the report row each scenario adds.

use switchyard::demo::prober::ProbeReport;
use switchyard_chaos_tests::report::{Row, record};

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
