//! Bad input to a real 3-coordinator cluster: each gets a clear error
//! naming the problem, no process crashes, and stored state is unchanged.

mod support;

use anyhow::Context;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::*;
use switchyard_harness::{Process, ProcessSpec, free_port, http_get};

/// Applies `text` as a file and expects a failure whose stderr contains
/// every one of `needles`.
fn rejected(cluster: &Cluster, name: &str, text: &str, needles: &[&str]) -> anyhow::Result<()> {
    rejected_at(cluster, &cluster.all(), name, text, needles)
}

/// [`rejected`], sent to `coordinators` only.
fn rejected_at(
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

#[test]
fn bad_input_is_refused_clearly_and_changes_nothing() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(&[
        "--max-objects-per-apply",
        "20",
        "--max-message-bytes",
        "65536",
    ])?;
    cluster.wait_leader(Duration::from_secs(15))?;
    let good = write(cluster.dir.path(), "good.yaml", &route_yaml("app", "blue"));
    let out = cli(&[
        "apply",
        "-f",
        &good,
        "--coordinators",
        &cluster.all(),
        "--insecure",
    ])?;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let before = replicated_routes(&cluster.status_of(0)?);
    let index_before = cluster.status_of(0)?["applied_index"].clone();

    rejected(
        &cluster,
        "malformed.yaml",
        "kind: HTTPRoute\nmetadata: {name: x\n  bad: [",
        &["malformed.yaml"],
    )?;
    rejected(
        &cluster,
        "unknown-kind.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: demo}\n",
        &["unknown-kind.yaml", "ConfigMap"],
    )?;
    let bad_ref = route_yaml("app", "blue").replace("port: 80}]\n", "}]\n");
    rejected(
        &cluster,
        "bad-ref.yaml",
        &bad_ref,
        &["bad-ref.yaml", "port"],
    )?;

    // Oversized: more objects than the coordinator's limit.
    let many: String = (0..25)
        .map(|i| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: ns-{i}}}\n---\n"))
        .collect();
    rejected(&cluster, "many.yaml", &many, &["25 objects", "limit is 20"])?;
    let hits: u64 = (0..3)
        .map(|i| limit_hits(&cluster, i, "objects_per_apply"))
        .sum::<anyhow::Result<u64>>()?;
    assert_eq!(hits, 1, "objects_per_apply hits over all coordinators");
    // Oversized: one message larger than --max-message-bytes.
    let huge = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: huge\n  annotations: {{blob: \"{}\"}}\n",
        "x".repeat(100_000)
    );
    rejected(&cluster, "huge.yaml", &huge, &["message length too large"])?;

    // Garbage bytes on the gRPC port: the connection is dropped, nothing
    // else happens.
    for address in &cluster.addresses {
        let mut stream = TcpStream::connect(address)?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        stream
            .write_all(b"\x16\x03\x01 GET / HTTP/1.1\r\nthis is not HTTP/2\r\n\r\n\x00\xff\xfe")?;
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink);
    }

    for node in &mut cluster.nodes {
        assert!(node.is_running(), "{} crashed", node.name());
    }
    for i in 0..3 {
        let status =
            eventually_blocking("status", Duration::from_secs(5), || cluster.status_of(i))?;
        assert_eq!(
            replicated_routes(&status),
            before,
            "coordinator {} state changed",
            i + 1
        );
    }
    // Rejected applies were refused before reaching the log, or applied as
    // a "no": either way nothing but the index may move.
    assert!(cluster.status_of(0)?["applied_index"].as_u64() >= index_before.as_u64());
    Ok(())
}

