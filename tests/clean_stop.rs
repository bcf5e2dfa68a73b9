//! A SIGTERM sent the moment a process says `LISTENING` stops it cleanly
//! (exit status 0), for each long-running command: its signal handler is
//! installed before it announces itself. Before, the handler was set up
//! in a task that could run later, so an early SIGTERM found the default
//! action and killed the process without its clean stop (a proxy's access
//! log then lost its lines).

mod support;

use std::time::Duration;
use support::{BIN, fixed_proxy_args};
use switchyard_harness::{Process, ProcessSpec, free_port};

/// Starts made and stopped per command: the window was short, so one try
/// would rarely have shown it.
const TRIES: usize = 5;

/// Starts `args(i)` for try `i` of `TRIES`, each stopped with SIGTERM as
/// soon as it printed `LISTENING`; every exit must be 0.
fn stops_cleanly_right_after_listening(
    name: &str,
    args: impl Fn(usize) -> Vec<String>,
) -> anyhow::Result<()> {
    for i in 0..TRIES {
        let mut process = Process::start(ProcessSpec::new(format!("{name}-{i}"), BIN, args(i)))?;
        let code = process.terminate(Duration::from_secs(20));
        assert_eq!(code, Some(0), "{name}, try {i}:\n{}", process.log_text());
    }
    Ok(())
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_proxy_stops_cleanly_on_a_sigterm_right_after_listening() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let args = fixed_proxy_args(dir.path(), &[]);
    stops_cleanly_right_after_listening("proxy", |_| args.clone())
}

#[test]
fn a_backend_stops_cleanly_on_a_sigterm_right_after_listening() -> anyhow::Result<()> {
    let args = strings(&["backend", "--name", "blue", "--listen", "127.0.0.1:0"]);
    stops_cleanly_right_after_listening("backend", |_| args.clone())
}

#[test]
fn a_coordinator_stops_cleanly_on_a_sigterm_right_after_listening() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // A port and data directory of its own per try.
    stops_cleanly_right_after_listening("coordinator", |i| {
        let address = format!("127.0.0.1:{}", free_port());
        let data = dir.path().join(format!("data-{i}"));
        strings(&[
            "coordinator",
            "--id",
            "1",
            "--listen",
            &address,
            "--peers",
            &format!("1={address}"),
            "--data-dir",
            &data.to_string_lossy(),
            "--insecure",
        ])
    })
}
