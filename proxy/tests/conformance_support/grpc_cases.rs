//! The GRPCRoute conformance files (`GRPC*.yaml`, cases with
//! `request.protocol: grpc`) run against the real data plane, as the
//! suite's gRPC client and judge do it (`conformance/utils/grpc/grpc.go`):
//!
//! - one `GrpcBackend` per pod of every Service the file declares in
//!   `services` (`replicas` from its `backends` entry), named
//!   `<namespace>/<service>-<i>`, so its answer `"<name> <path>"` says
//!   the namespace, the pod and the method it was called with — what the
//!   suite's echo server reports;
//! - the file's Gateways, GRPCRoutes and Services parsed by the project's
//!   own parser and installed in a `DataPlane`, with one EndpointSlice per
//!   pod filled in by this runner;
//! - each case a tonic unary call of `/<service>/<method>` over h2c to the
//!   Gateway's socket, with the case's metadata and `:authority` (the
//!   socket's address when the case sets none, as grpc-go sends its
//!   target), judged by [`judge`] and retried by the suite's rule;
//! - `GRPCRouteWeight`'s distribution with the suite's numbers.
//!
//! Anything in a case this runner does not know how to check (an unknown
//! key, a backend expected with a non-OK code) fails the case: nothing
//! passes unchecked. `suite_unchecked` is the one key read and ignored on
//! purpose: the README says why.

use crate::support::Proxy;
use crate::{PASSES_IN_A_ROW, Tally, namespace_object, objects};
use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;
use switchyard_proto::model::*;
use switchyard_proxy::router::ListenerKey;
use switchyard_test_support::grpc::{GrpcBackend, GrpcClient};
use tokio::time::Instant;

/// The keys a gRPC case's `request` may have.
const REQUEST_KEYS: &[&str] = &[
    "gateway",
    "port",
    "protocol",
    "authority",
    "service",
    "method",
    "metadata",
];
/// The keys a gRPC case's `expected` may have: each is checked.
const EXPECTED_KEYS: &[&str] = &["code", "backend", "namespace"];
/// The keys of a case.
const CASE_KEYS: &[&str] = &[
    "id",
    "group",
    "request",
    "expected",
    "note",
    "suite_unchecked",
];

/// The suite's status code names (Go's `codes.Code.String()`), by number.
const CODE_NAMES: [&str; 17] = [
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];

/// Whether `data` is a gRPC file: a GRPCRoute among its routes or a gRPC
/// case. Such a file is run here and only here.
pub(crate) fn is_grpc_file(data: &Value) -> bool {
    objects(data, "routes").any(|r| r["kind"] == "GRPCRoute")
        || objects(data, "cases").any(|c| c["request"]["protocol"] == "grpc")
}

fn code_of(name: &str) -> Result<tonic::Code> {
    let number = CODE_NAMES
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| anyhow!("unknown gRPC code {name:?}"))?;
    Ok(tonic::Code::from_i32(i32::try_from(number)?))
}

fn code_name(code: tonic::Code) -> &'static str {
    usize::try_from(code as i32)
        .ok()
        .and_then(|i| CODE_NAMES.get(i))
        .copied()
        .unwrap_or("?")
}

fn only_keys(what: &str, value: &Value, allowed: &[&str]) -> Result<()> {
    let map = value
        .as_object()
        .with_context(|| format!("{what} is not a map"))?;
    for key in map.keys() {
        ensure!(
            allowed.contains(&key.as_str()),
            "{what}.{key}: not something this runner checks (it knows {allowed:?})"
        );
    }
    Ok(())
}

/// One call a case or the distribution makes.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    gateway: String,
    port: u16,
    /// `None`: the socket's address, as grpc-go sends its target.
    authority: Option<String>,
    /// `/<service>/<method>`.
    path: String,
    metadata: Vec<(String, String)>,
}

