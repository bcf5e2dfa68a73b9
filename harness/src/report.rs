//! The chaos report: one Markdown table row per scenario run (scenario,
//! requests sent, failed, cutovers, faults injected, duration), written to
//! a file under `target/` so a run leaves a readable record.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// One scenario's figures.
#[derive(Debug, Clone)]
pub struct Row {
    /// Scenario name.
    pub scenario: String,
    /// Requests the prober completed.
    pub sent: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Cutovers performed.
    pub cutovers: usize,
    /// Faults injected, in words ("leader kill -9 ×3").
    pub faults: String,
    /// Wall time.
    pub duration: Duration,
}

/// Files this process has started (so each test binary starts its file
/// afresh and then appends).
static STARTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Appends `row` to `dir/chaos-report-<name>.md`, writing the table header
/// first if this process has not written that file yet. Errors are
/// returned, not panicked on: a report that cannot be written must not
/// fail a scenario that passed.
pub fn record(dir: &Path, name: &str, row: &Row) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("chaos-report-{name}.md"));
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    let fresh = !started.contains(&path);
    let mut file = if fresh {
        started.push(path.clone());
        let mut f = std::fs::File::create(&path)?;
        writeln!(
            f,
            "| scenario | requests sent | failed | cutovers | faults injected | duration |"
        )?;
        writeln!(f, "|---|---|---|---|---|---|")?;
        f
    } else {
        std::fs::OpenOptions::new().append(true).open(&path)?
    };
    writeln!(
        file,
        "| {} | {} | {} | {} | {} | {:.1} s |",
        row.scenario,
        row.sent,
        row.failed,
        row.cutovers,
        row.faults,
        row.duration.as_secs_f64()
    )?;
    Ok(path)
}
