//! `apply-load`: measures committed HTTPRoute updates per second through
//! `AdminService.Apply`, the RPC `switchyard apply` uses. The RPC returns
//! once the Raft entry carrying the new desired spec is committed on a
//! majority and applied to the leader's state machine, so its latency is
//! the commit latency.
//!
//! Each of `--clients` clients owns one HTTPRoute (`bench/route-<i>`) and
//! applies it back to back, alternating its backendRef between the
//! Services `blue` and `green`, so that every apply is a new generation
//! (checked: the generation in every reply must be larger than the one
//! before for that route; anything else is counted as `not_new`).
//! Resources are parsed and serialized to JSON before the clock starts; each
//! client has its own HTTP/2 connection to the leader.
//!
//! Usage: apply_load --coordinators H:P,H:P,H:P [--clients 8] [--seconds 10]
//!        [--warmup 5] [--setup]
//! Prints one line: `RESULT clients=.. applies=.. errors=.. not_new=..
//! seconds=.. rate=.. p50_ms=.. p90_ms=.. p99_ms=.. max_ms=.. mean_ms=..`.

use anyhow::{Context, bail};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_proto::model::ClusterStatus;
use switchyard_proto::pb::{self, admin_service_client::AdminServiceClient};
use tonic::transport::{Channel, Endpoint};

struct Opts {
    coordinators: Vec<String>,
    clients: usize,
    seconds: f64,
    warmup: usize,
    setup: bool,
}

fn parse_args() -> anyhow::Result<Opts> {
    let mut o = Opts {
        coordinators: Vec::new(),
        clients: 1,
        seconds: 10.0,
        warmup: 5,
        setup: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--coordinators" => o.coordinators = value()?.split(',').map(str::to_string).collect(),
            "--clients" => o.clients = value()?.parse()?,
            "--seconds" => o.seconds = value()?.parse()?,
            "--warmup" => o.warmup = value()?.parse()?,
            "--setup" => o.setup = true,
            "-h" | "--help" => {
                println!(
                    "apply-load --coordinators H:P,... [--clients N] [--seconds S] [--warmup N] [--setup]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    if o.coordinators.is_empty() {
        bail!("--coordinators is required");
    }
    if o.clients == 0 || o.seconds.is_nan() || o.seconds <= 0.0 {
        bail!("--clients and --seconds must be positive");
    }
    Ok(o)
}

const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: switchyard }
spec: { controllerName: switchyard.io/gateway-controller }
---
apiVersion: v1
kind: Namespace
metadata: { name: bench }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gateway, namespace: bench }
spec:
  gatewayClassName: switchyard
  listeners:
  - { name: http, port: 8080, protocol: HTTP }
---
apiVersion: v1
kind: Service
metadata: { name: blue, namespace: bench }
spec:
  ports:
  - { name: http, port: 80, targetPort: 8080 }
---
apiVersion: v1
kind: Service
metadata: { name: green, namespace: bench }
spec:
  ports:
  - { name: http, port: 80, targetPort: 8080 }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: blue-1
  namespace: bench
  labels: { kubernetes.io/service-name: blue }
addressType: IPv4
ports:
- { name: http, port: 18081 }
endpoints:
- addresses: ["127.0.0.1"]
  conditions: { ready: true }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: green-1
  namespace: bench
  labels: { kubernetes.io/service-name: green }
addressType: IPv4
ports:
- { name: http, port: 18082 }
endpoints:
- addresses: ["127.0.0.1"]
  conditions: { ready: true }
"#;

fn route_yaml(i: usize, backend: &str) -> String {
    format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{ name: route-{i}, namespace: bench }}
spec:
  parentRefs:
  - name: gateway
  hostnames: ["r{i}.bench.example"]
  rules:
  - backendRefs:
    - {{ name: {backend}, port: 80 }}
"#
    )
}

fn to_json(yaml: &str) -> anyhow::Result<Vec<u8>> {
    let resources = switchyard_kubeconfig::parse_documents("apply-load", yaml)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(serde_json::to_vec(&resources)?)
}

async fn connect(address: &str) -> anyhow::Result<Channel> {
    Endpoint::from_shared(format!("http://{address}"))?
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("cannot connect to {address}"))
}

