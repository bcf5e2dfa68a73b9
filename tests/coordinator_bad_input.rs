//! Bad input to a real 3-coordinator cluster: each gets a clear error
//! naming the problem, no process crashes, and stored state is unchanged.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::*;
use switchyard_harness::{Process, ProcessSpec, free_port};

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
        "apiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: demo}\n",
        &["unknown-kind.yaml", "Pod"],
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

    // A Gateway whose GatewayClass does not exist serves nothing either.
    let yaml = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: classless, namespace: demo}}\n\
         spec:\n  gatewayClassName: missing\n  listeners: [{{name: http, port: 8080, protocol: HTTP}}]\n---\n{}",
        route_yaml("classy", "blue").replace(
            "parentRefs: [{name: gateway}]",
            "parentRefs: [{name: classless}]",
        )
    );
    let file = write(cluster.dir.path(), "classless.yaml", &yaml);
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
            && out
                .stderr
                .contains("Gateway demo/classless is of GatewayClass \"missing\""),
        "{}",
        out.stderr
    );
    Ok(())
}
