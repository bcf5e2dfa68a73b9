//! An apply whose new spec the fleet is already ready for carries its own
//! commit: one Raft entry makes it active, the Apply's answer says so,
//! and the leader counts it as a cutover and times it to Ready. A spec
//! needing a backend nobody has warmed still waits pending. One real
//! coordinator (`server::run` on 127.0.0.1), its admin `Apply` RPC, and
//! a proxy played through the real `FleetService` calls.

#[path = "control_plane/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::{Coordinator, WAIT};
use switchyard_proto::model::{
    BackendKey, BackendRef, HttpRoute, ObjectMeta, ObjectName, Resource, RouteRule, Service,
    ServicePort,
};
use switchyard_proto::pb;
use switchyard_test_support::eventually;
use switchyard_test_support::eventually::holds;

fn service(name: &str) -> Resource {
    Resource::Service(Service {
        meta: ObjectMeta::named("default", name),
        ports: vec![ServicePort {
            name: None,
            port: 80,
            target_port: None,
            app_protocol: None,
        }],
    })
}

/// Route `r` to `backend`, answering for `host`.
fn route(backend: &str, host: &str) -> Resource {
    Resource::HttpRoute(HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("default", "r"),
        parent_refs: vec![],
        hostnames: vec![host.into()],
        rules: vec![RouteRule {
            backend_refs: vec![BackendRef::service(backend, 80)],
            ..Default::default()
        }],
    })
}

/// The value of the sample of `/metrics` named exactly `name`.
fn sample(coordinator: &Coordinator, name: &str) -> anyhow::Result<f64> {
    let text = coordinator.metrics_text()?;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no sample {name} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_the_fleet_is_ready_for_is_committed_by_its_apply() -> anyhow::Result<()> {
    let coordinator = Coordinator::start().await?;
    let node = coordinator.bound.coordinator.node().clone();
    let mut admin = coordinator.admin_client();
    let mut fleet = coordinator.fleet_client();
    let registration = coordinator.register("p0", "a").await?;
    let heartbeat = |applied: Vec<pb::AppliedGeneration>| pb::HeartbeatRequest {
        proxy_id: "p0".into(),
        registration,
        applied,
        ..Default::default()
    };
    fleet.heartbeat(heartbeat(vec![])).await?;
    let apply = async |admin: &mut pb::admin_service_client::AdminServiceClient<_>,
                       resources: Vec<Resource>|
           -> anyhow::Result<pb::ApplyReply> {
        let resources_json = serde_json::to_vec(&resources)?;
        Ok(admin
            .apply(pb::ApplyRequest { resources_json })
            .await?
            .into_inner())
    };

    // First, green as nobody has warmed it: pending, as ever.
    let first = apply(
        &mut admin,
        vec![service("green"), service("blue"), route("green", "a.test")],
    )
    .await?;
    assert!(
        !first.changes.iter().any(|c| c.contains("committed")),
        "{:?}",
        first.changes
    );
    coordinator
        .report_ready("p0", registration, &BackendKey::new("default", "green", 80))
        .await?;
    eventually("r committed on p0's evidence", WAIT, async || {
        let renewed = fleet.heartbeat(heartbeat(vec![])).await.is_ok();
        let pending = node.state().borrow().pending_count();
        holds(renewed && pending == 0, || {
            format!("{pending} pending (heartbeat answered: {renewed})")
        })
    })
    .await?;
    // The leader loop counts its commit after the state shows it: wait
    // for the count, or the commit below would be measured against a
    // count still missing this one.
    eventually("the first commit counted", WAIT, async || {
        let counted =
            sample(&coordinator, "switchyard_coordinator_cutover_commits_total").unwrap_or(0.0);
        holds(counted >= 1.0, || format!("{counted} commits counted"))
    })
    .await?;
    let commits_before = sample(&coordinator, "switchyard_coordinator_cutover_commits_total")?;
    let timed_before = sample(
        &coordinator,
        "switchyard_coordinator_apply_to_ready_seconds_count",
    )?;

    // A new spec on green, which p0 holds ready: committed by the apply's
    // own entry, and said so in its answer.
    let entries_before = node.metrics().borrow().last_log_index.unwrap_or(0);
    let change = apply(&mut admin, vec![route("green", "b.test")]).await?;
    let generation = change
        .routes
        .iter()
        .find(|r| r.name == "r")
        .map(|r| r.generation)
        .ok_or_else(|| anyhow::anyhow!("no generation for r: {change:?}"))?;
    assert!(
        change
            .changes
            .iter()
            .any(|c| c.ends_with(&format!("generation {generation} committed"))),
        "{:?}",
        change.changes
    );
    assert_eq!(change.log_index, entries_before + 1, "one entry");
    {
        let state = node.state().borrow().clone();
        let record = &state.routes[&ObjectName::new("default", "r")];
        assert!(record.pending.is_none(), "{record:?}");
        assert_eq!(
            record.active.as_ref().map(|a| a.generation),
            Some(generation)
        );
    }
    assert_eq!(
        sample(&coordinator, "switchyard_coordinator_cutover_commits_total")?,
        commits_before + 1.0,
        "counted as a cutover"
    );

    // p0 serves it: the leader loop, handed the commit, times it to Ready.
    let served = vec![pb::AppliedGeneration::from((
        ObjectName::new("default", "r"),
        generation,
    ))];
    eventually("apply to Ready timed", WAIT, async || {
        let renewed = fleet.heartbeat(heartbeat(served.clone())).await.is_ok();
        let timed = sample(
            &coordinator,
            "switchyard_coordinator_apply_to_ready_seconds_count",
        )
        .unwrap_or(0.0);
        holds(renewed && timed > timed_before, || {
            format!("{timed} apply-to-Ready observations (heartbeat answered: {renewed})")
        })
    })
    .await?;

    // Blue, which nobody has warmed: pending.
    let to_blue = apply(&mut admin, vec![route("blue", "b.test")]).await?;
    assert!(
        !to_blue.changes.iter().any(|c| c.contains("committed")),
        "{:?}",
        to_blue.changes
    );
    assert_eq!(node.state().borrow().pending_count(), 1);
    Ok(())
}
