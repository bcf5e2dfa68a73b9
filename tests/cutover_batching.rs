//! The leader loop proposes every decision of one pass in one Raft entry:
//! with many routes ready at once (one proxy's report covers them all),
//! they are committed by a single entry, not one entry each. One real
//! coordinator (`server::run` on 127.0.0.1), a proxy played through the
//! real `FleetService` calls.

#[path = "control_plane/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::{Coordinator, WAIT};
use switchyard_proto::model::{
    BackendEvidence, BackendKey, BackendRef, HttpRoute, ObjectMeta, Resource, RouteRule, Service,
    ServicePort,
};
use switchyard_proto::pb;
use switchyard_test_support::eventually;
use switchyard_test_support::eventually::holds;

/// Routes ready at once.
const ROUTES: usize = 25;

fn resources() -> Vec<Resource> {
    let mut resources = vec![Resource::Service(Service {
        meta: ObjectMeta::named("default", "green"),
        ports: vec![ServicePort {
            name: None,
            port: 80,
            target_port: None,
            app_protocol: None,
        }],
    })];
    resources.extend((0..ROUTES).map(|i| {
        Resource::HttpRoute(HttpRoute {
            kind: Default::default(),
            meta: ObjectMeta::named("default", format!("r{i}")),
            parent_refs: vec![],
            hostnames: vec![],
            rules: vec![RouteRule {
                backend_refs: vec![BackendRef::service("green", 80)],
                ..Default::default()
            }],
        })
    }));
    resources
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_ready_at_once_are_committed_by_one_entry() -> anyhow::Result<()> {
    let coordinator = Coordinator::start().await?;
    let node = coordinator.bound.coordinator.node().clone();
    let mut fleet = coordinator.fleet_client();
    let heartbeat = coordinator.registered_heartbeat("p0", "a").await?;
    let registration = heartbeat.registration;
    fleet.heartbeat(heartbeat.clone()).await?;

    let applied = coordinator
        .bound
        .coordinator
        .apply_resources(resources())
        .await?;
    anyhow::ensure!(applied.0.is_ok(), "apply refused: {applied:?}");
    let state = node.state().borrow().clone();
    assert_eq!(state.pending_count(), ROUTES, "nobody warmed green yet");
    let before = node.metrics().borrow().last_log_index.unwrap_or(0);

    // One report covers every route's backend.
    let green = BackendKey::new("default", "green", 80);
    let generation = state
        .endpoint_generation(&green)
        .ok_or_else(|| anyhow::anyhow!("green has no endpoint generation"))?;
    let evidence = BackendEvidence {
        endpoints_generation: generation,
        healthy: 1,
        total: 1,
    };
    let reply = fleet
        .report_readiness(pb::ReadinessReport {
            proxy_id: "p0".into(),
            registration,
            backends: vec![pb::BackendReadiness::from((&green, evidence))],
            ..Default::default()
        })
        .await?
        .into_inner();
    assert!(reply.known, "the leader knows p0");

    eventually("every route committed", WAIT, async || {
        // Keep p0's lease while waiting.
        let renewed = fleet.heartbeat(heartbeat.clone()).await.is_ok();
        let pending = node.state().borrow().pending_count();
        holds(renewed && pending == 0, || {
            format!("{pending} routes pending (heartbeat answered: {renewed})")
        })
    })
    .await?;
    let after = node.metrics().borrow().last_log_index.unwrap_or(0);
    assert_eq!(
        after,
        before + 1,
        "{ROUTES} commits in one entry (log went from {before} to {after})"
    );
    Ok(())
}