impl Call {
    pub(crate) fn parse(request: &Value) -> Result<Call> {
        only_keys("request", request, REQUEST_KEYS)?;
        ensure!(
            request["protocol"] == "grpc",
            "request.protocol is {}, not grpc",
            request["protocol"]
        );
        let service = request["service"].as_str().context("request.service")?;
        let method = request["method"].as_str().context("request.method")?;
        let mut metadata = Vec::new();
        for (name, value) in request["metadata"].as_object().into_iter().flatten() {
            let value = value
                .as_str()
                .with_context(|| format!("request.metadata.{name} is not a string"))?;
            metadata.push((name.clone(), value.to_owned()));
        }
        Ok(Call {
            gateway: request["gateway"]
                .as_str()
                .context("request.gateway")?
                .to_owned(),
            port: u16::try_from(request["port"].as_u64().context("request.port")?)?,
            authority: match &request["authority"] {
                Value::Null => None,
                Value::String(a) => Some(a.clone()),
                other => bail!("request.authority {other} is not a string"),
            },
            path: format!("/{service}/{method}"),
            metadata,
        })
    }

    /// Sends the call once, on a connection of its own (the suite dials
    /// per case and per distribution sample); `extra` metadata is added.
    async fn send(&self, addr: SocketAddr, extra: &[(&str, &str)]) -> Result<Outcome> {
        let authority = self.authority.clone().unwrap_or_else(|| addr.to_string());
        let mut client = GrpcClient::connect_exact(addr, &authority)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        let mut metadata: Vec<(&str, &str)> = self
            .metadata
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        metadata.extend_from_slice(extra);
        Ok(client.call(&self.path, "", &metadata).await)
    }
}

/// What a call ended with: the answer's string, or the status.
pub(crate) type Outcome = Result<String, tonic::Status>;

/// The echo backend's answer `"<namespace>/<service>-<i> <path>"`, as
/// `(namespace, service, path)`.
fn parse_answer(answer: &str) -> Result<(&str, &str, &str)> {
    let (pod, path) = answer
        .split_once(' ')
        .with_context(|| format!("answer {answer:?} is not \"<pod> <path>\""))?;
    let (namespace, pod) = pod
        .split_once('/')
        .with_context(|| format!("pod {pod:?} is not <namespace>/<pod>"))?;
    let (service, replica) = pod
        .rsplit_once('-')
        .with_context(|| format!("pod {pod:?} is not <service>-<i>"))?;
    ensure!(
        replica.parse::<usize>().is_ok(),
        "pod {pod:?} is not <service>-<i>"
    );
    Ok((namespace, service, path))
}

/// The suite's `compareResponse`, one attempt: the code must equal; when
/// it is OK, the backend must have been called with `sent_path`, from the
/// expected namespace (when given), as a pod of the expected Service (when
/// given; stricter than the suite's name-prefix test, never looser).
pub(crate) fn judge(expected: &Value, outcome: &Outcome, sent_path: &str) -> Result<()> {
    only_keys("expected", expected, EXPECTED_KEYS)?;
    let want = code_of(expected["code"].as_str().context("expected.code")?)?;
    let backend = expected["backend"].as_str();
    let namespace = expected["namespace"].as_str();
    ensure!(
        want == tonic::Code::Ok || (backend.is_none() && namespace.is_none()),
        "expected.backend/namespace with code {}: the suite checks them only for OK",
        code_name(want)
    );
    let got = match outcome {
        Ok(_) => tonic::Code::Ok,
        Err(status) => status.code(),
    };
    ensure!(
        got == want,
        "code {} (want {}); {}",
        code_name(got),
        code_name(want),
        match outcome {
            Ok(answer) => format!("answer {answer:?}"),
            Err(status) => format!("message {:?}", status.message()),
        }
    );
    let Ok(answer) = outcome else {
        return Ok(());
    };
    let (got_ns, got_service, got_path) = parse_answer(answer)?;
    ensure!(
        got_path == sent_path,
        "backend called with {got_path} (sent {sent_path})"
    );
    if let Some(ns) = namespace {
        ensure!(got_ns == ns, "namespace {got_ns} (want {ns})");
    }
    if let Some(backend) = backend {
        ensure!(
            got_service == backend,
            "answered by {got_service} (want {backend})"
        );
    }
    Ok(())
}