/// The leader's address, asked of the coordinators in turn (bounded: 20 s).
async fn leader(coordinators: &[String]) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    while Instant::now() < deadline {
        for address in coordinators {
            let Ok(channel) = connect(address).await else {
                last = format!("{address} unreachable");
                continue;
            };
            match AdminServiceClient::new(channel)
                .status(pb::StatusRequest::default())
                .await
            {
                Ok(reply) => {
                    let status: ClusterStatus =
                        serde_json::from_slice(&reply.get_ref().status_json)?;
                    if let Some(id) = status.leader
                        && let Some(a) = status.members.get(&id)
                    {
                        return Ok(a.clone());
                    }
                    last = format!("{address}: no leader yet");
                }
                Err(e) => last = format!("{address}: {}", e.message()),
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("no leader within 20 s: {last}")
}

async fn apply(
    client: &mut AdminServiceClient<Channel>,
    json: &[u8],
) -> Result<pb::ApplyReply, tonic::Status> {
    client
        .apply(pb::ApplyRequest {
            resources_json: json.to_vec(),
        })
        .await
        .map(tonic::Response::into_inner)
}

#[derive(Default)]
struct ClientResult {
    latencies_us: Vec<u64>,
    errors: u64,
    not_new: u64,
    first_error: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let o = parse_args()?;
    let leader = leader(&o.coordinators).await?;
    eprintln!("apply-load: leader at {leader}");
    let channel = connect(&leader).await?;
    if o.setup {
        let mut c = AdminServiceClient::new(channel.clone());
        apply(&mut c, &to_json(BASE)?)
            .await
            .map_err(|e| anyhow::anyhow!("setup apply failed: {}", e.message()))?;
    }
    // Payloads, prepared before any timing.
    let mut payloads = Vec::new();
    for i in 0..o.clients {
        payloads.push([
            to_json(&route_yaml(i, "blue"))?,
            to_json(&route_yaml(i, "green"))?,
        ]);
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(o.clients + 1));
    let run_for = Duration::from_secs_f64(o.seconds);
    let mut tasks = Vec::new();
    for (i, [blue, green]) in payloads.into_iter().enumerate() {
        let barrier = barrier.clone();
        let leader = leader.clone();
        let warmup = o.warmup;
        tasks.push(tokio::spawn(async move {
            let mut r = ClientResult::default();
            let mut client = AdminServiceClient::new(connect(&leader).await?);
            let mut last_generation = 0u64;
            let mut k = 0usize;
            let mut check = |reply: &pb::ApplyReply, r: &mut ClientResult| {
                let g = reply
                    .routes
                    .iter()
                    .find(|g| g.name == format!("route-{i}"))
                    .map_or(0, |g| g.generation);
                if g <= last_generation {
                    r.not_new += 1;
                }
                last_generation = last_generation.max(g);
            };
            for _ in 0..warmup {
                let payload = if k.is_multiple_of(2) { &green } else { &blue };
                k += 1;
                if let Ok(reply) = apply(&mut client, payload).await {
                    check(&reply, &mut r);
                }
            }
            r.not_new = 0;
            barrier.wait().await;
            let start = Instant::now();
            // Bounded: stops at the deadline (each RPC has a 10 s timeout).
            while start.elapsed() < run_for {
                let payload = if k.is_multiple_of(2) { &green } else { &blue };
                k += 1;
                let t0 = Instant::now();
                match apply(&mut client, payload).await {
                    Ok(reply) => {
                        r.latencies_us.push(t0.elapsed().as_micros() as u64);
                        check(&reply, &mut r);
                    }
                    Err(e) => {
                        r.errors += 1;
                        r.first_error.get_or_insert_with(|| e.message().to_string());
                    }
                }
            }
            anyhow::Ok((r, start.elapsed()))
        }));
    }
    barrier.wait().await;
    let start = Instant::now();
    let mut all = Vec::new();
    let (mut errors, mut not_new) = (0, 0);
    for t in tasks {
        let (r, _) = t.await??;
        all.extend(r.latencies_us);
        errors += r.errors;
        not_new += r.not_new;
        if let Some(e) = r.first_error {
            eprintln!("apply-load: error: {e}");
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| -> f64 {
        if all.is_empty() {
            return f64::NAN;
        }
        let i = ((all.len() as f64 * p).ceil() as usize).clamp(1, all.len()) - 1;
        all[i] as f64 / 1000.0
    };
    let mean = if all.is_empty() {
        f64::NAN
    } else {
        all.iter().sum::<u64>() as f64 / all.len() as f64 / 1000.0
    };
    println!(
        "RESULT clients={} applies={} errors={} not_new={} seconds={:.2} rate={:.1} p50_ms={:.2} p90_ms={:.2} p99_ms={:.2} max_ms={:.2} mean_ms={:.2}",
        o.clients,
        all.len(),
        errors,
        not_new,
        elapsed,
        all.len() as f64 / elapsed,
        pct(0.50),
        pct(0.90),
        pct(0.99),
        pct(1.0),
        mean
    );
    Ok(())
}
