//! A killed coordinator loses no acknowledged log entry.
//!
//! The test re-executes its own binary in "writer" mode (selected by an
//! environment variable): the writer opens the sled store, appends one entry
//! at a time through `RaftLogStorage::append`, and prints `ACK <index>` only
//! after the `LogFlushed` callback fired. The parent reads those lines,
//! `SIGKILL`s the writer by PID in the middle of the stream, reopens the
//! store, and checks that every acknowledged index is there with its payload.

use std::io::{BufRead, BufReader};
use std::process::{Command as Process, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use openraft::storage::RaftLogStorageExt;
use openraft::{CommittedLeaderId, EntryPayload, RaftLogReader};
use switchyard_coordinator::raft::open;
use switchyard_coordinator::raft::types::{Entry, LogId};
use switchyard_coordinator::state::Command;

const WRITER_ENV: &str = "SWITCHYARD_CRASH_WRITER_DIR";
const WRITER_TEST: &str = "crash_writer_child";

fn command_for(index: u64) -> Command {
    Command::RegisterProxy {
        id: format!("proxy-{index}"),
        zone: format!("zone-{}", index % 3),
        admin_address: format!("127.0.0.1:{}", 10_000 + index % 50_000),
    }
}

/// Writer mode: only does something when the parent test started it.
#[test]
fn crash_writer_child() -> anyhow::Result<()> {
    let Ok(dir) = std::env::var(WRITER_ENV) else {
        return Ok(());
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let mut stores = open(dir.as_ref())?;
        // Bounded: the parent kills us long before this ends.
        for index in 1..=1_000_000u64 {
            let entry = Entry {
                log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
                payload: EntryPayload::Normal(std::sync::Arc::new(command_for(index))),
            };
            stores.log.blocking_append([entry]).await?;
            // println! flushes at the newline: stdout is line buffered.
            println!("ACK {index}");
        }
        Ok(())
    })
}

#[test]
fn killed_writer_loses_no_acknowledged_entry() -> anyhow::Result<()> {
    if std::env::var(WRITER_ENV).is_ok() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let mut child = Process::new(std::env::current_exe()?)
        .args([WRITER_TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(WRITER_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("spawn writer")?;
    let pid = child.id();
    let stdout = child.stdout.take().context("writer stdout")?;

    let (tx, rx) = mpsc::channel::<u64>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // The harness may print its own text before ours on a line.
            let ack = line.find("ACK ").map(|at| &line[at + 4..]);
            if let Some(index) = ack.and_then(|i| i.trim().parse().ok())
                && tx.send(index).is_err()
            {
                break;
            }
        }
    });

    // Kill somewhere in the middle of the stream, at a point that varies from
    // run to run, so the kill lands inside different appends.
    let kill_after = 200 + u64::from(pid % 300);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut acked = 0u64;
    while acked < kill_after {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(index) => {
                ensure!(
                    index == acked + 1,
                    "writer acknowledged {index} after {acked}"
                );
                acked = index;
            }
            Err(_) => {
                child.kill()?;
                child.wait()?;
                bail!("writer (pid {pid}) acknowledged only {acked} entries in 60 s");
            }
        }
    }
    // SIGKILL by PID: no destructors, no final flush in the writer.
    child.kill().context("kill writer")?;
    let status = child.wait()?;
    // Lines already in the pipe were acknowledged before the kill, too.
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("stdout reader panicked"))?;
    acked = acked.max(rx.try_iter().max().unwrap_or(0));
    eprintln!("writer pid {pid} killed ({status}) after {acked} acknowledged appends");

    let mut stores = open(dir.path()).context("reopen after kill")?;
    let entries = stores.log.try_get_log_entries(1..=acked).await_blocking()?;
    ensure!(
        entries.len() as u64 == acked,
        "only {} of {acked} acknowledged entries survived",
        entries.len()
    );
    for (entry, index) in entries.iter().zip(1..) {
        ensure!(
            entry.log_id.index == index,
            "entry {index} has index {}",
            entry.log_id.index
        );
        match &entry.payload {
            EntryPayload::Normal(command) if **command == command_for(index) => {}
            other => bail!("entry {index} has payload {other:?}"),
        }
    }
    Ok(())
}

/// Runs a future on a fresh runtime (the test itself is synchronous because
/// it manages a child process and a reader thread).
trait AwaitBlocking: std::future::Future + Sized {
    fn await_blocking(self) -> Self::Output {
        match tokio::runtime::Runtime::new() {
            Ok(runtime) => runtime.block_on(self),
            Err(e) => panic!("tokio runtime: {e}"),
        }
    }
}

impl<F: std::future::Future> AwaitBlocking for F {}
