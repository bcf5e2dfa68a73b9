//! Store limits of a real 3-coordinator cluster: growth past a limit is
//! refused whole and counted, deletes always go through, a zero limit is a
//! configuration error, and no apply can make the configuration proxies
//! receive undeliverable.

mod support;

use std::time::Duration;
use support::*;

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
fn oversized_objects_are_refused_and_the_configuration_as_a_whole_is_not_bounded()
-> anyhow::Result<()> {
    // Before: two routes with 2.2 MB annotations were each accepted, and
    // from then on no proxy received a configuration (one gRPC message
    // over the 4 MiB limit). Then the store refused applies past 90% of
    // one message. Now watch streams send the configuration in chunks
    // below a quarter of the message limit, so only single objects are
    // bounded. The same arithmetic at a smaller scale keeps the test
    // quick under load: objects up to 60 kB, messages up to 160 kB.
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
    // Objects that fit, past what one message could carry in total.
    for name in ["a", "b", "c"] {
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
    let mut hits = 0;
    for i in 0..3 {
        hits += limit_hits(&cluster, i, "object_bytes")? + limit_hits(&cluster, i, "config_bytes")?;
    }
    assert_eq!(hits, 1, "size limit hits over all coordinators");
    // A small change still goes through.
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
