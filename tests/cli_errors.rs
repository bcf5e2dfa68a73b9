//! The CLI against coordinators it cannot use, as real processes: a port
//! nobody listens on and certificates of another CA end the call at once
//! with a one-line reason (retrying cannot fix them), while a cluster
//! without a leader is retried until the deadline and a leader elected
//! meanwhile is used; `--coordinators HOST` means port 7000, the
//! coordinator's default `--listen` port, and malformed addresses are
//! refused naming the flag and the `HOST:PORT` form.
//!
//! The elapsed-time bounds are generous: they tell "gave up at once" from
//! "retried for the whole --timeout", they are not benchmarks.

mod support;

use anyhow::Context;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{BIN, Output, cli, route_yaml, write};
use switchyard_harness::{Process, ProcessSpec, free_port};
use switchyard_proxy::control::coordinators::DEFAULT_COORDINATOR_PORT;

/// "Gave up at once": far below the 10 s default `--timeout`.
const FAST: Duration = Duration::from_secs(5);

/// The lines of stderr that are not the `--insecure` warning.
fn reasons(out: &Output) -> Vec<&str> {
    out.stderr
        .lines()
        .filter(|l| !l.contains("--insecure: gRPC runs without TLS"))
        .collect()
}

/// Runs the CLI, returning what it printed and how long it took.
fn timed(args: &[&str]) -> anyhow::Result<(Output, Duration)> {
    let started = Instant::now();
    let out = cli(args)?;
    Ok((out, started.elapsed()))
}

/// Asserts a failure within [`FAST`] with exactly one line of reason that
/// contains every needle.
fn fails_fast(what: &str, out: &Output, took: Duration, needles: &[&str]) {
    assert_ne!(out.code, 0, "{what}: succeeded: {}", out.stdout);
    assert!(took < FAST, "{what}: took {took:?}: {}", out.stderr);
    let lines = reasons(out);
    assert_eq!(lines.len(), 1, "{what}: one line expected: {}", out.stderr);
    for needle in needles {
        assert!(
            lines[0].contains(needle),
            "{what}: {needle:?} missing from: {}",
            lines[0]
        );
    }
}

fn route_file(dir: &Path) -> String {
    write(dir, "route.yaml", &route_yaml("app", "blue"))
}

#[test]
fn apply_to_ports_nobody_listens_on_fails_at_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let file = route_file(dir.path());
    let one = format!("127.0.0.1:{}", free_port());
    let (out, took) = timed(&["apply", "-f", &file, "--coordinators", &one, "--insecure"])?;
    fails_fast(
        "one address",
        &out,
        took,
        &[
            "no coordinator can be reached",
            &format!("{one}: connection refused"),
            "nothing listens there",
        ],
    );

    // Every listed coordinator refuses: one round, then the reason of each.
    let two = format!("127.0.0.1:{}", free_port());
    let both = format!("{one},{two}");
    let (out, took) = timed(&["apply", "-f", &file, "--coordinators", &both, "--insecure"])?;
    fails_fast(
        "two addresses",
        &out,
        took,
        &[
            &format!("{one}: connection refused"),
            &format!("{two}: connection refused"),
        ],
    );
    Ok(())
}

/// `certs init --dir DIR/NAME`: a CA with coordinator-1 and admin-ops.
fn certs(dir: &Path, name: &str) -> anyhow::Result<String> {
    let certs = dir.join(name).to_string_lossy().into_owned();
    let out = cli(&[
        "certs",
        "init",
        "--dir",
        &certs,
        "--coordinators",
        "1",
        "--admins",
        "ops",
    ])?;
    anyhow::ensure!(out.code == 0, "certs init: {}", out.stderr);
    Ok(certs)
}

fn tls(ca: &str, cert: &str, who: &str) -> Vec<String> {
    vec![
        "--ca".into(),
        format!("{ca}/ca.pem"),
        "--cert".into(),
        format!("{cert}/{who}.pem"),
        "--key".into(),
        format!("{cert}/{who}-key.pem"),
    ]
}

/// One coordinator forming a cluster of `peers` (which must include
/// `1=address`), with `flags` (TLS or `--insecure`).
fn coordinator(
    dir: &Path,
    address: &str,
    peers: &str,
    flags: &[String],
) -> anyhow::Result<Process> {
    coordinator_id(dir, "1", address, peers, flags)
}

