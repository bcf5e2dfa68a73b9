//! The Gateway API HTTPRoute conformance cases in the repository's
//! `tests/data/gateway-api/*.yaml`, run against the real data
//! plane: one echo backend per Service endpoint (as the README's "Backends"
//! section describes), one 127.0.0.1 socket per (Gateway, port) the cases
//! use, the file's Gateways, routes and grants parsed by the project's own
//! Kubernetes parser, and every case judged by the suite's rules (3 passes
//! in a row, within a deadline). Cases that require TLS are sent over TLS
//! to the Gateway's HTTPS listener with the case's SNI, over HTTP/1.1 or, for
//! `protocol: h2`, HTTP/2 (`conformance_support/tls_client.rs`); the
//! client verifies the certificate against the runner's test CA. Nothing
//! is skipped. The GRPCRoute files (a GRPCRoute among their routes) are
//! run by `conformance_support/grpc_cases.rs`: gRPC backends, tonic calls
//! over h2c, the suite's gRPC judge. The BackendTLSPolicy files (a
//! `backend_tls_policies` key) are run by
//! `conformance_support/backend_tls_cases.rs`: TLS-only backends with
//! test-CA certificates, the CA ConfigMaps the policies name, the
//! suite's judge plus the server name the backend's handshake carried.
//!
//! Secrets (`conformance_support/secrets.rs`): a file with a `secrets` key
//! (the Gateway listener TLS tests) gets exactly the Secrets it declares,
//! and its HTTPS listeners are probed for what their expected
//! `ResolvedRefs` implies (`conformance_support/listener_probes.rs`, the
//! runner's own check); a file without the key gets a certificate in
//! every Secret its HTTPS listeners name.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

#[path = "conformance_support/backend_tls_cases.rs"]
mod backend_tls_cases;
#[path = "conformance_support/distribution.rs"]
mod distribution;
#[path = "conformance_support/grpc_cases.rs"]
mod grpc_cases;
#[path = "conformance_support/judge.rs"]
mod judge;
#[path = "conformance_support/listener_probes.rs"]
mod listener_probes;
#[path = "conformance_support/secrets.rs"]
mod secrets;
mod support;
#[path = "conformance_support/tls_client.rs"]
mod tls_client;

use anyhow::{Context, Result, anyhow, bail, ensure};
use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use support::echo::{Echo, start_echo};
use support::*;
use switchyard_proto::model::*;
use switchyard_proxy::router::ListenerKey;
use switchyard_test_support::conformance_secrets::declares_secrets;
use switchyard_test_support::listener_tls::TestCa;
use tokio::time::Instant;

pub(crate) const PASSES_IN_A_ROW: usize = 3;
const CASE_DEADLINE: Duration = Duration::from_secs(5);
const REQUEST_ID_PARAM: &str = "gateway-api-conformance-request-id";

fn conformance_dir() -> PathBuf {
    switchyard_test_support::gateway_api_cases()
}

/// Labels of the suite's base namespaces (README table), plus the label
/// Kubernetes puts on every namespace.
pub(crate) fn namespace_object(name: &str, file_labels: Option<&Value>) -> Namespace {
    let base = match name {
        "gateway-conformance-infra" => Some("infra"),
        "gateway-conformance-app-backend" | "gateway-conformance-web-backend" => Some("backend"),
        _ => None,
    };
    let mut labels: Vec<(String, String)> =
        vec![("kubernetes.io/metadata.name".to_owned(), name.to_owned())];
    match file_labels.and_then(Value::as_object) {
        Some(map) => labels.extend(
            map.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())),
        ),
        None => labels.extend(base.map(|b| ("gateway-conformance".to_owned(), b.to_owned()))),
    }
    let pairs: Vec<(&str, &str)> = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    namespace(name, &pairs)
}

/// Replicas of a base Service (README: 2, except infra-backend-v3).
fn replicas(service: &str) -> usize {
    if service == "infra-backend-v3" { 1 } else { 2 }
}

/// Everything one file's run needs.
pub(crate) struct FileCtx {
    name: String,
    pub(crate) proxy: Proxy,
    addrs: BTreeMap<(String, u16), SocketAddr>,
    /// The CA of the listener certificates, for TLS clients.
    pub(crate) ca: TestCa,
    /// The listeners to probe (files with `secrets` only).
    probes: Vec<listener_probes::Probe>,
    /// `namespace/name` -> its echo pods.
    echoes: BTreeMap<String, Vec<Echo>>,
    snapshot: ConfigSnapshot,
    routes: Vec<HttpRoute>,
}

#[derive(Default)]
pub(crate) struct Tally {
    passed: usize,
    failed: usize,
    failures: Vec<String>,
}

