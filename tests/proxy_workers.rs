//! `switchyard proxy --workers N`: 1 serves on a single thread (a
//! current-thread runtime: no Tokio worker threads at all), N > 1 on N
//! threads of its own (`switchyard-worker-I`), each connection on one of
//! them in turn; either way requests reach the backend, upstream
//! connections are reused, and the proxy stops cleanly on SIGTERM.
//!
//! Threads are read from `/proc/PID/task/*/comm`: Tokio names its
//! multi-threaded runtime's workers `tokio-rt-worker`.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::{BIN, proxy_args_serving, write};
use switchyard::demo::manifests;
use switchyard_harness::{Process, ProcessSpec};

/// Requests sent through each proxy.
const REQUESTS: usize = 20;

/// The names of `pid`'s threads.
fn thread_names(pid: i32) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let comm = std::fs::read_to_string(task?.path().join("comm"))?;
        names.push(comm.trim().to_string());
    }
    Ok(names)
}

/// One GET through `listener` (`HOST:PORT`); the whole response.
fn get(listener: &str) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(listener)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: app.example\r\nConnection: close\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    Ok(text)
}

/// Threads of a proxy, by kind.
#[derive(Debug, PartialEq)]
struct Threads {
    /// Workers of a multi-threaded Tokio runtime.
    tokio_workers: usize,
    /// The proxy's own worker threads.
    proxy_workers: usize,
}

/// Starts a backend and a proxy with `--workers workers` in front of it;
/// returns the proxy's threads after serving [`REQUESTS`] requests, each
/// on a connection of its own and each of which must have reached the
/// backend.
fn serve_with(workers: &str) -> anyhow::Result<Threads> {
    let dir = tempfile::tempdir()?;
    let mut backend = Process::start(ProcessSpec::new(
        format!("backend-{workers}"),
        BIN,
        ["backend", "--name", "v1", "--listen", "127.0.0.1:0"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    ))?;
    let backend_address = backend.address("http")?.parse()?;
    let config = write(
        dir.path(),
        "config.yaml",
        &format!(
            "{}{}{}",
            manifests::base(),
            manifests::backend("v1", backend_address),
            manifests::route("v1", "h0", "30s")
        ),
    );
    let args = proxy_args_serving(&config, &["--workers", workers]);
    let mut proxy = Process::start(ProcessSpec::new(format!("proxy-{workers}"), BIN, args))?;
    let address = proxy.address(&manifests::GATEWAY_PORT.to_string())?;
    // The endpoint is served once its first health check passed.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !get(&address)?.starts_with("HTTP/1.1 200") {
        assert!(
            std::time::Instant::now() < deadline,
            "the backend never became ready:\n{}",
            proxy.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in 0..REQUESTS {
        let response = get(&address)?;
        assert!(
            response.starts_with("HTTP/1.1 200") && response.contains("x-backend: v1"),
            "request {i} with --workers {workers}:\n{response}\n{}",
            proxy.log_text()
        );
    }
    let pid = proxy.pid().expect("a running proxy has a PID");
    let names = thread_names(pid)?;
    let threads = Threads {
        tokio_workers: names.iter().filter(|n| *n == "tokio-rt-worker").count(),
        proxy_workers: names
            .iter()
            .filter(|n| n.starts_with("switchyard-work"))
            .count(),
    };
    assert_eq!(
        proxy.terminate(Duration::from_secs(20)),
        Some(0),
        "{}",
        proxy.log_text()
    );
    backend.terminate(Duration::from_secs(20));
    let warnings = proxy.warnings();
    assert!(warnings.is_empty(), "{warnings:?}");
    Ok(threads)
}

#[test]
fn one_worker_serves_on_a_single_thread_runtime() -> anyhow::Result<()> {
    let threads = serve_with("1")?;
    assert_eq!(
        threads,
        Threads {
            tokio_workers: 0,
            proxy_workers: 0
        }
    );
    Ok(())
}

#[test]
fn n_workers_serve_on_n_threads_of_their_own() -> anyhow::Result<()> {
    let threads = serve_with("3")?;
    assert_eq!(
        threads,
        Threads {
            tokio_workers: 0,
            proxy_workers: 3
        }
    );
    Ok(())
}

#[test]
fn zero_workers_is_refused_with_a_clear_error() -> anyhow::Result<()> {
    let output = std::process::Command::new(BIN)
        .args(["proxy", "--id", "p1", "--config", "x.yaml"])
        .args(["--listener", "80=127.0.0.1:0", "--workers", "0"])
        .output()?;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--workers") && stderr.contains("0"),
        "{stderr}"
    );
    Ok(())
}