/// One file's world.
struct GrpcCtx {
    proxy: Proxy,
    /// `(gateway, port)` -> the local socket of its listeners.
    addrs: BTreeMap<(String, u16), SocketAddr>,
    /// `namespace/service` -> its pods (kept running).
    _pods: BTreeMap<String, Vec<GrpcBackend>>,
}

impl GrpcCtx {
    fn addr(&self, call: &Call) -> Result<SocketAddr> {
        self.addrs
            .get(&(call.gateway.clone(), call.port))
            .copied()
            .ok_or_else(|| anyhow!("no socket for {}:{}", call.gateway, call.port))
    }
}

/// EndpointSlices for `service`'s pods: one per pod (each listens on a
/// port of its own), the port named as the Service's port `port` is.
fn slices(service: &Service, port: u16, pods: &[GrpcBackend]) -> Result<Vec<EndpointSlice>> {
    let service_port = service
        .ports
        .iter()
        .find(|p| p.port == port)
        .with_context(|| format!("Service {} has no port {port}", service.meta.name))?;
    Ok(pods
        .iter()
        .enumerate()
        .map(|(i, pod)| {
            let mut meta = ObjectMeta::named(
                &service.meta.namespace,
                format!("{}-{i}", service.meta.name),
            );
            meta.labels
                .insert(SERVICE_NAME_LABEL.to_owned(), service.meta.name.clone());
            EndpointSlice {
                meta,
                address_type: "IPv4".to_owned(),
                ports: vec![EndpointPort {
                    name: service_port.name.clone(),
                    port: pod.addr.port(),
                }],
                endpoints: vec![Endpoint {
                    addresses: vec![pod.addr.ip().to_string()],
                    ready: true,
                    serving: true,
                    terminating: false,
                    zone: None,
                }],
                cluster: None,
            }
        })
        .collect())
}

async fn setup(name: &str, data: &Value) -> Result<GrpcCtx> {
    let mut snapshot = ConfigSnapshot {
        version: 1,
        ..Default::default()
    };
    snapshot
        .gateway_classes
        .push(crate::support::gateway_class());
    let mut routes = Vec::new();
    let mut namespaces = BTreeSet::new();
    let mut index = 0;
    for list in ["gateways", "routes", "reference_grants", "services"] {
        for object in objects(data, list) {
            let resource = switchyard_kubeconfig::parse_object(name, index, object.clone())
                .with_context(|| format!("{name}: {list}[{index}]"))?;
            index += 1;
            namespaces.insert(resource.meta().namespace.clone());
            match resource {
                Resource::Gateway(g) => snapshot.gateways.push(g),
                Resource::HttpRoute(r) => routes.push(r),
                Resource::ReferenceGrant(g) => snapshot.reference_grants.push(g),
                Resource::Service(s) => snapshot.services.push(s),
                other => bail!("{name}: unexpected {} in {list}", other.kind()),
            }
        }
    }

    let mut pods: BTreeMap<String, Vec<GrpcBackend>> = BTreeMap::new();
    let mut warm = Vec::new();
    for backend in objects(data, "backends") {
        let text = backend["service"].as_str().context("backends[].service")?;
        ensure!(
            backend["exists_in_base"].as_bool() == Some(true),
            "backend {text}: a gRPC file's backends all exist (no case expects a missing one)"
        );
        let key = BackendKey::parse(text).with_context(|| format!("backend {text}"))?;
        let replicas = backend["replicas"]
            .as_u64()
            .with_context(|| format!("backend {text}: replicas"))?;
        let id = key.service.to_string();
        let service = snapshot
            .services
            .iter()
            .find(|s| s.meta.object_name() == key.service)
            .with_context(|| format!("backend {text}: not among the file's services"))?
            .clone();
        if let std::collections::btree_map::Entry::Vacant(entry) = pods.entry(id) {
            let mut started = Vec::new();
            for i in 0..replicas {
                started.push(GrpcBackend::start(&format!("{}-{i}", entry.key())).await?);
            }
            snapshot
                .endpoint_slices
                .extend(slices(&service, key.port, &started)?);
            entry.insert(started);
        }
        warm.push((key, u32::try_from(replicas)?));
    }
    for ns in namespaces {
        snapshot.namespaces.push(namespace_object(&ns, None));
    }

    let mut calls = Vec::new();
    for case in objects(data, "cases") {
        calls.push(Call::parse(&case["request"])?);
    }
    if data["distribution"].is_object() {
        calls.push(Call::parse(&data["distribution"]["request"])?);
    }
    let wanted: BTreeSet<(String, u16)> =
        calls.iter().map(|c| (c.gateway.clone(), c.port)).collect();
    let mut keys = Vec::new();
    for (gw, port) in &wanted {
        let (ns, gname) = gw.split_once('/').context("gateway ns/name")?;
        keys.push(ListenerKey {
            gateway: Some(ObjectName::new(ns, gname)),
            port: *port,
        });
    }
    let proxy = Proxy::start(crate::support::test_settings(), keys).await;
    let addrs = wanted
        .into_iter()
        .zip(proxy.addrs.iter().copied())
        .collect();
    proxy
        .dp
        .set_warming(warm.iter().map(|(k, _)| k.clone()).collect());
    proxy.install(snapshot, routes);
    proxy.wait_healthy(&warm).await;
    Ok(GrpcCtx {
        proxy,
        addrs,
        _pods: pods,
    })
}