impl Tally {
    pub(crate) fn record(&mut self, what: String, result: Result<()>) {
        match result {
            Ok(()) => self.passed += 1,
            Err(error) => {
                self.failed += 1;
                self.failures.push(format!("{what}: {error:#}"));
            }
        }
    }
}

pub(crate) fn objects<'a>(data: &'a Value, list: &str) -> impl Iterator<Item = &'a Value> {
    data[list].as_array().into_iter().flatten()
}

async fn setup(name: &str, data: &Value) -> Result<FileCtx> {
    let mut snapshot = ConfigSnapshot {
        version: 1,
        ..Default::default()
    };
    snapshot.gateway_classes.push(gateway_class());
    let mut routes = Vec::new();
    let mut namespaces = BTreeSet::new();
    let mut index = 0;
    for list in ["gateways", "routes", "reference_grants"] {
        for object in objects(data, list) {
            let resource = switchyard_kubeconfig::parse_object(name, index, object.clone())
                .with_context(|| format!("{name}: {list}[{index}]"))?;
            index += 1;
            namespaces.insert(resource.meta().namespace.clone());
            match resource {
                Resource::Gateway(g) => snapshot.gateways.push(g),
                Resource::HttpRoute(r) => routes.push(r),
                Resource::ReferenceGrant(g) => snapshot.reference_grants.push(g),
                other => bail!("{name}: unexpected {} in {list}", other.kind()),
            }
        }
    }

    let mut echoes: BTreeMap<String, Vec<Echo>> = BTreeMap::new();
    let mut warm = Vec::new();
    for backend in objects(data, "backends") {
        if !backend["exists_in_base"].as_bool().unwrap_or(false) {
            continue;
        }
        let text = backend["service"].as_str().context("backends[].service")?;
        let key = BackendKey::parse(text).with_context(|| format!("backend {text}"))?;
        let ns = key.service.namespace.clone();
        let svc = key.service.name.clone();
        namespaces.insert(ns.clone());
        let id = format!("{ns}/{svc}");
        if !echoes.contains_key(&id) {
            let mut pods = Vec::new();
            for replica in 0..replicas(&svc) {
                pods.push(start_echo(&ns, &svc, replica).await);
            }
            let addrs: Vec<SocketAddr> = pods.iter().map(|p| p.addr).collect();
            snapshot
                .endpoint_slices
                .extend(slices(&ns, &svc, &addrs, 1));
            snapshot.services.push(Service {
                meta: ObjectMeta::named(&ns, &svc),
                ports: Vec::new(),
            });
            echoes.insert(id.clone(), pods);
        }
        // One Service object per name, with every port the file uses.
        if let Some(service) = snapshot
            .services
            .iter_mut()
            .find(|s| s.meta.namespace == ns && s.meta.name == svc)
            && !service.ports.iter().any(|p| p.port == key.port)
        {
            service.ports.push(ServicePort {
                name: Some("http".to_owned()),
                port: key.port,
                target_port: None,
                app_protocol: None,
            });
        }
        let count = u32::try_from(replicas(&svc))?;
        if !warm.iter().any(|(k, _)| *k == key) {
            warm.push((key, count));
        }
    }
    let ca = TestCa::new("conformance CA");
    namespaces.extend(secrets::install(
        &mut snapshot,
        name,
        data,
        &ca,
        &mut index,
    )?);
    for ns in namespaces {
        let labels = data["namespace_labels"].get(&ns);
        snapshot.namespaces.push(namespace_object(&ns, labels));
    }

    // One socket per (Gateway, port) a case, the distribution or a probe
    // uses.
    let probes = if declares_secrets(data) {
        listener_probes::probes(data, &snapshot.gateways)
            .with_context(|| format!("{name}: probes"))?
    } else {
        Vec::new()
    };
    let mut wanted: BTreeSet<(String, u16)> =
        probes.iter().map(|p| (p.gateway.clone(), p.port)).collect();
    let requests = objects(data, "cases")
        .map(|c| &c["request"])
        .chain(std::iter::once(&data["distribution"]["request"]));
    for request in requests {
        if let (Some(gw), Some(port)) = (request["gateway"].as_str(), request["port"].as_u64()) {
            wanted.insert((gw.to_owned(), u16::try_from(port)?));
        }
    }
    let mut keys = Vec::new();
    for (gw, port) in &wanted {
        let (ns, gname) = gw.split_once('/').context("gateway ns/name")?;
        keys.push(ListenerKey {
            gateway: Some(ObjectName::new(ns, gname)),
            port: *port,
        });
    }
    let proxy = Proxy::start(test_settings(), keys).await;
    let addrs = wanted
        .into_iter()
        .zip(proxy.addrs.iter().copied())
        .collect();
    proxy
        .dp
        .set_warming(warm.iter().map(|(k, _)| k.clone()).collect());
    proxy.install(snapshot.clone(), routes.clone());
    proxy.wait_healthy(&warm).await;
    Ok(FileCtx {
        name: name.to_owned(),
        proxy,
        addrs,
        ca,
        probes,
        echoes,
        snapshot,
        routes,
    })
}

