//! Replacing a proxy process under load drops nothing (issue 15): ten
//! times in a row a new `switchyard proxy` process starts on the same
//! listen address as the running one, taking its listening socket over
//! through `--handoff-socket`, the test waits for its `/ready`, then sends the old
//! one SIGTERM by PID and waits for it to drain and exit 0 — all while 32
//! keep-alive HTTP/1.1 connections send requests back to back through the
//! address, and a few clients open a new connection per request (new
//! connections are what reach a process that just started, so they are
//! what shows whether it listens before it can serve).
//!
//! Asserted: no request fails; every replacement took its predecessor's
//! socket over; requests were served while each replacement was under way; every replaced process (and the last one)
//! exited 0; the drains moved the keep-alive clients (at least 32
//! reconnections per replacement); and no process of the fleet logged a
//! WARN or ERROR line.
//!
//! Clients retry nothing. A keep-alive client opens a new connection only
//! after a response that said `Connection: close`, or when the server
//! closed the connection cleanly between two requests — what any HTTP/1.1
//! client does. A refused or reset connect, a connection cut under a
//! request, a status other than 200 or no answer within the timeout is a
//! failed request.
//!
//! Why the handoff: processes that each bind their own socket on the
//! address (`SO_REUSEPORT`) lose whatever the kernel queued on the old
//! socket when it closes — connections reset at connect or at their first
//! request, a few per hundred replacements under this load. The handoff
//! keeps one socket, and its queue, across the processes.
//!
//! Each replacement process gets its own `--id` (`edge-N`): an id names one
//! replica in the fleet (a pod name), and two live processes under one id
//! would take the coordinators' registration from each other. Every other
//! flag is the same, the listen address included.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard::client::AdminClient;
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard::demo::manifests;
use switchyard_harness::{Process, free_port};
use switchyard_test_support::eventually;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

/// Keep-alive connections sending back to back.
const KEEP_ALIVE_CLIENTS: usize = 32;
/// Clients that open a new connection for every request.
const FRESH_CLIENTS: usize = 4;
/// Proxy processes replaced, one after the other.
const REPLACEMENTS: usize = 10;
/// Successful requests to see on each process before it is replaced.
const LOAD_PER_ROUND: u64 = 300;
/// Bounds on the load: requests per client, and the whole run.
const MAX_REQUESTS_PER_CLIENT: u64 = 100_000;
const RUN_LIMIT: Duration = Duration::from_secs(300);
/// One request, from sending it to the end of its body.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A SIGTERMed proxy must be gone by then (its drain takes about the idle
/// grace of 2 s; `--drain-timeout` is 30 s).
const EXIT_LIMIT: Duration = Duration::from_secs(40);
/// Failures kept verbatim for the report.
const KEEP_FAILURES: usize = 20;
const ZONE: &str = "zone-a";

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard"))
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
    reconnects: AtomicU64,
    failures: Mutex<Vec<String>>,
}

impl Tally {
    fn fail(&self, what: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < KEEP_FAILURES {
            kept.push(what);
        }
    }
}

type Sender = SendRequest<Empty<Bytes>>;

async fn connect(addr: SocketAddr) -> anyhow::Result<Sender> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
    // The connection task ends when either side closes; `sender` then
    // reports itself closed, which is how a clean close between requests
    // is told apart from one under a request.
    tokio::spawn(conn);
    Ok(sender)
}

/// Sends one GET on `sender`; returns whether the response said
/// `Connection: close`.
async fn request(sender: &mut Sender, fresh: bool) -> anyhow::Result<bool> {
    let mut builder = hyper::Request::get("/").header("host", "app.example");
    if fresh {
        builder = builder.header("connection", "close");
    }
    let response = timeout(REQUEST_TIMEOUT, async {
        let response = sender.send_request(builder.body(Empty::new())?).await?;
        let (head, body) = response.into_parts();
        body.collect().await?;
        anyhow::Ok(head)
    })
    .await
    .map_err(|_| anyhow::anyhow!("no answer within {REQUEST_TIMEOUT:?}"))??;
    let backend = response.headers.get("x-backend");
    anyhow::ensure!(
        response.status == 200 && backend.is_some_and(|b| b == "v1"),
        "status {}, x-backend {backend:?}, reason {:?}",
        response.status,
        response.headers.get("x-switchyard-reason")
    );
    let closes = response
        .headers
        .get("connection")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    Ok(closes)
}

