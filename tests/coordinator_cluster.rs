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

/// The leader holds heartbeat answers while applies pile up even when
/// the clients write through a follower: the follower groups their
/// applies and forwards each group, and the leader counts the group it
/// writes. Three real coordinators paced at 10 calls a second, one proxy
/// played by hand (its share: 100 ms).
#[test]
fn applies_piling_up_on_a_follower_pace_the_leader_s_fleet() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(&["--paced-fleet-calls-per-second", "10"])?;
    let leader = cluster.wait_leader(Duration::from_secs(15))?;
    let follower = (leader + 1) % 3;
    let paced = |index: usize| {
        counter(
            &cluster,
            index,
            "switchyard_coordinator_fleet_paced_answers_total",
        )
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        use switchyard_proto::pb;
        let channel = |address: &str| {
            tonic::transport::Endpoint::from_shared(format!("http://{address}"))
                .map(|e| e.connect_lazy())
        };
        let mut fleet =
            pb::fleet_service_client::FleetServiceClient::new(channel(&cluster.addresses[leader])?);
        let registered = fleet
            .register(pb::RegisterRequest::for_proxy("p0", "a", ""))
            .await?
            .into_inner();
        let heartbeat = pb::HeartbeatRequest {
            proxy_id: "p0".into(),
            registration: registered.registration,
            ..Default::default()
        };
        fleet.heartbeat(heartbeat.clone()).await?;
        anyhow::ensure!(paced(leader)? == 0, "held with no applies at all");

        // Sixteen clients of the follower, applying at once round after
        // round until stopped.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut clients = Vec::new();
        for i in 0..16 {
            let mut admin = pb::admin_service_client::AdminServiceClient::new(channel(
                &cluster.addresses[follower],
            )?);
            let stop = stop.clone();
            clients.push(tokio::spawn(async move {
                let mut round = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    round += 1;
                    let yaml = route_yaml(&format!("r{i}"), &format!("b{i}-{round}"));
                    let resources = switchyard_kubeconfig::parse_documents("r.yaml", &yaml)
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                    let resources_json = serde_json::to_vec(&resources)?;
                    admin.apply(pb::ApplyRequest { resources_json }).await?;
                }
                anyhow::Ok(())
            }));
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let took = loop {
            let before = paced(leader)?;
            let sent = std::time::Instant::now();
            let answer = fleet.heartbeat(heartbeat.clone()).await?.into_inner();
            let took = sent.elapsed();
            anyhow::ensure!(answer.known, "p0 unknown to the leader");
            if paced(leader)? > before {
                break took;
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "no heartbeat answer held in 20 s of applies through the follower"
            );
        };
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for client in clients {
            client.await??;
        }
        anyhow::ensure!(
            took >= Duration::from_millis(100),
            "a held answer came after {took:?}, not after the proxy's 100 ms share"
        );
        anyhow::Ok(())
    })
}
