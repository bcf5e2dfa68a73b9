//! A Gateway listener is `Programmed` only when the proxies bound its port
//! (issue 13 item 2): a real coordinator and a real proxy data plane with
//! the real control client in this process, talking gRPC. The proxy's
//! socket for one port cannot be bound (the test holds that port); the
//! proxy keeps serving its other socket, reports the bind error with its
//! readiness reports, and the coordinator's status — the API the
//! Kubernetes status writer reads — says `PortUnavailable` for that port
//! and names the proxy, address and error. Once the test lets the port go,
//! the proxy binds it, serves on it, and the port reads as bound.

#[allow(dead_code)]
#[path = "control_plane/harness.rs"]
mod harness;

use harness::{Coordinator, WAIT, proxies_registered};
use prometheus_client::registry::Registry;
use std::time::Duration;
use switchyard::demo::manifests;
use switchyard_proto::model::ObjectName;
use switchyard_proto::model::gateway_api::PortState;
use switchyard_proxy::control::coordinators::CoordinatorAddress;
use switchyard_proxy::control::{self, ControlConfig, ControlMetrics};
use switchyard_proxy::router::ListenerKey;
use switchyard_proxy::{DataPlane, DataPlaneSettings, ListenerSpec, Listeners};
use switchyard_test_support::eventually;
use switchyard_tls::Security;
use tokio::sync::watch;

/// A Gateway listener port the proxy's second socket serves.
const TAKEN_GATEWAY_PORT: u16 = 9443;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_a_proxy_cannot_bind_is_reported_unavailable_until_it_binds() -> anyhow::Result<()> {
    let coordinator = Coordinator::start().await?;
    coordinator.apply(&manifests::base()).await?;
    // Another process's socket on the address the proxy is told to use
    // (no SO_REUSEPORT, so the proxy's bind fails with "address in use").
    let squatter = std::net::TcpListener::bind("127.0.0.1:0")?;
    let taken = squatter.local_addr()?;

    let dataplane = DataPlane::new(DataPlaneSettings::default(), &mut Registry::default());
    let any_gateway = |port| ListenerKey {
        gateway: None,
        port,
    };
    let listeners = Listeners::bind([
        ListenerSpec {
            name: "http".into(),
            key: any_gateway(manifests::GATEWAY_PORT),
            address: "127.0.0.1:0".parse()?,
        },
        ListenerSpec {
            name: "https".into(),
            key: any_gateway(TAKEN_GATEWAY_PORT),
            address: taken,
        },
    ]);
    assert_eq!(listeners.bound().count(), 1);
    assert_eq!(listeners.unbound().count(), 1);
    let (stop, stopped) = watch::channel(false);
    let until = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let config = ControlConfig {
        proxy_id: "p1".into(),
        zone: "a".into(),
        admin_address: String::new(),
        coordinators: vec![CoordinatorAddress {
            zone: None,
            address: coordinator.address.clone(),
        }],
        rpc_timeout: Duration::from_secs(2),
        apply_wait_limit: Duration::from_secs(10),
        reconnect_backoff: Duration::from_millis(100),
        security: Security::Insecure,
    };
    let mut registry = Registry::default();
    let metrics = ControlMetrics::register(&mut registry);
    tokio::spawn(control::run(
        config,
        dataplane.clone(),
        metrics,
        until(stopped.clone()),
    ));
    tokio::spawn(dataplane.clone().serve(listeners, until(stopped)));
    proxies_registered(&coordinator, 1).await?;

    let gateway = ObjectName::new(manifests::NAMESPACE, "gateway");
    let state = |port| {
        coordinator
            .bound
            .coordinator
            .status()
            .listener_port_state(&gateway, port)
    };
    let failed = eventually(
        "the taken port reported unavailable",
        WAIT,
        async || match state(TAKEN_GATEWAY_PORT) {
            PortState::Unavailable { failed, bound: 0 } => Ok(failed),
            other => Err(format!("{other:?}")),
        },
    )
    .await?;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].proxy, "p1");
    assert_eq!(failed[0].address, taken.to_string());
    assert!(
        failed[0].error.contains("in use"),
        "the bind error is reported as the OS said it: {failed:?}"
    );
    // The proxy's other socket is bound, and says so.
    assert_eq!(
        state(manifests::GATEWAY_PORT),
        PortState::Bound { proxies: 1 }
    );
    // A port no socket serves is not "bound" by anyone.
    assert_eq!(state(1234), PortState::NotListened { reporting: 1 });

    // The port comes free: the proxy binds it, reports it, serves on it.
    drop(squatter);
    eventually(
        "the freed port reported bound",
        WAIT,
        async || match state(TAKEN_GATEWAY_PORT) {
            PortState::Bound { proxies: 1 } => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await?;
    let answered = eventually("an answer on the freed port", WAIT, async || {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(taken).await?;
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: demo.example\r\nConnection: close\r\n\r\n")
            .await?;
        let mut text = Vec::new();
        stream.read_to_end(&mut text).await?;
        anyhow::Ok(String::from_utf8_lossy(&text).into_owned())
    })
    .await?;
    assert!(answered.starts_with("HTTP/1.1 "), "{answered}");
    let _ = stop.send(true);
    Ok(())
}