/// One client: back-to-back requests on one keep-alive connection (or, if
/// `fresh`, a new connection per request) until `stop` or the bounds.
async fn client(addr: SocketAddr, fresh: bool, tally: Arc<Tally>, stop: Arc<AtomicBool>) {
    let deadline = Instant::now() + RUN_LIMIT;
    let mut conn: Option<Sender> = None;
    for _ in 0..MAX_REQUESTS_PER_CLIENT {
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            return;
        }
        // A connection the server closed while it was idle is one any
        // client would replace; a fresh client never reuses one.
        let kept = match conn.take() {
            Some(mut sender) => match sender.ready().await {
                Ok(()) => Some(sender),
                Err(_) => {
                    tally.reconnects.fetch_add(1, Ordering::Relaxed);
                    None
                }
            },
            None => None,
        };
        let reused = kept.is_some();
        let mut sender = match kept {
            Some(sender) => sender,
            None => match connect(addr).await {
                Ok(sender) => sender,
                Err(error) => {
                    tally.fail(format!("connect: {error:#}"));
                    continue;
                }
            },
        };
        match request(&mut sender, fresh).await {
            Ok(closes) => {
                tally.ok.fetch_add(1, Ordering::Relaxed);
                if closes && !fresh {
                    tally.reconnects.fetch_add(1, Ordering::Relaxed);
                } else if !fresh {
                    conn = Some(sender);
                }
            }
            Err(error) => {
                let on = match (fresh, reused) {
                    (true, _) => "a connection per request",
                    (false, true) => "a kept-alive connection",
                    (false, false) => "a new keep-alive connection",
                };
                tally.fail(format!("request on {on}: {error:#}"));
            }
        }
    }
}

/// Whether `GET /ready` on `admin` (`HOST:PORT`) answers 200.
async fn ready(admin: &str) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(admin).await?;
    stream
        .write_all(b"GET /ready HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")
        .await?;
    let mut text = Vec::new();
    timeout(Duration::from_secs(2), stream.read_to_end(&mut text)).await??;
    let text = String::from_utf8_lossy(&text);
    anyhow::ensure!(text.starts_with("HTTP/1.1 200"), "{text}");
    Ok(())
}

/// Starts proxy `edge-N` on `listen` and waits until its `/ready` says it
/// serves every route of its configuration.
async fn start_ready(fleet: &Fleet, n: usize, listen: &str) -> anyhow::Result<Process> {
    let id = format!("edge-{n}");
    let proxy = tokio::task::block_in_place(|| fleet.start_proxy_on(&id, ZONE, listen))?;
    let admin = proxy.address("admin")?;
    eventually(
        &format!("{id} ready"),
        Duration::from_secs(30),
        async || ready(&admin).await,
    )
    .await?;
    Ok(proxy)
}

async fn served_at_least(tally: &Tally, target: u64, what: &str) -> anyhow::Result<()> {
    eventually(what, Duration::from_secs(30), async || {
        let ok = tally.ok.load(Ordering::Relaxed);
        anyhow::ensure!(ok >= target, "{ok} of {target} requests served");
        Ok(())
    })
    .await?;
    Ok(())
}

/// Waits until every coordinator, asked alone, names the same leader in
/// the same term. The first leader of a new cluster can be deposed moments
/// later by a coordinator that started after it was elected and never
/// heard from it; an old proxy's Deregister sent then times out (a WARN).
/// A coordinator that names the leader has heard from it.
async fn settled(fleet: &Fleet) -> anyhow::Result<()> {
    eventually(
        "every coordinator to name one leader",
        Duration::from_secs(30),
        async || -> anyhow::Result<()> {
            let mut seen = Vec::new();
            for address in &fleet.coordinator_addresses {
                let mut alone = AdminClient::new(
                    vec![address.clone()],
                    Duration::from_secs(2),
                    fleet.admin_security().clone(),
                );
                let status = alone.fetch_status_here().await?;
                seen.push((status.leader, status.term));
            }
            anyhow::ensure!(
                seen[0].0.is_some() && seen.iter().all(|s| *s == seen[0]),
                "(leader, term) per coordinator: {seen:?}"
            );
            Ok(())
        },
    )
    .await?;
    Ok(())
}

