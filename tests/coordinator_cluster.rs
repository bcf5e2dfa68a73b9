//! Three real coordinator processes: applies survive a `kill -9` of the
//! leader, every survivor agrees, and a restart of all three on the same
//! data dirs restores every route and generation exactly.

mod support;

use std::time::Duration;
use support::*;

#[test]
fn applies_survive_leader_kill_and_full_restart() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(&[])?;
    let dir = cluster.dir.path().to_path_buf();
    cluster.wait_leader(Duration::from_secs(15))?;

    let first = write(&dir, "first.yaml", &route_yaml("app", "blue"));
    let out = cli(&[
        "apply",
        "-f",
        &first,
        "--coordinators",
        &cluster.all(),
        "--insecure",
    ])?;
    assert_eq!(out.code, 0, "apply failed: {}", out.stderr);
    let first_generation = pending_generation(&out.stdout);

    let leader = cluster.wait_leader(Duration::from_secs(10))?;
    cluster.nodes[leader].kill();
    let survivor = (leader + 1) % 3;

    // Through one surviving coordinator only: it forwards to the new leader.
    let second = write(&dir, "second.yaml", &route_yaml("app", "green"));
    let out = cli(&[
        "apply",
        "-f",
        &second,
        "--coordinators",
        &cluster.addresses[survivor],
        "--insecure",
    ])?;
    assert_eq!(
        out.code, 0,
        "apply after leader kill failed: {}",
        out.stderr
    );
    let second_generation = pending_generation(&out.stdout);
    assert!(second_generation > first_generation, "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("supersedes pending generation {first_generation}")),
        "{}",
        out.stdout
    );

    // Every survivor agrees on the routes.
    let survivors: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let routes = eventually_blocking("survivors to agree", Duration::from_secs(10), || {
        let a = cluster.status_of(survivors[0])?;
        let b = cluster.status_of(survivors[1])?;
        let (a, b) = (replicated_routes(&a), replicated_routes(&b));
        anyhow::ensure!(
            a == b && a[0]["pending_generation"] == second_generation,
            "survivors hold {a} and {b}"
        );
        Ok(a)
    })?;
    assert_eq!(routes.as_array().map(Vec::len), Some(1));
    assert_eq!(routes[0]["namespace"], "demo");
    assert_eq!(routes[0]["name"], "app");
    assert!(routes[0]["active_generation"].is_null());

    // Kill all three, restart them on the same data dirs.
    for node in &mut cluster.nodes {
        node.kill();
    }
    for node in &mut cluster.nodes {
        node.restart()?;
    }
    cluster.wait_leader(Duration::from_secs(15))?;
    for i in 0..3 {
        let restored = eventually_blocking("state restored", Duration::from_secs(10), || {
            let status = replicated_routes(&cluster.status_of(i)?);
            anyhow::ensure!(status == routes, "coordinator {} holds {status}", i + 1);
            Ok(status)
        })?;
        assert_eq!(restored, routes, "coordinator {} after restart", i + 1);
    }
    Ok(())
}

/// The generation in `apply`'s "HTTPRoute demo/app: generation N pending".
fn pending_generation(stdout: &str) -> u64 {
    stdout
        .split("HTTPRoute demo/app: generation ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no pending generation in {stdout:?}"))
}