impl FileCtx {
    pub(crate) fn addr(&self, request: &Value) -> Result<SocketAddr> {
        let gw = request["gateway"].as_str().context("request.gateway")?;
        let port = u16::try_from(request["port"].as_u64().context("request.port")?)?;
        self.addr_of(gw, port)
    }

    /// The local socket of `gateway`'s listeners on `port`.
    pub(crate) fn addr_of(&self, gateway: &str, port: u16) -> Result<SocketAddr> {
        self.addrs
            .get(&(gateway.to_owned(), port))
            .copied()
            .ok_or_else(|| anyhow!("no socket for {gateway}:{port}"))
    }

    /// Mirror log lines equal to `uri` across the pods of `ns/name`.
    pub(crate) fn mirror_count(&self, id: &str, uri: &str) -> usize {
        self.echoes
            .get(id)
            .map_or(0, |pods| pods.iter().map(|p| p.count(uri)).sum())
    }

    /// Serves the file's world with `gateway` its only Gateway.
    fn serve_only(&mut self, gateway: &str) {
        self.snapshot.version += 1;
        let mut alone = self.snapshot.clone();
        alone
            .gateways
            .retain(|g| g.meta.object_name().to_string() == gateway);
        self.proxy.install(alone, self.routes.clone());
    }

    fn before(&mut self, step: &Value) -> Result<()> {
        let action = step["action"].as_str().unwrap_or_default();
        let kind = step["kind"].as_str().unwrap_or_default();
        let object = step["object"].as_str().unwrap_or_default();
        ensure!(
            action == "delete" && kind == "ReferenceGrant",
            "unsupported before step {step}"
        );
        let (ns, name) = object.split_once('/').context("before.object ns/name")?;
        let before = self.snapshot.reference_grants.len();
        self.snapshot
            .reference_grants
            .retain(|g| !(g.meta.namespace == ns && g.meta.name == name));
        ensure!(
            self.snapshot.reference_grants.len() < before,
            "no ReferenceGrant {object} to delete"
        );
        self.snapshot.version += 1;
        self.proxy
            .install(self.snapshot.clone(), self.routes.clone());
        Ok(())
    }
}

/// The request a case sends, and the path and Host it sent.
pub(crate) fn build_request(
    request: &Value,
    addr: SocketAddr,
    path_suffix: Option<&str>,
) -> Result<(Request<Full<Bytes>>, String, Option<String>)> {
    let mut path = request["path"].as_str().context("request.path")?.to_owned();
    if let Some(suffix) = path_suffix {
        path.push(if path.contains('?') { '&' } else { '?' });
        path.push_str(suffix);
    }
    let host = request["host"].as_str().map(str::to_owned);
    let method = request["method"].as_str().unwrap_or("GET");
    let mut builder = Request::builder().method(method).uri(path.as_str()).header(
        http::header::HOST,
        host.clone().unwrap_or_else(|| addr.to_string()),
    );
    if let Some(headers) = request["headers"].as_object() {
        for (name, value) in headers {
            builder = builder.header(name.as_str(), value.as_str().unwrap_or_default());
        }
    }
    // The suite always sends it, sometimes empty.
    let echo_set = request["echo_backend_set_response_headers"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}:{}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    builder = builder.header("X-Echo-Set-Header", echo_set);
    Ok((builder.body(Full::new(Bytes::new()))?, path, host))
}

pub(crate) fn request_id() -> String {
    format!("{REQUEST_ID_PARAM}={:032x}", rand::random::<u128>())
}