fn coordinator_id(
    dir: &Path,
    id: &str,
    address: &str,
    peers: &str,
    flags: &[String],
) -> anyhow::Result<Process> {
    let mut args: Vec<String> = [
        "coordinator",
        "--id",
        id,
        "--peers",
        peers,
        "--listen",
        address,
        "--data-dir",
        &dir.join(format!("data-{id}")).to_string_lossy(),
        "--heartbeat-interval",
        "50ms",
        "--election-timeout-min",
        "300ms",
        "--election-timeout-max",
        "600ms",
    ]
    .map(String::from)
    .to_vec();
    args.extend(flags.iter().cloned());
    Process::start(ProcessSpec::new(format!("coordinator-{id}"), BIN, args))
}

fn apply(file: &str, coordinators: &str, flags: &[String]) -> anyhow::Result<(Output, Duration)> {
    let mut args: Vec<&str> = vec!["apply", "-f", file, "--coordinators", coordinators];
    args.extend(flags.iter().map(String::as_str));
    timed(&args)
}

#[test]
fn certificates_of_another_ca_fail_at_once_and_say_which_side() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let ours = certs(dir.path(), "ours")?;
    let theirs = certs(dir.path(), "theirs")?;
    let address = format!("127.0.0.1:{}", free_port());
    let mut node = coordinator(
        dir.path(),
        &address,
        &format!("1={address}"),
        &tls(&ours, &ours, "coordinator-1"),
    )?;
    let file = route_file(dir.path());

    // --ca of another cluster: the coordinator's certificate is not signed
    // by it, which the client finds in the handshake.
    let (out, took) = apply(&file, &address, &tls(&theirs, &theirs, "admin-ops"))?;
    fails_fast(
        "a CA that did not sign the coordinator's certificate",
        &out,
        took,
        &[
            &format!("{address}: TLS handshake failed: invalid peer certificate"),
            "not signed by the CA given with --ca",
        ],
    );

    // The right --ca, a client certificate of another CA: the coordinator
    // refuses it.
    let (out, took) = apply(&file, &address, &tls(&ours, &theirs, "admin-ops"))?;
    fails_fast(
        "a client certificate the coordinator does not trust",
        &out,
        took,
        &[&address, "the coordinator refused this client certificate"],
    );

    // Plaintext to the TLS port.
    let (out, took) = apply(&file, &address, &["--insecure".to_string()])?;
    fails_fast(
        "--insecure against TLS",
        &out,
        took,
        &[&address, "requires TLS: pass --ca, --cert and --key"],
    );

    // The coordinator was serving all along: its own CA's admin gets in.
    let (out, _) = apply(&file, &address, &tls(&ours, &ours, "admin-ops"))?;
    assert_eq!(out.code, 0, "{}", out.stderr);
    node.kill();
    Ok(())
}

#[test]
fn no_leader_yet_is_retried_until_the_deadline_or_a_leader() -> anyhow::Result<()> {
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
    let insecure = ["--insecure".to_string()];
    let file = route_file(dir.path());
    // One of three: it answers, but can never have a leader alone.
    let mut nodes = vec![coordinator(dir.path(), &addresses[0], &peers, &insecure)?];

    // The other two addresses refuse, it waits for a leader that does not
    // come: the call keeps trying for the whole --timeout, then names each
    // address's reason.
    let all = format!("{},{},{}", addresses[1], addresses[2], addresses[0]);
    let (out, took) = timed(&[
        "apply",
        "-f",
        &file,
        "--coordinators",
        &all,
        "--insecure",
        "--timeout",
        "2s",
    ])?;
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(took >= Duration::from_secs(2), "gave up after {took:?}");
    let lines = reasons(&out);
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].contains("no coordinator answered within 2s"),
        "{}",
        lines[0]
    );
    for refused in &addresses[1..] {
        let needle = format!("{refused}: connection refused");
        assert!(lines[0].contains(&needle), "{}", lines[0]);
    }
    assert!(
        lines[0].contains(&format!("{}: ", addresses[0])),
        "{}",
        lines[0]
    );

    // An apply waiting for a leader goes through once the others start.
    let waiting = std::process::Command::new(BIN)
        .args([
            "apply",
            "-f",
            &file,
            "--coordinators",
            &addresses[0],
            "--insecure",
        ])
        .args(["--timeout", "30s"])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("apply")?;
    for (i, address) in addresses.iter().enumerate().skip(1) {
        let id = (i + 1).to_string();
        nodes.push(coordinator_id(dir.path(), &id, address, &peers, &insecure)?);
    }
    let done = waiting.wait_with_output()?;
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    for node in &mut nodes {
        node.kill();
    }
    Ok(())
}

