//! `switchyard node-zone` and `switchyard proxy --zone-file` as real
//! processes: the init container's command reads the node from a fake API
//! server and writes its zone label to a file; a node without the label
//! fails naming the node and the label unless `--fallback-zone` is given
//! (then an INFO line says so); a proxy started with `--zone-file`
//! registers with a coordinator in that zone; bad flags and unreadable
//! files exit non-zero with the reason.

mod support;

use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::{BIN, Output, cli, eventually_blocking, status_at, write};
use switchyard_harness::{Process, ProcessSpec, free_port};
use switchyard_test_support::fake_kube::FakeApiServer;

const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

fn node(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
}

/// A fake cluster with a zoned node `node-a` and a node `bare` without
/// zone, and a kubeconfig for it in `dir`. It runs on its own runtime:
/// these tests block on the CLI.
fn cluster(dir: &Path) -> (FakeApiServer, String) {
    let kube = FakeApiServer::start_on_own_runtime(vec![
        node("node-a", json!({ZONE_LABEL: "eu-west-1a"})),
        node("bare", json!({"kubernetes.io/hostname": "bare"})),
    ]);
    let kubeconfig = write(dir, "kubeconfig.yaml", &kube.kubeconfig("fake-ctx"));
    (kube, kubeconfig)
}

/// Asserts a failure with exit code `code` whose stderr contains every needle.
fn fails(what: &str, out: &Output, code: i32, needles: &[&str]) {
    assert_eq!(out.code, code, "{what}: {}{}", out.stdout, out.stderr);
    for needle in needles {
        assert!(
            out.stderr.contains(needle),
            "{what}: {needle:?} missing from: {}",
            out.stderr
        );
    }
}

#[test]
fn node_zone_writes_the_zone_label_of_the_node() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (kube, kubeconfig) = cluster(dir.path());
    let out = dir.path().join("zone");
    let out_text = out.to_string_lossy();
    let run = cli(&[
        "node-zone",
        "--node",
        "node-a",
        "--out",
        &out_text,
        "--kubernetes",
        &kubeconfig,
    ])?;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, "", "a clean run logs no warning");
    assert_eq!(std::fs::read_to_string(&out)?, "eu-west-1a\n");
    let paths: Vec<String> = kube.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/api/v1/nodes/node-a"]);
    Ok(())
}

/// As deploy/proxy.yaml runs it: the node from `SWITCHYARD_NODE` (the
/// downward API's spec.nodeName), `--out=FILE`, JSON logs at INFO, whose
/// one line says which zone was written, at INFO.
#[test]
fn node_zone_runs_as_the_manifest_runs_it() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (_kube, kubeconfig) = cluster(dir.path());
    let out = dir.path().join("zone");
    let run = Command::new(BIN)
        .arg("node-zone")
        .arg(format!("--out={}", out.display()))
        .arg(format!("--kubernetes={kubeconfig}"))
        .env("SWITCHYARD_NODE", "node-a")
        .env("SWITCHYARD_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .output()?;
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert_eq!(std::fs::read_to_string(&out)?, "eu-west-1a\n");
    let lines: Vec<Value> = stderr
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let written = lines
        .iter()
        .find(|l| l["fields"]["message"] == "zone written")
        .unwrap_or_else(|| panic!("no \"zone written\" line in: {stderr}"));
    assert_eq!(written["level"], "INFO", "{written}");
    assert_eq!(written["fields"]["zone"], "eu-west-1a", "{written}");
    assert!(
        lines.iter().all(|l| l["level"] == "INFO"),
        "only INFO lines in a clean run: {stderr}"
    );
    Ok(())
}

#[test]
fn a_node_without_the_label_fails_unless_a_fallback_is_given() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (_kube, kubeconfig) = cluster(dir.path());
    let out = dir.path().join("zone");
    let out_text = out.to_string_lossy().into_owned();
    let args = [
        "node-zone",
        "--node",
        "bare",
        "--out",
        &out_text,
        "--kubernetes",
        &kubeconfig,
    ];
    let run = cli(&args)?;
    fails(
        "no label",
        &run,
        1,
        &[
            "node \"bare\" has no label \"topology.kubernetes.io/zone\"",
            "--fallback-zone",
        ],
    );
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(!out.exists(), "nothing written on failure");

    // With a fallback: written, and an INFO line names node and label.
    let run = Command::new(BIN)
        .args(args)
        .args(["--fallback-zone", "default"])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .output()?;
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert_eq!(std::fs::read_to_string(&out)?, "default\n");
    let line = stderr
        .lines()
        .find(|l| l.contains("using --fallback-zone"))
        .unwrap_or_else(|| panic!("no fallback line in: {stderr}"));
    assert!(
        line.contains("INFO") && line.contains("bare") && line.contains(ZONE_LABEL),
        "{line}"
    );
    Ok(())
}

