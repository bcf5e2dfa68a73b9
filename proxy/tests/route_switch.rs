//! A route moves from one warm backend to another while clients keep
//! several requests in flight at all times: no request fails, and traffic
//! ends up on the new backend and stays there.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use support::client::{Conn, get};
use support::echo::start_echo;
use support::*;
use switchyard_proto::model::{BackendKey, Resource};

const NS: &str = "switch";
const LOOPS: usize = 8;
const MAX_REQUESTS_PER_LOOP: usize = 20_000;

#[derive(Default)]
struct Tally {
    ok: AtomicUsize,
    failed: AtomicUsize,
    green: AtomicUsize,
    /// Blue answers to requests sent after this loop already saw green.
    blue_after_green: AtomicUsize,
    first_error: std::sync::Mutex<Option<String>>,
}

fn route(backend: &str) -> switchyard_proto::model::HttpRoute {
    match parse_yaml(&simple_route_yaml(NS, "app", backend)).remove(0) {
        Resource::HttpRoute(r) => r,
        other => panic!("expected a route, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_change_under_load_drops_nothing() {
    let blue = [
        start_echo(NS, "blue", 0).await,
        start_echo(NS, "blue", 1).await,
    ];
    let green = [
        start_echo(NS, "green", 0).await,
        start_echo(NS, "green", 1).await,
    ];
    let blue_key = BackendKey::new(NS, "blue", 8080);
    let green_key = BackendKey::new(NS, "green", 8080);

    let (mut snapshot, _) = snapshot_of(1, parse_yaml(&simple_gateway_yaml(NS)));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    snapshot.services = vec![service(NS, "blue", 8080, 1), service(NS, "green", 8080, 1)];
    snapshot.endpoint_slices = slices(NS, "blue", &[blue[0].addr, blue[1].addr], 1);
    snapshot
        .endpoint_slices
        .extend(slices(NS, "green", &[green[0].addr, green[1].addr], 1));

    let proxy = Proxy::start(test_settings(), vec![simple_listener(NS)]).await;
    let addr = proxy.addrs[0];
    // Green is warmed before any route points at it, as the control plane
    // does for a pending transition.
    proxy.dp.set_warming(keys(&[&green_key]));
    proxy.install(snapshot.clone(), vec![route("blue")]);
    proxy
        .wait_healthy(&[(blue_key.clone(), 2), (green_key.clone(), 2)])
        .await;
    let first = support::client::send(addr, get("app.example", "/"))
        .await
        .unwrap();
    assert!(first.pod().unwrap().starts_with("blue"), "{first:?}");

    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut loops = Vec::new();
    for _ in 0..LOOPS {
        let tally = Arc::clone(&tally);
        let stop = Arc::clone(&stop);
        loops.push(tokio::spawn(async move {
            let mut conn = Conn::connect(addr).await.unwrap();
            let mut seen_green = false;
            for _ in 0..MAX_REQUESTS_PER_LOOP {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let result = conn.send(get("app.example", "/")).await.and_then(|r| {
                    anyhow::ensure!(r.status == 200, "status {}", r.status);
                    r.pod()
                });
                match result {
                    Ok(pod) if pod.starts_with("green") => {
                        seen_green = true;
                        tally.green.fetch_add(1, Ordering::Relaxed);
                        tally.ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(_) => {
                        if seen_green {
                            tally.blue_after_green.fetch_add(1, Ordering::Relaxed);
                        }
                        tally.ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) => {
                        tally.failed.fetch_add(1, Ordering::Relaxed);
                        tally
                            .first_error
                            .lock()
                            .unwrap()
                            .get_or_insert(format!("{error:#}"));
                        // Start over on a new connection; the failure counts.
                        match Conn::connect(addr).await {
                            Ok(c) => conn = c,
                            Err(_) => break,
                        }
                    }
                }
            }
        }));
    }

    // Let load build up, then cut over.
    let t = Arc::clone(&tally);
    eventually("load running", Duration::from_secs(10), || {
        let t = Arc::clone(&t);
        async move {
            let ok = t.ok.load(Ordering::Relaxed);
            anyhow::ensure!(ok >= 400, "{ok} requests so far");
            Ok(())
        }
    })
    .await
    .unwrap();
    let mut next = snapshot.clone();
    next.version = 2;
    proxy.install(next, vec![route("green")]);
    proxy.dp.set_warming(Default::default());

    let t = Arc::clone(&tally);
    eventually("traffic moved to green", Duration::from_secs(10), || {
        let t = Arc::clone(&t);
        async move {
            let green = t.green.load(Ordering::Relaxed);
            anyhow::ensure!(green >= 400, "{green} green answers so far");
            Ok(())
        }
    })
    .await
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.await.unwrap();
    }

    let failed = tally.failed.load(Ordering::Relaxed);
    let ok = tally.ok.load(Ordering::Relaxed);
    println!(
        "route switch: {ok} ok, {failed} failed, {} green",
        tally.green.load(Ordering::Relaxed)
    );
    assert_eq!(
        failed,
        0,
        "failed requests; first error: {:?}",
        tally.first_error.lock().unwrap()
    );
    assert_eq!(tally.blue_after_green.load(Ordering::Relaxed), 0);
    // The blue backend is neither served nor warming any more.
    assert_eq!(proxy.dp.readiness(&blue_key), None);
    proxy.shutdown().await;
}