/// The suite's retry rule for one case: `PASSES_IN_A_ROW` passes in a row
/// within `deadline`.
async fn run_case(ctx: &GrpcCtx, case: &Value, deadline: Duration) -> Result<()> {
    only_keys("case", case, CASE_KEYS)?;
    let call = Call::parse(&case["request"])?;
    let addr = ctx.addr(&call)?;
    let until = Instant::now() + deadline;
    let mut in_a_row = 0;
    loop {
        let result = match call.send(addr, &[]).await {
            Ok(outcome) => judge(&case["expected"], &outcome, &call.path),
            Err(error) => Err(error),
        };
        match result {
            Ok(()) => {
                in_a_row += 1;
                if in_a_row == PASSES_IN_A_ROW {
                    return Ok(());
                }
            }
            Err(error) => {
                if Instant::now() >= until {
                    return Err(error);
                }
                in_a_row = 0;
                // The suite's pause between attempts.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// `GRPCRouteWeight`: the suite's `TestWeightedDistribution` over gRPC
/// calls (each OK, each answered by a pod of a listed backend), retried up
/// to `max_attempts`.
async fn weight(ctx: &GrpcCtx, dist: &Value) -> Result<()> {
    let call = Call::parse(&dist["request"])?;
    let addr = ctx.addr(&call)?;
    let total = usize::try_from(dist["total_requests"].as_u64().context("total_requests")?)?;
    let concurrency = usize::try_from(dist["concurrency"].as_u64().context("concurrency")?)?;
    let tolerance = dist["tolerance_abs"].as_f64().context("tolerance_abs")?;
    let attempts = dist["max_attempts"].as_u64().context("max_attempts")?;
    let fractions = dist["expected_fractions"]
        .as_object()
        .context("expected_fractions")?
        .clone();
    let mut last = anyhow!("no attempt made");
    for _ in 0..attempts {
        let mut workers = Vec::new();
        for w in 0..concurrency {
            let call = call.clone();
            let share = total / concurrency + usize::from(w < total % concurrency);
            workers.push(tokio::spawn(async move {
                let mut services = Vec::with_capacity(share);
                for _ in 0..share {
                    // The suite's entropy: half the calls carry x-jitter.
                    let jitter = rand::random_range(0..10_000u32).to_string();
                    let extra: Vec<(&str, &str)> = if rand::random::<bool>() {
                        vec![("x-jitter", jitter.as_str())]
                    } else {
                        Vec::new()
                    };
                    let answer = call.send(addr, &extra).await?.map_err(|s| {
                        anyhow!("call ended {}: {}", code_name(s.code()), s.message())
                    })?;
                    let (_, service, _) = parse_answer(&answer)?;
                    services.push(service.to_owned());
                }
                Ok::<_, anyhow::Error>(services)
            }));
        }
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for w in workers {
            for service in w.await?? {
                *counts.entry(service).or_default() += 1;
            }
        }
        match check_weights(&counts, &fractions, total, tolerance) {
            Ok(()) => return Ok(()),
            Err(error) => last = error,
        }
    }
    Err(last)
}

/// The suite's verdict on one distribution sample.
fn check_weights(
    counts: &BTreeMap<String, usize>,
    fractions: &serde_json::Map<String, Value>,
    total: usize,
    tolerance: f64,
) -> Result<()> {
    for backend in counts.keys() {
        ensure!(
            fractions.contains_key(backend),
            "unexpected backend {backend} got traffic"
        );
    }
    for (backend, want) in fractions {
        let want = want.as_f64().context("expected fraction")?;
        let got = counts.get(backend).copied().unwrap_or(0) as f64 / total as f64;
        ensure!(
            (got - want).abs() <= tolerance,
            "{backend}: {got:.3} of calls, want {want} ± {tolerance}; counts {counts:?}"
        );
        if want == 0.0 {
            ensure!(got == 0.0, "{backend} has weight 0 but got traffic");
        }
    }
    Ok(())
}

/// Runs one gRPC file: every case (each within `deadline`), then the
/// distribution if there is one.
pub(crate) async fn run_file(name: &str, data: &Value, deadline: Duration) -> Tally {
    let mut tally = Tally::default();
    let ctx = match setup(name, data).await {
        Ok(ctx) => ctx,
        Err(error) => {
            tally.record(format!("{name} setup"), Err(error));
            return tally;
        }
    };
    for case in objects(data, "cases") {
        let label = format!(
            "{name} case {}{}",
            case["id"],
            case["group"]
                .as_str()
                .map(|g| format!(" ({g})"))
                .unwrap_or_default()
        );
        let result = run_case(&ctx, case, deadline).await;
        tally.record(label, result);
    }
    let dist = &data["distribution"];
    if !dist.is_null() {
        let result = if dist["expected_fractions"].is_object() {
            weight(&ctx, dist).await
        } else {
            Err(anyhow!("a distribution other than weights: {dist}"))
        };
        tally.record(format!("{name} weight distribution"), result);
    }
    ctx.proxy.shutdown().await;
    tally
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PATH: &str = "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo";

    fn ok(pod: &str) -> Outcome {
        Ok(format!("gateway-conformance-infra/{pod} {PATH}"))
    }

    fn expect(backend: &str) -> Value {
        json!({"code": "OK", "backend": backend, "namespace": "gateway-conformance-infra"})
    }

    #[test]
    fn the_judge_passes_the_right_backend_and_fails_a_flipped_one() {
        let answer = ok("grpc-infra-backend-v1-1");
        judge(&expect("grpc-infra-backend-v1"), &answer, PATH).unwrap();
        let flipped = judge(&expect("grpc-infra-backend-v2"), &answer, PATH).unwrap_err();
        assert!(
            flipped
                .to_string()
                .contains("answered by grpc-infra-backend-v1 (want grpc-infra-backend-v2)"),
            "{flipped}"
        );
        // A prefix is not the Service: v1 is not v10.
        let v10 = ok("grpc-infra-backend-v10-0");
        assert!(judge(&expect("grpc-infra-backend-v1"), &v10, PATH).is_err());
    }

    #[test]
    fn the_judge_checks_code_method_and_namespace() {
        let answer = ok("grpc-infra-backend-v1-0");
        let unimplemented = json!({"code": "Unimplemented", "backend": null, "namespace": null});
        let err = judge(&unimplemented, &answer, PATH).unwrap_err();
        assert!(
            err.to_string().contains("code OK (want Unimplemented)"),
            "{err}"
        );
        let refused: Outcome = Err(tonic::Status::unimplemented("no route"));
        judge(&unimplemented, &refused, PATH).unwrap();
        assert!(judge(&expect("grpc-infra-backend-v1"), &refused, PATH).is_err());
        let other_method = PATH.replace("/Echo", "/EchoTwo");
        assert!(judge(&expect("grpc-infra-backend-v1"), &answer, &other_method).is_err());
        let mut other_ns = expect("grpc-infra-backend-v1");
        other_ns["namespace"] = json!("gateway-conformance-app-backend");
        assert!(judge(&other_ns, &answer, PATH).is_err());
    }

    #[test]
    fn expectations_the_judge_cannot_check_fail_loudly() {
        let answer = ok("grpc-infra-backend-v1-0");
        let mut extra = expect("grpc-infra-backend-v1");
        extra["response_headers"] = json!({"x-header-set": ["v"]});
        let err = judge(&extra, &answer, PATH).unwrap_err();
        assert!(
            err.to_string().contains("expected.response_headers"),
            "{err}"
        );
        let backend_with_error =
            json!({"code": "Unimplemented", "backend": "grpc-infra-backend-v1"});
        assert!(
            judge(
                &backend_with_error,
                &Err(tonic::Status::unimplemented("")),
                PATH
            )
            .is_err()
        );
        assert!(judge(&json!({"code": "Nope"}), &answer, PATH).is_err());
        assert!(judge(&json!({"backend": "grpc-infra-backend-v1"}), &answer, PATH).is_err());
        let mut request = json!({
            "gateway": "ns/gw", "port": 80, "protocol": "grpc", "authority": null,
            "service": "a.B", "method": "C", "metadata": {}
        });
        Call::parse(&request).unwrap();
        request["headers"] = json!({"x": "y"});
        assert!(Call::parse(&request).is_err());
        request.as_object_mut().unwrap().remove("headers");
        request["protocol"] = json!("h2");
        assert!(Call::parse(&request).is_err());
    }

    /// Through the real data plane: `GRPCExactMethodMatching` with case
    /// 0's backend flipped and case 2 expecting OK fails exactly those two,
    /// each saying why; the untouched case 1 still passes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wrong_expectation_fails_through_the_proxy() {
        let path =
            switchyard_test_support::gateway_api_cases().join("GRPCExactMethodMatching.yaml");
        let text = std::fs::read_to_string(path)
            .unwrap()
            .replace("{GATEWAY_CLASS_NAME}", crate::support::CLASS);
        let mut data: Value = yaml_serde::from_str(&text).unwrap();
        assert_eq!(
            data["cases"][0]["expected"]["backend"],
            "grpc-infra-backend-v1"
        );
        data["cases"][0]["expected"]["backend"] = json!("grpc-infra-backend-v2");
        assert_eq!(data["cases"][2]["expected"]["code"], "Unimplemented");
        data["cases"][2]["expected"]["code"] = json!("OK");
        let tally = run_file("flipped", &data, Duration::from_millis(500)).await;
        assert_eq!(
            (tally.passed, tally.failed),
            (1, 2),
            "{:#?}",
            tally.failures
        );
        assert!(
            tally.failures[0].starts_with("flipped case 0 ")
                && tally.failures[0]
                    .contains("answered by grpc-infra-backend-v1 (want grpc-infra-backend-v2)"),
            "{:#?}",
            tally.failures
        );
        assert!(
            tally.failures[1].starts_with("flipped case 2 ")
                && tally.failures[1].contains("code Unimplemented (want OK)"),
            "{:#?}",
            tally.failures
        );
    }

    #[test]
    fn code_names_are_the_suites() {
        for (i, name) in CODE_NAMES.iter().enumerate() {
            let code = code_of(name).unwrap();
            assert_eq!(code as usize, i);
            assert_eq!(code_name(code), *name);
        }
    }

    #[test]
    fn weights_are_judged_as_the_suite_does() {
        let fractions = json!({"v1": 0.7, "v2": 0.3, "v3": 0.0});
        let fractions = fractions.as_object().unwrap();
        let counts = |a: usize, b: usize, c: usize| {
            BTreeMap::from([("v1".into(), a), ("v2".into(), b), ("v3".into(), c)])
        };
        check_weights(&counts(350, 150, 0), fractions, 500, 0.05).unwrap();
        assert!(check_weights(&counts(300, 200, 0), fractions, 500, 0.05).is_err());
        assert!(check_weights(&counts(349, 150, 1), fractions, 500, 0.05).is_err());
        let mut stray = counts(350, 150, 0);
        stray.insert("v4".into(), 1);
        assert!(check_weights(&stray, fractions, 500, 0.05).is_err());
    }
}