#[test]
fn a_coordinator_with_disagreeing_peers_is_refused_and_the_cluster_is_unharmed()
-> anyhow::Result<()> {
    let mut cluster = Cluster::start(&[])?;
    cluster.wait_leader(Duration::from_secs(15))?;
    let good = write(cluster.dir.path(), "good.yaml", &route_yaml("app", "blue"));
    assert_eq!(
        cli(&[
            "apply",
            "-f",
            &good,
            "--coordinators",
            &cluster.all(),
            "--insecure"
        ])?
        .code,
        0
    );
    let before = replicated_routes(&cluster.status_of(0)?);

    // A fourth coordinator that believes the group is {1, 2, 4}.
    let own = format!("127.0.0.1:{}", free_port());
    let peers = format!(
        "1={},2={},4={own}",
        cluster.addresses[0], cluster.addresses[1]
    );
    let data = cluster.dir.path().join("rogue");
    let args: Vec<String> = [
        "coordinator",
        "--id",
        "4",
        "--listen",
        &own,
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
        "--insecure",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut rogue = Process::start(ProcessSpec::new("rogue-4", BIN, args))?;

    // The members notice and say so in their logs, naming both peer lists.
    eventually_blocking(
        "a member to log the disagreement",
        Duration::from_secs(10),
        || {
            cluster
                .nodes
                .iter()
                .any(|n| n.log_text().contains(&own) && n.log_text().contains("disagree"))
        },
    )?;
    assert!(
        rogue.is_running(),
        "the misconfigured coordinator crashed instead of reporting"
    );
    for node in &mut cluster.nodes {
        assert!(node.is_running(), "{} crashed", node.name());
    }
    let leader = cluster.wait_leader(Duration::from_secs(5))?;
    assert!(leader < 3);
    let again = write(
        cluster.dir.path(),
        "again.yaml",
        &route_yaml("app", "green"),
    );
    assert_eq!(
        cli(&[
            "apply",
            "-f",
            &again,
            "--coordinators",
            &cluster.all(),
            "--insecure"
        ])?
        .code,
        0
    );
    let after = replicated_routes(&cluster.status_of(leader)?);
    assert_ne!(after, before, "the cluster still takes applies");
    Ok(())
}

/// `switchyard_coordinator_limit_hits_total{limit="LIMIT"}` on coordinator
/// `index`, from its `/metrics`.
fn limit_hits(cluster: &Cluster, index: usize, limit: &str) -> anyhow::Result<u64> {
    let text = http_get(&cluster.nodes[index].address("admin")?, "/metrics")?;
    let series = format!("switchyard_coordinator_limit_hits_total{{limit=\"{limit}\"}} ");
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .with_context(|| format!("coordinator {} has no {series}in:\n{text}", index + 1))?;
    value
        .trim()
        .parse()
        .with_context(|| format!("{series}{value} is not a count"))
}

/// An EndpointSlice of Service `blue` in `demo` with `count` addresses.
fn slice_yaml(name: &str, count: usize) -> String {
    let addresses: Vec<String> = (1..=count).map(|i| format!("\"10.0.0.{i}\"")).collect();
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: demo\n  \
         labels: {{kubernetes.io/service-name: blue}}\naddressType: IPv4\nports: [{{port: 8080}}]\n\
         endpoints:\n- addresses: [{}]\n",
        addresses.join(", ")
    )
}

#[test]
fn store_limits_refuse_growth_whole_count_the_hits_and_never_block_deletes() -> anyhow::Result<()> {
    // Coordinator 1 allows 3 routes, 2 and 3 allow 2. Each apply carries the
    // limits of the coordinator that took it, so all three replicas store
    // what coordinator 1 accepted even though their own flag is lower: that
    // is how the store gets over a limit (as after lowering the flag).
    let mut cluster = Cluster::start_each(|i| {
        let routes = if i == 0 { "3" } else { "2" };
        ["--max-routes", routes, "--max-endpoints", "3"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    })?;
    cluster.wait_leader(Duration::from_secs(15))?;
    let (first, second) = (cluster.addresses[0].clone(), cluster.addresses[1].clone());
    for name in ["a", "b", "c"] {
        let file = write(
            cluster.dir.path(),
            &format!("{name}.yaml"),
            &route_yaml(name, "blue"),
        );
        let out = cli(&["apply", "-f", &file, "--coordinators", &first, "--insecure"])?;
        assert_eq!(out.code, 0, "route {name}: {}", out.stderr);
    }
    let three = replicated_routes(&cluster.status_of(0)?);
    assert_eq!(three.as_array().map(Vec::len), Some(3));

    // Through coordinator 2 (--max-routes 2): a fourth route is refused,
    // naming the limit and both counts; nothing changes anywhere.
    rejected_at(
        &cluster,
        &second,
        "d.yaml",
        &route_yaml("d", "blue"),
        &["apply refused: 4 HTTPRoutes would exceed --max-routes 2 (3 stored now)"],
    )?;
    // More addresses than --max-endpoints 3, in one slice.
    rejected_at(
        &cluster,
        &second,
        "big-slice.yaml",
        &slice_yaml("blue-1", 4),
        &["apply refused: 4 endpoint addresses would exceed --max-endpoints 3 (0 stored now)"],
    )?;
    for i in 0..3 {
        let status =
            eventually_blocking("status", Duration::from_secs(5), || cluster.status_of(i))?;
        assert_eq!(
            replicated_routes(&status),
            three,
            "coordinator {} state changed",
            i + 1
        );
    }
    // The refused slice was not stored: three addresses still fit.
    let fits = write(cluster.dir.path(), "slice.yaml", &slice_yaml("blue-2", 3));
    let out = cli(&[
        "apply",
        "-f",
        &fits,
        "--coordinators",
        &second,
        "--insecure",
    ])?;
    assert_eq!(out.code, 0, "3 addresses after a refused 4: {}", out.stderr);

    // Counted once each, by the coordinator that took the requests.
    assert_eq!(limit_hits(&cluster, 1, "routes")?, 1);
    assert_eq!(limit_hits(&cluster, 1, "endpoints")?, 1);
    for i in [0, 2] {
        assert_eq!(
            limit_hits(&cluster, i, "routes")?,
            0,
            "coordinator {}",
            i + 1
        );
    }

    // Over the limit, a delete still goes through.
    let b = write(cluster.dir.path(), "b.yaml", &route_yaml("b", "blue"));
    let out = cli(&["delete", "-f", &b, "--coordinators", &second, "--insecure"])?;
    assert_eq!(out.code, 0, "delete over the limit: {}", out.stderr);
    for i in 0..3 {
        eventually_blocking(
            "the delete on every replica",
            Duration::from_secs(5),
            || -> anyhow::Result<()> {
                let routes = replicated_routes(&cluster.status_of(i)?);
                anyhow::ensure!(
                    routes.as_array().map(Vec::len) == Some(2),
                    "routes: {routes}"
                );
                Ok(())
            },
        )?;
    }
    for node in &mut cluster.nodes {
        assert!(node.is_running(), "{} crashed", node.name());
    }
    Ok(())
}

#[test]
fn a_zero_store_limit_is_a_configuration_error() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    for flag in ["--max-routes", "--max-endpoints"] {
        let out = cli(&[
            "coordinator",
            "--id",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--peers",
            "1=127.0.0.1:1",
            "--data-dir",
            &data.to_string_lossy(),
            flag,
            "0",
            "--insecure",
        ])?;
        assert_ne!(out.code, 0, "{flag} 0 was accepted");
        assert!(
            out.stderr.contains(&format!("{flag} must be at least 1")),
            "{flag} 0: {}",
            out.stderr
        );
    }
    Ok(())
}

