//! Shared pieces of the process-level tests: a 3-coordinator cluster of
//! real `switchyard` processes and the CLI as a subprocess. Waiting is
//! `switchyard_test_support`'s (re-exported here in its blocking form,
//! since these tests block on subprocesses).

#![allow(dead_code)]

use anyhow::{Context, bail};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use switchyard_harness::{Process, ProcessSpec, free_port, http_get};

pub use switchyard_test_support::eventually_blocking;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

/// What a CLI run printed.
#[derive(Debug)]
pub struct Output {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Stdout.
    pub stdout: String,
    /// Stderr.
    pub stderr: String,
}

/// Runs `switchyard ARGS`.
pub fn cli(args: &[&str]) -> anyhow::Result<Output> {
    let out = Command::new(BIN)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .context("cannot run the switchyard binary")?;
    Ok(Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Three coordinators on loopback with shrunk Raft timings.
pub struct Cluster {
    /// The processes, index i is coordinator i+1.
    pub nodes: Vec<Process>,
    /// Their gRPC addresses.
    pub addresses: Vec<String>,
    /// Data dirs live here.
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts coordinators 1..=3 with `extra` flags each.
    pub fn start(extra: &[&str]) -> anyhow::Result<Cluster> {
        Cluster::start_each(|_| extra.iter().map(|s| s.to_string()).collect())
    }

    /// Starts coordinators 1..=3, index i (coordinator i+1) with the flags
    /// `extra(i)`.
    pub fn start_each(extra: impl Fn(usize) -> Vec<String>) -> anyhow::Result<Cluster> {
        let dir = tempfile::tempdir()?;
        let addresses: Vec<String> = (0..3)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        let peers = addresses
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{}={a}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for (i, address) in addresses.iter().enumerate() {
            let id = (i + 1).to_string();
            let data = dir.path().join(format!("coordinator-{id}"));
            let mut args: Vec<String> = [
                "coordinator",
                "--id",
                &id,
                "--listen",
                address,
                "--peers",
                &peers,
                "--data-dir",
                &data.to_string_lossy(),
                "--heartbeat-interval",
                "50ms",
                "--election-timeout-min",
                "300ms",
                "--election-timeout-max",
                "600ms",
                "--rpc-timeout",
                "500ms",
                // These tests are about Raft and input handling; TLS has
                // its own (tests/security_*.rs), and the fleet tests run it.
                "--insecure",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(extra(i));
            nodes.push(Process::start(ProcessSpec::new(
                format!("coordinator-{id}"),
                BIN,
                args,
            ))?);
        }
        Ok(Cluster {
            nodes,
            addresses,
            dir,
        })
    }

    /// All addresses joined with commas, for `--coordinators`.
    pub fn all(&self) -> String {
        self.addresses.join(",")
    }

    /// `status -o json` from exactly one coordinator.
    pub fn status_of(&self, index: usize) -> anyhow::Result<Value> {
        status_at(&self.addresses[index])
    }

    /// Waits for a leader every running coordinator agrees on; returns its
    /// index.
    pub fn wait_leader(&mut self, timeout: Duration) -> anyhow::Result<usize> {
        let running: Vec<usize> = (0..self.nodes.len())
            .filter(|i| self.nodes[*i].is_running())
            .collect();
        let leader = eventually_blocking("an agreed leader", timeout, || {
            let leaders = running
                .iter()
                .map(|i| Ok(self.status_of(*i)?["leader"].as_u64()))
                .collect::<anyhow::Result<Vec<_>>>()?;
            match leaders.first() {
                Some(Some(l)) if leaders.iter().all(|x| *x == Some(*l)) => Ok((l - 1) as usize),
                _ => bail!("leaders as each running coordinator sees them: {leaders:?}"),
            }
        })?;
        Ok(leader)
    }
}

/// `status -o json --coordinators ADDRESS`, parsed.
pub fn status_at(address: &str) -> anyhow::Result<Value> {
    let out = cli(&[
        "status",
        "-o",
        "json",
        "--coordinators",
        address,
        "--timeout",
        "2s",
        "--insecure",
    ])?;
    if out.code != 0 {
        bail!("status at {address} failed: {}", out.stderr.trim());
    }
    serde_json::from_str(out.stdout.trim()).context("status output is not JSON")
}

/// Writes `text` to `dir/name` and returns the path as a string.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write test file");
    path.to_string_lossy().into_owned()
}

/// A Service and an HTTPRoute in namespace `demo` sending `/` to `backend`.
pub fn route_yaml(route: &str, backend: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: {backend}, namespace: demo}}
spec:
  ports: [{{port: 80, targetPort: 8080}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {route}, namespace: demo}}
spec:
  parentRefs: [{{name: gateway}}]
  rules:
  - backendRefs: [{{name: {backend}, port: 80}}]
"#
    )
}