#[test]
fn a_host_without_a_port_means_the_coordinator_default_port() -> anyhow::Result<()> {
    // The default is the port of the coordinator's own --listen default.
    let help = cli(&["coordinator", "--help"])?;
    assert!(
        help.stdout
            .contains(&format!("[default: 127.0.0.1:{DEFAULT_COORDINATOR_PORT}]")),
        "{}",
        help.stdout
    );

    // Nothing listens on localhost:7000 here (tests use free ports), or a
    // coordinator does: either way the call went to port 7000, not 80.
    let (out, took) = timed(&[
        "status",
        "--coordinators",
        "localhost",
        "--insecure",
        "--timeout",
        "2s",
    ])?;
    if out.code != 0 {
        assert!(took < FAST, "took {took:?}");
        let lines = reasons(&out);
        assert_eq!(lines.len(), 1, "{}", out.stderr);
        assert!(lines[0].contains("localhost:7000: "), "{}", lines[0]);
    }

    // Malformed addresses are refused before anything is tried, naming the
    // flag and the form; the same rule for the proxy's --coordinators.
    for bad in [
        "localhost:http",
        "localhost:0",
        "::1",
        "http://localhost:7000",
    ] {
        let out = cli(&["status", "--coordinators", bad, "--insecure"])?;
        assert_ne!(out.code, 0, "{bad}");
        assert!(
            out.stderr.contains("--coordinators")
                && out
                    .stderr
                    .contains("expected HOST:PORT (a HOST alone means port 7000)"),
            "{bad}: {}",
            out.stderr
        );
        let out = cli(&[
            "proxy",
            "--id",
            "p1",
            "--listener",
            "8080=127.0.0.1:0",
            "--coordinators",
            &format!("a={bad}"),
            "--insecure",
        ])?;
        assert_ne!(out.code, 0, "proxy {bad}");
        assert!(
            out.stderr.contains("--coordinators") && out.stderr.contains("expected HOST:PORT"),
            "proxy {bad}: {}",
            out.stderr
        );
    }
    Ok(())
}

/// The YAML the demo and the process-level tests apply passes strict field
/// validation (the demo parses it like any user file).
#[test]
fn the_demo_manifests_have_no_unknown_fields() -> anyhow::Result<()> {
    use switchyard::demo::manifests;
    let backend = "127.0.0.1:18081".parse()?;
    let yaml = format!(
        "{}{}{}---\n{}",
        manifests::base(),
        manifests::backend("blue", backend),
        manifests::route("blue", "v1", "30s"),
        route_yaml("app2", "green"),
    );
    let resources = switchyard_kubeconfig::parse_documents("demo.yaml", &yaml)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(resources.len(), 8);
    Ok(())
}

#[test]
fn a_status_route_that_is_not_namespace_slash_name_is_refused_before_any_call() -> anyhow::Result<()>
{
    let (out, took) = timed(&[
        "status",
        "--route",
        "just-a-name",
        "--coordinators",
        "127.0.0.1:1",
        "--insecure",
    ])?;
    assert_eq!(out.code, 2, "a usage error: {}", out.stderr);
    assert!(took < FAST);
    assert!(
        out.stderr.contains("\"just-a-name\" is not NAMESPACE/NAME")
            && out.stderr.contains("--route"),
        "{}",
        out.stderr
    );
    Ok(())
}

#[test]
fn proxy_help_documents_the_access_log_and_a_bad_path_stops_the_proxy() -> anyhow::Result<()> {
    let help = cli(&["proxy", "--help"])?;
    assert_eq!(help.code, 0, "{}", help.stderr);
    assert!(
        help.stdout.contains("--access-log <PATH|->")
            && help
                .stdout
                .contains("switchyard_proxy_access_log_dropped_total"),
        "{}",
        help.stdout
    );

    // A file that cannot be opened is a configuration error, before
    // anything serves.
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("no-such-dir").join("access.json");
    let config = write(dir.path(), "config.yaml", &route_yaml("app", "blue"));
    let (out, took) = timed(&[
        "proxy",
        "--id",
        "p1",
        "--config",
        &config,
        "--listener",
        "8080=127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--access-log",
        &missing.to_string_lossy(),
    ])?;
    fails_fast(
        "unopenable access log",
        &out,
        took,
        &["--access-log", "no-such-dir"],
    );
    Ok(())
}

/// `--handoff-socket` in a directory that does not exist: the proxy stops
/// before serving, naming the path, rather than serving without the
/// handoff a later replacement would count on.
#[test]
fn a_handoff_socket_in_a_missing_directory_stops_the_proxy() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("no-such-dir").join("edge.sock");
    let config = write(dir.path(), "config.yaml", &route_yaml("app", "blue"));
    let args =
        support::proxy_args_serving(&config, &["--handoff-socket", &missing.to_string_lossy()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, took) = timed(&args)?;
    fails_fast(
        "handoff socket in a missing directory",
        &out,
        took,
        &["cannot offer sockets at", "no-such-dir"],
    );
    Ok(())
}
