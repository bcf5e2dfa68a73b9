//! Graceful replacement: a new data plane binds the same address with
//! SO_REUSEPORT, then the old one drains — ten times in a row under the load
//! of 32 keep-alive client connections. No request fails. Clients retry
//! nothing; they only reconnect after a response that said
//! `Connection: close`, as any HTTP/1.1 client must.
//!
//! And the sockets a proxy process binds at start (`Listeners::bind`) take
//! no connection before the data plane is ready: a replacement that
//! listened at once would get its share of new clients and answer them
//! 503 while it waits for its configuration.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use support::client::{Conn, get, send};
use support::echo::start_echo;
use support::*;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, HttpRoute};
use switchyard_proxy::{ListenerSpec, Listeners, ServingConfig, bind_reuseport};

const NS: &str = "replace";
const CLIENTS: usize = 32;
const REPLACEMENTS: usize = 10;
const MAX_REQUESTS_PER_CLIENT: usize = 50_000;

#[derive(Default)]
struct Tally {
    ok: AtomicUsize,
    failed: AtomicUsize,
    reconnects: AtomicUsize,
    first_error: std::sync::Mutex<Option<String>>,
}

fn config(backends: &[SocketAddr]) -> (ConfigSnapshot, Vec<HttpRoute>) {
    let mut text = simple_gateway_yaml(NS);
    text.push_str("---\n");
    text.push_str(&simple_route_yaml(NS, "app", "app"));
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    snapshot.services.push(service(NS, "app", 8080, 1));
    snapshot.endpoint_slices = slices(NS, "app", backends, 1);
    (snapshot, routes)
}

/// A configured, warm data plane serving on a new socket bound to `addr`.
async fn replacement(addr: SocketAddr, backends: &[SocketAddr]) -> Proxy {
    let dp = new_data_plane(test_settings());
    let (snapshot, routes) = config(backends);
    dp.install(ServingConfig {
        snapshot: Arc::new(snapshot),
        routes,
    });
    wait_healthy(&dp, &[(BackendKey::new(NS, "app", 8080), 2)]).await;
    // Bind only once configured and warm: from listen() on, the kernel
    // hands this socket its share of new connections.
    let listener = bind_reuseport(addr).unwrap();
    Proxy::serve(dp, vec![(simple_listener(NS), listener)])
}

async fn client_loop(addr: SocketAddr, tally: Arc<Tally>, stop: Arc<AtomicBool>) {
    let mut conn = match Conn::connect(addr).await {
        Ok(c) => c,
        Err(error) => {
            tally.failed.fetch_add(1, Ordering::Relaxed);
            tally
                .first_error
                .lock()
                .unwrap()
                .get_or_insert(format!("{error:#}"));
            return;
        }
    };
    for _ in 0..MAX_REQUESTS_PER_CLIENT {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let result = conn.send(get("app.example", "/")).await.and_then(|r| {
            anyhow::ensure!(r.status == 200, "status {} {:?}", r.status, r.headers);
            Ok(r)
        });
        let reconnect = match result {
            Ok(reply) => {
                tally.ok.fetch_add(1, Ordering::Relaxed);
                reply.closes()
            }
            Err(error) => {
                tally.failed.fetch_add(1, Ordering::Relaxed);
                tally
                    .first_error
                    .lock()
                    .unwrap()
                    .get_or_insert(format!("{error:#}"));
                true
            }
        };
        if reconnect {
            tally.reconnects.fetch_add(1, Ordering::Relaxed);
            match Conn::connect(addr).await {
                Ok(c) => conn = c,
                Err(error) => {
                    tally.failed.fetch_add(1, Ordering::Relaxed);
                    tally
                        .first_error
                        .lock()
                        .unwrap()
                        .get_or_insert(format!("{error:#}"));
                    return;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_the_data_plane_under_keep_alive_load_drops_nothing() {
    let backends = [
        start_echo(NS, "app", 0).await,
        start_echo(NS, "app", 1).await,
    ];
    let backend_addrs = [backends[0].addr, backends[1].addr];
    let first = bind_reuseport("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = first.local_addr().unwrap();
    drop(first);
    let mut proxy = replacement(addr, &backend_addrs).await;

    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| tokio::spawn(client_loop(addr, Arc::clone(&tally), Arc::clone(&stop))))
        .collect();

    for round in 0..REPLACEMENTS {
        // Some load on the current data plane first.
        let target = tally.ok.load(Ordering::Relaxed) + 300;
        let t = Arc::clone(&tally);
        eventually(
            &format!("load before replacement {round}"),
            Duration::from_secs(20),
            || {
                let t = Arc::clone(&t);
                async move {
                    let ok = t.ok.load(Ordering::Relaxed);
                    anyhow::ensure!(ok >= target, "{ok} < {target}");
                    Ok(())
                }
            },
        )
        .await
        .unwrap();
        let next = replacement(addr, &backend_addrs).await;
        let old = std::mem::replace(&mut proxy, next);
        old.shutdown().await;
    }
    // Load on the last one too.
    let target = tally.ok.load(Ordering::Relaxed) + 300;
    let t = Arc::clone(&tally);
    eventually(
        "load after the last replacement",
        Duration::from_secs(20),
        || {
            let t = Arc::clone(&t);
            async move {
                anyhow::ensure!(t.ok.load(Ordering::Relaxed) >= target);
                Ok(())
            }
        },
    )
    .await
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let ok = tally.ok.load(Ordering::Relaxed);
    let failed = tally.failed.load(Ordering::Relaxed);
    let reconnects = tally.reconnects.load(Ordering::Relaxed);
    println!("replacement: {ok} ok, {failed} failed, {reconnects} reconnects");
    assert_eq!(
        failed,
        0,
        "first error: {:?}",
        tally.first_error.lock().unwrap()
    );
    // Every replacement moved the clients: each drain closes all 32.
    assert!(
        reconnects >= CLIENTS * REPLACEMENTS,
        "{reconnects} reconnects"
    );
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_bound_at_start_listen_only_once_the_data_plane_is_ready() {
    let backends = [
        start_echo(NS, "app", 0).await,
        start_echo(NS, "app", 1).await,
    ];
    let dp = new_data_plane(test_settings());
    let listeners = Listeners::bind([ListenerSpec {
        name: "http".into(),
        key: simple_listener(NS),
        address: "127.0.0.1:0".parse().unwrap(),
    }]);
    let (_, addr) = listeners.bound().next().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(Arc::clone(&dp).serve(listeners, async move {
        let _ = stopped.await;
    }));
    let refused = async || {
        let error = tokio::net::TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::ConnectionRefused);
    };
    // Nothing to wait for on a negative: give `serve` time to run, then
    // check that the port still refuses.
    tokio::time::sleep(Duration::from_millis(200)).await;
    refused().await;
    // A configuration whose backends are not warm yet is not ready either.
    let (snapshot, routes) = config(&[backends[0].addr, backends[1].addr]);
    dp.install(ServingConfig {
        snapshot: Arc::new(snapshot),
        routes,
    });
    wait_healthy(&dp, &[(BackendKey::new(NS, "app", 8080), 2)]).await;
    refused().await;

    dp.mark_synced();
    let reply = eventually(
        "an answer once ready",
        Duration::from_secs(10),
        || async move { send(addr, get("app.example", "/")).await },
    )
    .await
    .unwrap();
    assert_eq!(reply.status, 200);
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}