/// Sets `flag`'s value in `flags` (`[--flag, value, ...]`), adding it if
/// absent.
fn relax(flags: &mut Vec<String>, flag: &str, value: &str) {
    match flags.iter().position(|f| f == flag) {
        Some(i) => flags[i + 1] = value.to_string(),
        None => flags.extend([flag.to_string(), value.to_string()]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_a_proxy_process_under_keep_alive_load_drops_nothing() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let mut options = FleetOptions::three_zones(binary());
    // The test starts (and replaces) the one proxy itself.
    options.proxies.clear();
    // 36 clients sending back to back keep both cores of a small machine
    // busy. This test is about the proxies' hand-over, not Raft under CPU
    // starvation: slack in the election timeout, leases and RPC deadlines
    // keeps a starved coordinator from losing its leadership, and an old
    // proxy's Deregister from timing out.
    relax(
        &mut options.coordinator_flags,
        "--election-timeout-min",
        "1500ms",
    );
    relax(
        &mut options.coordinator_flags,
        "--election-timeout-max",
        "3000ms",
    );
    relax(&mut options.coordinator_flags, "--rpc-timeout", "2s");
    relax(&mut options.coordinator_flags, "--proxy-lease-ttl", "5s");
    relax(&mut options.proxy_flags, "--rpc-timeout", "2s");
    // Two worker threads per proxy: client connections are handed to
    // them and drained there, while the handoff and the control client run
    // on the proxy's main thread.
    relax(&mut options.proxy_flags, "--workers", "2");
    let handoff_dir = tempfile::tempdir()?;
    let handoff = handoff_dir.path().join("edge.sock");
    relax(
        &mut options.proxy_flags,
        "--handoff-socket",
        &handoff.to_string_lossy(),
    );
    let mut fleet = tokio::task::block_in_place(|| Fleet::start(options))?;
    settled(&fleet).await?;
    let backend = tokio::task::block_in_place(|| fleet.start_backend("v1", &[]))?;
    let listen = format!("127.0.0.1:{}", free_port());
    let addr: SocketAddr = listen.parse()?;

    // A cutover waits for a live proxy, so the first one comes before the
    // route.
    let first = tokio::task::block_in_place(|| fleet.start_proxy_on("edge-0", ZONE, &listen))?;
    fleet.proxies.push(first);
    let yaml = format!(
        "{}{}{}",
        manifests::base(),
        manifests::backend("v1", backend),
        manifests::route("v1", "h0", "30s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;
    fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(60), |_| {})
        .await?;
    let admin = fleet.proxies[0].address("admin")?;
    eventually("edge-0 ready", Duration::from_secs(30), async || {
        ready(&admin).await
    })
    .await?;

    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..KEEP_ALIVE_CLIENTS + FRESH_CLIENTS)
        .map(|i| {
            let fresh = i >= KEEP_ALIVE_CLIENTS;
            tokio::spawn(client(addr, fresh, Arc::clone(&tally), Arc::clone(&stop)))
        })
        .collect();

    // Requests served while each replacement was under way: from the new
    // process's start to the old one's exit.
    let mut during = Vec::new();
    let mut exits = Vec::new();
    for n in 1..=REPLACEMENTS {
        // The serving process carries load before it is replaced.
        let target = tally.ok.load(Ordering::Relaxed) + LOAD_PER_ROUND;
        served_at_least(&tally, target, &format!("load on edge-{}", n - 1)).await?;
        let before = tally.ok.load(Ordering::Relaxed);
        let next = start_ready(&fleet, n, &listen).await?;
        fleet.proxies.push(next);
        let old = &mut fleet.proxies[n - 1];
        let code = tokio::task::block_in_place(|| old.terminate(EXIT_LIMIT));
        exits.push((old.name().to_string(), code));
        during.push(tally.ok.load(Ordering::Relaxed) - before);
    }
    let target = tally.ok.load(Ordering::Relaxed) + LOAD_PER_ROUND;
    served_at_least(&tally, target, "load on the last proxy").await?;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await?;
    }
    let last = fleet.proxies.last_mut().map(|p| {
        let code = tokio::task::block_in_place(|| p.terminate(EXIT_LIMIT));
        (p.name().to_string(), code)
    });

    let ok = tally.ok.load(Ordering::Relaxed);
    let failed = tally.failed.load(Ordering::Relaxed);
    let reconnects = tally.reconnects.load(Ordering::Relaxed);
    println!(
        "proxy process replacement: {ok} ok, {failed} failed, {reconnects} keep-alive reconnects, \
         ok during each replacement {during:?}, exits {exits:?}, in {:?}",
        started.elapsed()
    );
    let failures = tally.failures.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(failed, 0, "failed requests, first ones: {failures:#?}");
    assert!(
        during.iter().all(|n| *n > 0),
        "a replacement stopped the traffic: {during:?}"
    );
    assert!(ok >= LOAD_PER_ROUND * (REPLACEMENTS as u64 + 1), "{ok}");
    assert_eq!(exits.len(), REPLACEMENTS);
    for (name, code) in exits.iter().chain(&last) {
        assert_eq!(*code, Some(0), "{name} did not drain and exit 0");
    }
    // Each drain closes every keep-alive connection of the old process.
    assert!(
        reconnects >= (KEEP_ALIVE_CLIENTS * REPLACEMENTS) as u64,
        "{reconnects} keep-alive reconnects"
    );
    // Every replacement accepted from its predecessor's socket rather
    // than a new one of its own.
    for proxy in &fleet.proxies[1..] {
        assert!(
            proxy
                .log_text()
                .contains("took over the socket of the process this one replaces"),
            "{} bound a socket of its own:\n{}",
            proxy.name(),
            proxy.log_text()
        );
    }
    let warnings = fleet.warnings();
    assert!(
        warnings.is_empty(),
        "a clean run logged {} WARN/ERROR lines:\n{}",
        warnings.len(),
        warnings.join("\n")
    );
    Ok(())
}