#[test]
fn node_zone_errors_name_what_is_wrong() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (_kube, kubeconfig) = cluster(dir.path());
    let out = dir.path().join("zone").to_string_lossy().into_owned();
    let base = ["node-zone", "--out", &out, "--kubernetes", &kubeconfig];
    let with = |extra: &[&str]| -> anyhow::Result<Output> {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        cli(&args)
    };

    let run = with(&["--node", "node-z"])?;
    fails("no such node", &run, 1, &["node \"node-z\" does not exist"]);

    let run = with(&[])?;
    fails("no --node", &run, 2, &["--node"]);

    let run = with(&["--node", "bare", "--fallback-zone", "a b"])?;
    fails(
        "bad fallback",
        &run,
        2,
        &["--fallback-zone", "is not a zone"],
    );

    let missing = dir.path().join("missing-dir/zone");
    let missing = missing.to_string_lossy();
    let run = cli(&[
        "node-zone",
        "--node",
        "node-a",
        "--out",
        &missing,
        "--kubernetes",
        &kubeconfig,
    ])?;
    fails(
        "unwritable --out",
        &run,
        1,
        &[&format!("--out {missing}: cannot write the zone")],
    );

    let no_kubeconfig = dir.path().join("absent.yaml");
    let no_kubeconfig = no_kubeconfig.to_string_lossy();
    let run = cli(&[
        "node-zone",
        "--node",
        "node-a",
        "--out",
        &out,
        "--kubernetes",
        &no_kubeconfig,
    ])?;
    fails(
        "unreadable kubeconfig",
        &run,
        1,
        &[&format!("--kubernetes {no_kubeconfig}")],
    );
    Ok(())
}

#[test]
fn a_proxy_with_a_zone_file_registers_in_that_zone() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let zone_file = write(dir.path(), "zone", "eu-west-1a\n");
    let address = format!("127.0.0.1:{}", free_port());
    let data = dir.path().join("data");
    let coordinator_args: Vec<String> = [
        "coordinator",
        "--id",
        "1",
        "--peers",
        &format!("1={address}"),
        "--listen",
        &address,
        "--data-dir",
        &data.to_string_lossy(),
        "--insecure",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let _coordinator = Process::start(ProcessSpec::new("coordinator-1", BIN, coordinator_args))?;
    let proxy_args: Vec<String> = [
        "proxy",
        "--id",
        "p1",
        "--zone-file",
        &zone_file,
        "--listener",
        "80=127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--coordinators",
        &address,
        "--insecure",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let _proxy = Process::start(ProcessSpec::new("proxy-p1", BIN, proxy_args))?;
    let proxies = eventually_blocking("p1 registered", Duration::from_secs(20), || {
        let proxies = status_at(&address)?["proxies"].clone();
        anyhow::ensure!(
            proxies.as_array().is_some_and(|p| !p.is_empty()),
            "{proxies}"
        );
        Ok(proxies)
    })?;
    assert_eq!(proxies[0]["id"], "p1", "{proxies}");
    assert_eq!(proxies[0]["zone"], "eu-west-1a", "{proxies}");
    Ok(())
}

#[test]
fn zone_file_flag_errors() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let zone_file = write(dir.path(), "zone", "eu-west-1a\n");
    let proxy = |extra: &[&str]| -> anyhow::Result<Output> {
        let mut args = vec![
            "proxy",
            "--id",
            "p1",
            "--listener",
            "80=127.0.0.1:0",
            "--coordinators",
            "127.0.0.1:1",
            "--insecure",
        ];
        args.extend_from_slice(extra);
        cli(&args)
    };
    let run = proxy(&["--zone", "a", "--zone-file", &zone_file])?;
    fails(
        "both",
        &run,
        2,
        &["--zone-file <FILE>", "cannot be used with", "--zone <ZONE>"],
    );

    let absent = dir.path().join("absent");
    let absent = absent.to_string_lossy();
    let run = proxy(&["--zone-file", &absent])?;
    fails(
        "no file",
        &run,
        1,
        &[&format!("--zone-file {absent}: cannot read it")],
    );

    let bad = write(dir.path(), "bad", "not a zone\n");
    let run = proxy(&["--zone-file", &bad])?;
    fails(
        "bad zone",
        &run,
        1,
        &[&format!("--zone-file {bad}: \"not a zone\" is not a zone")],
    );
    Ok(())
}
