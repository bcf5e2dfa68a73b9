//! Authorization against real coordinator processes: each identity
//! (coordinator, proxy, admin) may make only its own calls, and readiness
//! evidence forged with a valid proxy certificate never counts, so it
//! never moves traffic.
//!
//! The fleets here run exactly as `switchyard demo` does (a throwaway CA,
//! one certificate per process).

mod security;

use security::*;
use std::time::Duration;
use switchyard::client::WaitError;
use switchyard::demo::fleet::FleetOptions;
use switchyard::demo::manifests;
use switchyard::demo::start_serving;
use switchyard_proto::pb::{
    self, admin_service_client::AdminServiceClient, fleet_service_client::FleetServiceClient,
};
use switchyard_test_support::eventually;
use switchyard_tls::Identity;
use tonic::Code;
use tonic::transport::Channel;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_identity_may_make_only_its_own_calls() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let fleet = coordinators_only()?;
    fleet.wait_leader(Duration::from_secs(20)).await?;
    let address = fleet.coordinator_addresses[0].clone();

    // A proxy certificate: not admin, not Raft, not another proxy.
    let proxy_x = channel(
        &address,
        &fleet_security(&fleet, &Identity::Proxy("proxy-x".into()))?,
    );
    let [raft, as_other, admin] = call_each_service(proxy_x.clone(), "proxy-y").await;
    assert_eq!(raft, Code::PermissionDenied, "a proxy spoke Raft");
    assert_eq!(
        as_other,
        Code::PermissionDenied,
        "proxy-x registered as proxy-y"
    );
    assert_eq!(admin, Code::PermissionDenied, "a proxy called admin");
    let mut fleet_client = FleetServiceClient::new(proxy_x.clone());
    let report = fleet_client
        .report_readiness(pb::ReadinessReport {
            proxy_id: "proxy-y".into(),
            ..Default::default()
        })
        .await;
    assert_eq!(code_of(report), Code::PermissionDenied);
    let heartbeat = fleet_client
        .heartbeat(pb::HeartbeatRequest {
            proxy_id: "proxy-y".into(),
            ..Default::default()
        })
        .await;
    assert_eq!(code_of(heartbeat), Code::PermissionDenied);
    let watch = fleet_client
        .watch(pb::WatchRequest {
            proxy_id: "proxy-y".into(),
            ..Default::default()
        })
        .await;
    assert_eq!(code_of(watch), Code::PermissionDenied);
    let status = AdminServiceClient::new(proxy_x.clone())
        .status(pb::StatusRequest::default())
        .await;
    assert_eq!(code_of(status), Code::PermissionDenied);
    // As itself it may register.
    assert_eq!(allowed(proxy_x, "proxy-x", 1).await, Code::Ok);

    // An admin certificate may not pose as a proxy or speak Raft; a
    // coordinator certificate may not call admin or pose as a proxy.
    let admin = channel(
        &address,
        &fleet_security(&fleet, &Identity::Admin("ops".into()))?,
    );
    let [raft, fleet_call, _] = call_each_service(admin, "proxy-y").await;
    assert_eq!(
        (raft, fleet_call),
        (Code::PermissionDenied, Code::PermissionDenied)
    );
    let coordinator = channel(
        &address,
        &fleet_security(&fleet, &Identity::Coordinator(2))?,
    );
    let [_, fleet_call, admin_call] = call_each_service(coordinator, "proxy-y").await;
    assert_eq!(
        (fleet_call, admin_call),
        (Code::PermissionDenied, Code::PermissionDenied)
    );

    // Stored: only the admin's apply and proxy-x's own registration.
    let (routes, proxies) = stored_names(&fleet).await?;
    assert_eq!(routes, vec!["intruder".to_string()]);
    assert_eq!(proxies, vec!["proxy-x".to_string()]);
    // Child output is read on background threads, so it can trail what
    // the test just caused.
    eventually(
        "the refusal in the logs",
        Duration::from_secs(10),
        async || {
            fleet
                .logs()
                .contains("refused: Register needs proxy \"proxy-y\"")
        },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_readiness_evidence_never_counts() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let (mut fleet, prober) = start_serving(FleetOptions::three_zones(binary()), &[]).await?;
    let address =
        tokio::task::block_in_place(|| fleet.start_backend("dead", &["--never-healthy"]))?;
    let yaml = format!(
        "{}{}",
        manifests::backend("dead", address),
        manifests::route("dead", "h0", "4s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;

    // A certificate of the fleet's CA, but for a proxy that is not
    // serving: it claims, for every real proxy, that the dead backend is
    // healthy, as fast as it can, at every coordinator.
    let forger = fleet_security(&fleet, &Identity::Proxy("proxy-x".into()))?;
    let channels: Vec<Channel> = fleet
        .coordinator_addresses
        .iter()
        .map(|a| channel(a, &forger))
        .collect();
    let backend = format!("{}/dead:80", manifests::NAMESPACE);
    let forging = tokio::spawn(async move {
        let mut codes = Vec::new();
        // Five seconds of forging is the attack, not a wait.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tokio::time::Instant::now() < deadline {
            for channel in &channels {
                for victim in ["proxy-a", "proxy-b", "proxy-c"] {
                    let forged = FleetServiceClient::new(channel.clone())
                        .report_readiness(pb::ReadinessReport {
                            proxy_id: victim.into(),
                            backends: vec![pb::BackendReadiness {
                                backend: backend.clone(),
                                endpoints_generation: u64::MAX / 2,
                                healthy: 1,
                                total: 1,
                            }],
                            ..Default::default()
                        })
                        .await;
                    codes.push(code_of(forged));
                }
            }
            // The forger's pace.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        codes
    });
    let waited = fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(30), |_| {})
        .await;
    let codes = forging.await?;
    assert!(codes.len() > 30, "the forger barely ran: {}", codes.len());
    let let_through: Vec<&Code> = codes
        .iter()
        .filter(|c| **c != Code::PermissionDenied)
        .collect();
    assert!(
        let_through.is_empty(),
        "{} of {} forged reports were not refused, e.g. {:?}",
        let_through.len(),
        codes.len(),
        let_through.first()
    );
    match waited {
        Err(WaitError::Failed { why, .. }) => {
            assert!(why.contains("0 of 3 proxies ready"), "{why}")
        }
        other => panic!("the cutover to a dead backend was not refused: {other:?}"),
    }
    let seen = prober
        .observe_after(tokio::time::Instant::now(), Duration::from_secs(5))
        .await
        .expect("responses keep coming");
    assert_eq!(seen.backend, "v1", "traffic moved to the dead backend");
    let report = prober.stop().await;
    assert_eq!(report.failed, 0, "failed requests: {:?}", report.failures);
    Ok(())
}