/// The arguments of `switchyard proxy` serving a fixed configuration from
/// a file written into `dir` — the demo's base objects and route `app` to
/// Service `blue`, which has no endpoints — on an ephemeral listener and
/// admin port, followed by `extra`.
pub fn fixed_proxy_args(dir: &Path, extra: &[&str]) -> Vec<String> {
    use switchyard::demo::manifests;
    let config = write(
        dir,
        "config.yaml",
        &format!("{}---\n{}", manifests::base(), route_yaml("app", "blue")),
    );
    proxy_args_serving(&config, extra)
}

/// The arguments of `switchyard proxy` serving the fixed configuration in
/// file `config` on an ephemeral listener and admin port, followed by
/// `extra`.
pub fn proxy_args_serving(config: &str, extra: &[&str]) -> Vec<String> {
    use switchyard::demo::manifests;
    let listener = format!("{}=127.0.0.1:0", manifests::GATEWAY_PORT);
    let mut args: Vec<String> = [
        "proxy",
        "--id",
        "p1",
        "--config",
        config,
        "--listener",
        &listener,
        "--admin-listen",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The replicated part of each status route row (evidence and applied
/// counts are the leader's soft state and differ between coordinators).
pub fn replicated_routes(status: &Value) -> Value {
    let rows = status["routes"].as_array().cloned().unwrap_or_default();
    Value::Array(
        rows.iter()
            .map(|r| {
                serde_json::json!({
                    "namespace": r["namespace"], "name": r["name"],
                    "active_generation": r["active_generation"],
                    "pending_generation": r["pending_generation"],
                    "policy": r["policy"], "last_failure": r["last_failure"],
                })
            })
            .collect(),
    )
}

/// Applies `text` as a file and expects a failure whose stderr contains
/// every one of `needles`.
pub fn rejected(cluster: &Cluster, name: &str, text: &str, needles: &[&str]) -> anyhow::Result<()> {
    rejected_at(cluster, &cluster.all(), name, text, needles)
}

/// [`rejected`], sent to `coordinators` only.
pub fn rejected_at(
    cluster: &Cluster,
    coordinators: &str,
    name: &str,
    text: &str,
    needles: &[&str],
) -> anyhow::Result<()> {
    let file = write(cluster.dir.path(), name, text);
    let out = cli(&[
        "apply",
        "-f",
        &file,
        "--coordinators",
        coordinators,
        "--insecure",
    ])?;
    assert_ne!(out.code, 0, "{name} was accepted: {}", out.stdout);
    for needle in needles {
        assert!(
            out.stderr.contains(needle),
            "{name}: stderr lacks {needle:?}: {}",
            out.stderr
        );
    }
    // Besides the warning every --insecure run prints.
    let reasons = out
        .stderr
        .trim()
        .lines()
        .filter(|l| !l.contains("--insecure: gRPC runs without TLS"))
        .count();
    assert_eq!(
        reasons, 1,
        "{name}: one-line reason expected: {}",
        out.stderr
    );
    Ok(())
}

/// `switchyard_coordinator_limit_hits_total{limit="LIMIT"}` on coordinator
/// `index`, from its `/metrics`.
pub fn limit_hits(cluster: &Cluster, index: usize, limit: &str) -> anyhow::Result<u64> {
    counter(
        cluster,
        index,
        &format!("switchyard_coordinator_limit_hits_total{{limit=\"{limit}\"}}"),
    )
}

/// The counter `series` (name and labels) on coordinator `index`, from
/// its `/metrics`.
pub fn counter(cluster: &Cluster, index: usize, series: &str) -> anyhow::Result<u64> {
    let text = http_get(&cluster.nodes[index].address("admin")?, "/metrics")?;
    let series = format!("{series} ");
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .with_context(|| format!("coordinator {} has no {series}in:\n{text}", index + 1))?;
    value
        .trim()
        .parse()
        .with_context(|| format!("{series}{value} is not a count"))
}