/// A route in `demo` with one annotation of `bytes` bytes.
fn annotated_route_yaml(name: &str, bytes: usize) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: {name}\n  namespace: demo\n  annotations: {{example.com/blob: \"{}\"}}\nspec:\n  parentRefs: [{{name: gateway}}]\n",
        "x".repeat(bytes)
    )
}

#[test]
fn applies_that_would_stop_configuration_for_every_proxy_are_refused() -> anyhow::Result<()> {
    // Before: two routes with 2.2 MB annotations were each accepted, and
    // from then on no proxy received a configuration (one gRPC message
    // over the 4 MiB limit), and no later change reached them. The same
    // arithmetic at a smaller scale keeps the test quick under load:
    // objects up to 60 kB, configuration up to 90% of 160 kB.
    let mut cluster = Cluster::start(&[
        "--max-object-bytes",
        "60000",
        "--max-message-bytes",
        "160000",
    ])?;
    cluster.wait_leader(Duration::from_secs(15))?;
    rejected(
        &cluster,
        "big.yaml",
        &annotated_route_yaml("big", 70_000),
        &["HTTPRoute demo/big", "--max-object-bytes 60000"],
    )?;
    // Objects that fit, until the configuration proxies receive would not.
    for name in ["a", "b"] {
        let file = write(
            cluster.dir.path(),
            &format!("{name}.yaml"),
            &annotated_route_yaml(name, 50_000),
        );
        let out = cli(&[
            "apply",
            "-f",
            &file,
            "--coordinators",
            &cluster.all(),
            "--insecure",
        ])?;
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
    }
    rejected(
        &cluster,
        "c.yaml",
        &annotated_route_yaml("c", 50_000),
        &["bytes of configuration for proxies", "--max-message-bytes"],
    )?;
    let mut hits = 0;
    for i in 0..3 {
        hits += limit_hits(&cluster, i, "object_bytes")? + limit_hits(&cluster, i, "config_bytes")?;
    }
    assert_eq!(hits, 2, "size limit hits over all coordinators");
    // The store stays deliverable: a small change still goes through.
    let small = write(cluster.dir.path(), "small.yaml", &route_yaml("app", "blue"));
    let out = cli(&[
        "apply",
        "-f",
        &small,
        "--coordinators",
        &cluster.all(),
        "--insecure",
    ])?;
    assert_eq!(out.code, 0, "{}", out.stderr);
    Ok(())
}

#[test]
fn apply_wait_says_why_a_route_is_served_nowhere_and_fails() -> anyhow::Result<()> {
    // Before: a route on a Gateway that does not exist showed "Ready, 1
    // of 1 proxies" and `apply --wait` succeeded.
    let mut cluster = Cluster::start(&[])?;
    cluster.wait_leader(Duration::from_secs(15))?;
    let yaml = route_yaml("app", "blue").replace(
        "parentRefs: [{name: gateway}]",
        "parentRefs: [{name: nowhere}]",
    );
    let file = write(cluster.dir.path(), "orphan.yaml", &yaml);
    let out = cli(&[
        "apply",
        "-f",
        &file,
        "--wait",
        "--wait-timeout",
        "10s",
        "--coordinators",
        &cluster.all(),
        "--insecure",
    ])?;
    assert_ne!(out.code, 0, "apply --wait succeeded: {}", out.stdout);
    assert!(
        out.stderr.contains("is not served")
            && out.stderr.contains("Gateway demo/nowhere does not exist"),
        "{}",
        out.stderr
    );
    let status = cluster.status_of(0)?;
    let row = &status["routes"][0];
    assert!(
        row["not_served"]
            .as_str()
            .is_some_and(|s| s.contains("does not exist")),
        "{row}"
    );
    assert_eq!(row["ready"], false, "{row}");
    Ok(())
}