/// One attempt at a case: send, judge, and check unconditional mirrors.
async fn attempt(ctx: &FileCtx, case: &Value) -> Result<()> {
    let request = &case["request"];
    let expected = &case["expected"];
    let addr = ctx.addr(request)?;
    let id = request["request_id_query_param"]
        .as_bool()
        .unwrap_or(false)
        .then(request_id);
    let (req, path, host) = build_request(request, addr, id.as_deref())?;
    let protocol = tls_client::Protocol::of(request)?;
    let reply = if request["requires_tls"].as_bool().unwrap_or(false) {
        let sni = request["tls"]["sni"].as_str().context("request.tls.sni")?;
        tls_client::send(&ctx.ca, addr, sni, protocol, req).await?
    } else {
        ensure!(
            protocol == tls_client::Protocol::Http1,
            "request.protocol h2 without requires_tls (h2c is not in the schema)"
        );
        support::client::send(addr, req).await?
    };
    judge::judge(request, expected, &reply, &path, host.as_deref())?;
    for mirror in expected["mirrored_to"].as_array().into_iter().flatten() {
        let percent = mirror["percent"].as_u64().unwrap_or(100);
        if percent < 100 {
            // Judged by the distribution phase.
            continue;
        }
        let target = format!(
            "{}/{}",
            mirror["namespace"].as_str().unwrap_or_default(),
            mirror["backend"].as_str().unwrap_or_default()
        );
        // Mirrors are fire-and-forget: give the copy a moment to land.
        let what = format!("{target} to receive the mirrored {path}");
        eventually(&what, Duration::from_secs(3), async || {
            ctx.mirror_count(&target, &path) > 0
        })
        .await?;
    }
    Ok(())
}

/// The suite's retry rule: pass `PASSES_IN_A_ROW` times in a row within
/// the deadline.
async fn run_case(ctx: &FileCtx, case: &Value) -> Result<()> {
    let deadline = Instant::now() + CASE_DEADLINE;
    let mut in_a_row = 0;
    loop {
        match attempt(ctx, case).await {
            Ok(()) => {
                in_a_row += 1;
                if in_a_row == PASSES_IN_A_ROW {
                    return Ok(());
                }
            }
            Err(error) => {
                if Instant::now() >= deadline {
                    return Err(error);
                }
                in_a_row = 0;
                // The suite's pause between attempts (its own retry rule,
                // not a wait for one event).
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn run_file(name: &str, data: &Value) -> Tally {
    let mut tally = Tally::default();
    let mut ctx = match setup(name, data).await {
        Ok(ctx) => ctx,
        Err(error) => {
            tally.record(format!("{name} setup"), Err(error));
            return tally;
        }
    };
    let dist = &data["distribution"];
    for case in objects(data, "cases") {
        let id = case["id"].as_u64().unwrap_or(0);
        let label = format!(
            "{name} case {id}{}",
            case["group"]
                .as_str()
                .map(|g| format!(" ({g})"))
                .unwrap_or_default()
        );
        if case["before"].is_object()
            && let Err(error) = ctx.before(&case["before"])
        {
            tally.record(label, Err(error));
            continue;
        }
        let result = run_case(&ctx, case).await;
        let passed = result.is_ok();
        tally.record(label.clone(), result);
        if passed
            && dist["per_case"].as_bool().unwrap_or(false)
            && case["expected"]["mirrored_to"][0]["percent"].is_u64()
        {
            let result = distribution::mirror(&ctx, case, dist).await;
            tally.record(format!("{label} mirror distribution"), result);
        }
    }
    if dist["expected_fractions"].is_object() {
        let result = distribution::weight(&ctx, dist).await;
        tally.record(format!("{name} weight distribution"), result);
    }
    // One Gateway at a time (see listener_probes).
    let probes = ctx.probes.clone();
    let gateways: BTreeSet<&str> = probes.iter().map(|p| p.gateway.as_str()).collect();
    for gateway in gateways {
        ctx.serve_only(gateway);
        for probe in probes.iter().filter(|p| p.gateway == gateway) {
            let result = listener_probes::run(&ctx, probe, CASE_DEADLINE).await;
            tally.record(probe.label(name), result);
        }
    }
    ctx.proxy.shutdown().await;
    let _ = &ctx.name;
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_api_conformance_cases() {
    let dir = conformance_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("yaml"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no conformance files in {}",
        dir.display()
    );
    let mut total = Tally::default();
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("{GATEWAY_CLASS_NAME}", CLASS);
        let data: Value = yaml_serde::from_str(&text).unwrap();
        let tally = if grpc_cases::is_grpc_file(&data) {
            grpc_cases::run_file(&name, &data, CASE_DEADLINE).await
        } else if backend_tls_cases::is_backend_tls_file(&data) {
            backend_tls_cases::run_file(
                &name,
                &data,
                CASE_DEADLINE,
                backend_tls_cases::KNOWN_FAILURES,
            )
            .await
        } else {
            run_file(&name, &data).await
        };
        println!("{name}: passed {}, failed {}", tally.passed, tally.failed);
        for failure in &tally.failures {
            println!("  FAIL {failure}");
        }
        total.passed += tally.passed;
        total.failed += tally.failed;
        total.failures.extend(tally.failures);
    }
    println!(
        "conformance total: passed {}, failed {}",
        total.passed, total.failed
    );
    assert!(
        total.failures.is_empty(),
        "{} conformance checks failed:\n{}",
        total.failures.len(),
        total.failures.join("\n")
    );
}
