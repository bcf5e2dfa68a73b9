//! The BackendTLSPolicy conformance files (a `backend_tls_policies` key,
//! see the data README) run against the real data plane:
//!
//! - one test CA per `ca_config_maps` entry of content `ca`, its PEM in
//!   that ConfigMap's `ca.crt`; `manifest` entries are the file's own
//!   `config_maps` objects, `missing` ones are not made;
//! - every `tls_backends` entry started as `replicas` TLS-only backends
//!   (`TlsBackend`, named `<namespace>/<app>-<i>`) serving a certificate
//!   for the entry's `hosts`, each made the kind of SAN the suite's
//!   generator makes it, signed by the CA of the entry's `issuer`;
//! - the file's Gateways, routes, Services, policies and ConfigMaps read
//!   by the product's parser, one EndpointSlice per backend pod for each
//!   Service whose `selector.app` names the entry (every port of the
//!   Service, as the Service names it), and the listener Secrets as
//!   `conformance_support/secrets.rs` makes them;
//! - each case sent as `conformance.rs` sends an HTTP case (plain HTTP, or
//!   over TLS for `requires_tls`), judged by [`judge`] and retried by the
//!   suite's rule.
//!
//! Upstream expectations switchyard does not meet are listed in
//! [`KNOWN_FAILURES`] (and the README's "Known differences"): they must
//! keep failing, with the recorded reason, or the run fails.
//!
//! A key in a case this runner does not check fails the case: nothing
//! passes unchecked. `status_steps` and `status_expectations` are the
//! status runner's (`kubeconfig/tests/conformance_backend_tls_status.rs`).

use crate::support::{Proxy, client};
use crate::{
    PASSES_IN_A_ROW, Tally, build_request, namespace_object, objects, secrets, tls_client,
};
use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;
use switchyard_proto::model::*;
use switchyard_proxy::router::ListenerKey;
use switchyard_test_support::listener_tls::TestCa;
use switchyard_test_support::tls_backend::TlsBackend;
use tokio::time::Instant;

/// Upstream cases switchyard fails, each in the README's "Known
/// differences" with the reason: `(file, case id, a phrase of the
/// failure)`. A fix makes the run fail until the entry is removed here
/// and from the README.
pub(crate) const KNOWN_FAILURES: &[(&str, u64, &str)] = &[];

const REQUEST_KEYS: &[&str] = &[
    "gateway",
    "scheme",
    "port",
    "host",
    "method",
    "path",
    "headers",
    "tls",
    "requires_tls",
];
const EXPECTED_KEYS: &[&str] = &[
    "status",
    "status_one_of",
    "failure",
    "backend",
    "namespace",
    "backend_request",
    "backend_tls",
];
const CASE_KEYS: &[&str] = &["id", "group", "request", "expected", "note"];

/// Whether `data` is a BackendTLSPolicy file: run here and only here.
pub(crate) fn is_backend_tls_file(data: &Value) -> bool {
    data["backend_tls_policies"].is_array()
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

/// What one attempt got: the status, the proxy's reason header, and the
/// backend's description of the request when it answered.
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) status: u16,
    pub(crate) reason: Option<String>,
    /// The body of a reply other than 200, for messages.
    pub(crate) body: String,
    pub(crate) backend: Value,
}

/// The suite's verdict on one attempt (`CompareRoundTrip` and
/// `WaitForConsistentFailureResponse`, `conformance/utils/http/http.go`):
///
/// - `status`: equal; `status_one_of`: among them; `failure`: any status
///   but 200 and the timeouts (408, 504).
/// - For a 200: the backend saw `backend_request.path` (else the path
///   sent), `backend_request.host` (else the Host sent, when the case has
///   no `backend_request`), GET, from `namespace`; its pod belongs to
///   `backend` when given; the server name of its handshake is
///   `backend_tls.sni`.
pub(crate) fn judge(request: &Value, expected: &Value, seen: &Seen) -> Result<()> {
    only_keys("expected", expected, EXPECTED_KEYS)?;
    let status = seen.status;
    let why = || {
        format!(
            "status {status}; reason {:?}; body {:?}",
            seen.reason.as_deref().unwrap_or("none"),
            seen.body
        )
    };
    let forms = ["status", "status_one_of", "failure"]
        .iter()
        .filter(|k| !expected[**k].is_null())
        .count();
    ensure!(
        forms == 1,
        "expected needs exactly one of status, status_one_of, failure"
    );
    if let Some(want) = expected["status"].as_u64() {
        ensure!(u64::from(status) == want, "{} (want {want})", why());
    } else if let Some(any) = expected["status_one_of"].as_array() {
        let any: Vec<u64> = any.iter().filter_map(Value::as_u64).collect();
        ensure!(
            any.contains(&u64::from(status)),
            "{} (want one of {any:?})",
            why()
        );
    } else {
        ensure!(
            expected["failure"] == json!(true),
            "expected.failure must be true"
        );
        ensure!(status != 200, "{} (want a failure)", why());
        ensure!(
            status != 408 && status != 504,
            "{}: a timeout, which the suite counts as not ready yet",
            why()
        );
    }
    if status != 200 {
        return Ok(());
    }
    let b = &seen.backend;
    let name = b["backend"]
        .as_str()
        .context("backend answer names no pod")?;
    let (namespace, pod) = name
        .split_once('/')
        .with_context(|| format!("pod {name:?} is not <namespace>/<pod>"))?;
    let wanted = &expected["backend_request"];
    let path = wanted["path"].as_str().or(request["path"].as_str());
    ensure!(
        b["path"].as_str() == path,
        "backend saw path {} (want {path:?})",
        b["path"]
    );
    let host = if wanted.is_null() {
        request["host"].as_str()
    } else {
        wanted["host"].as_str()
    };
    if let Some(host) = host {
        ensure!(
            b["host"].as_str() == Some(host),
            "backend saw host {} (want {host})",
            b["host"]
        );
    }
    ensure!(b["method"] == "GET", "backend saw method {}", b["method"]);
    if let Some(ns) = expected["namespace"].as_str() {
        ensure!(namespace == ns, "namespace {namespace} (want {ns})");
    }
    if let Some(service) = expected["backend"].as_str() {
        ensure!(
            pod.starts_with(service),
            "answered by {pod} (want {service})"
        );
    }
    if let Some(sni) = expected["backend_tls"]["sni"].as_str() {
        ensure!(
            b["sni"].as_str() == Some(sni),
            "backend's handshake had SNI {} (want {sni})",
            b["sni"]
        );
    }
    Ok(())
}

/// One file's world.
struct BtlsCtx {
    proxy: Proxy,
    addrs: BTreeMap<(String, u16), SocketAddr>,
    /// The CA of the listener certificates, for TLS clients.
    listener_ca: TestCa,
    _pods: Vec<TlsBackend>,
}

fn ns_name(value: &Value, what: &str) -> Result<(String, String)> {
    let ns = value["namespace"]
        .as_str()
        .with_context(|| format!("{what}.namespace"))?;
    let name = value["name"]
        .as_str()
        .with_context(|| format!("{what}.name"))?;
    Ok((ns.to_owned(), name.to_owned()))
}

/// The `ca_config_maps` entries: their CAs by `namespace/name`, and the
/// ConfigMaps of content `ca` as documents.
pub(crate) fn ca_config_maps(data: &Value) -> Result<(BTreeMap<String, TestCa>, Vec<Value>)> {
    let mut cas = BTreeMap::new();
    let mut documents = Vec::new();
    let manifest: BTreeSet<(String, String)> = objects(data, "config_maps")
        .map(|m| ns_name(&m["metadata"], "config_maps[].metadata"))
        .collect::<Result<_>>()?;
    for entry in objects(data, "ca_config_maps") {
        let (ns, name) = ns_name(entry, "ca_config_maps[]")?;
        match entry["content"].as_str() {
            Some("ca") => {
                let ca = TestCa::new(&format!("{ns}/{name}"));
                documents.push(json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"namespace": ns, "name": name},
                    "data": {"ca.crt": ca.cert_pem},
                }));
                cas.insert(format!("{ns}/{name}"), ca);
            }
            Some("missing") => {}
            Some("manifest") => ensure!(
                manifest.contains(&(ns.clone(), name.clone())),
                "ca_config_maps {ns}/{name}: content manifest, but no such config_maps object"
            ),
            other => bail!("ca_config_maps {ns}/{name}: unknown content {other:?}"),
        }
    }
    Ok((cas, documents))
}

/// One EndpointSlice per pod of `service`, listing every port of the
/// Service by its name at the pod's port.
fn slices(service: &Service, pods: &[SocketAddr]) -> Vec<EndpointSlice> {
    pods.iter()
        .enumerate()
        .map(|(i, addr)| {
            let mut meta = ObjectMeta::named(
                &service.meta.namespace,
                format!("{}-{i}", service.meta.name),
            );
            meta.labels
                .insert(SERVICE_NAME_LABEL.to_owned(), service.meta.name.clone());
            EndpointSlice {
                meta,
                address_type: "IPv4".to_owned(),
                ports: service
                    .ports
                    .iter()
                    .map(|p| EndpointPort {
                        name: p.name.clone(),
                        port: addr.port(),
                    })
                    .collect(),
                endpoints: vec![Endpoint {
                    addresses: vec![addr.ip().to_string()],
                    ready: true,
                    serving: true,
                    terminating: false,
                    zone: None,
                }],
                cluster: None,
            }
        })
        .collect()
}

async fn setup(name: &str, data: &Value) -> Result<BtlsCtx> {
    let mut snapshot = ConfigSnapshot {
        version: 1,
        ..Default::default()
    };
    snapshot
        .gateway_classes
        .push(crate::support::gateway_class());
    let (cas, ca_documents) = ca_config_maps(data)?;
    let mut documents = Vec::new();
    for list in [
        "gateways",
        "routes",
        "services",
        "backend_tls_policies",
        "config_maps",
    ] {
        documents.extend(objects(data, list).cloned());
    }
    documents.extend(ca_documents);
    let mut routes = Vec::new();
    let mut namespaces = BTreeSet::new();
    let mut index = 0;
    for document in documents {
        let resource = switchyard_kubeconfig::parse_object(name, index, document)
            .with_context(|| format!("{name}: object {index}"))?;
        index += 1;
        namespaces.insert(resource.meta().namespace.clone());
        match resource {
            Resource::Gateway(g) => snapshot.gateways.push(g),
            Resource::HttpRoute(r) => routes.push(r),
            Resource::Service(s) => snapshot.services.push(s),
            Resource::BackendTlsPolicy(p) => snapshot.backend_tls_policies.push(p),
            Resource::ConfigMap(m) => snapshot.config_maps.push(m),
            other => bail!("{name}: unexpected {}", other.kind()),
        }
    }

    // The TLS backends, by (namespace, app).
    let mut pods = Vec::new();
    let mut by_app: BTreeMap<(String, String), Vec<SocketAddr>> = BTreeMap::new();
    for entry in objects(data, "tls_backends") {
        let ns = entry["namespace"]
            .as_str()
            .context("tls_backends[].namespace")?;
        let app = entry["app"].as_str().context("tls_backends[].app")?;
        let certificate = &entry["certificate"];
        let issuer = certificate["issuer"]
            .as_str()
            .context("tls_backends[].certificate.issuer")?;
        let ca = cas
            .get(issuer)
            .with_context(|| format!("issuer {issuer} is no ca_config_maps entry of content ca"))?;
        let hosts: Vec<&str> = certificate["hosts"]
            .as_array()
            .context("tls_backends[].certificate.hosts")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let cert = ca.server_for_suite_hosts(&hosts);
        let replicas = entry["replicas"]
            .as_u64()
            .context("tls_backends[].replicas")?;
        let mut addrs = Vec::new();
        for i in 0..replicas {
            let pod = TlsBackend::start(&format!("{ns}/{app}-{i}"), &cert, Duration::ZERO).await;
            addrs.push(pod.addr);
            pods.push(pod);
        }
        by_app.insert((ns.to_owned(), app.to_owned()), addrs);
    }
    for service in objects(data, "services") {
        let (ns, svc) = ns_name(&service["metadata"], "services[].metadata")?;
        let Some(app) = service["spec"]["selector"]["app"].as_str() else {
            continue;
        };
        let Some(addrs) = by_app.get(&(ns.clone(), app.to_owned())) else {
            // Selects pods no file entry starts: no endpoints.
            continue;
        };
        let model = snapshot
            .services
            .iter()
            .find(|s| s.meta.namespace == ns && s.meta.name == svc)
            .with_context(|| format!("Service {ns}/{svc}"))?;
        snapshot.endpoint_slices.extend(slices(model, addrs));
    }

    let listener_ca = TestCa::new("conformance listener CA");
    namespaces.extend(secrets::install(
        &mut snapshot,
        name,
        data,
        &listener_ca,
        &mut index,
    )?);
    for ns in namespaces {
        snapshot.namespaces.push(namespace_object(&ns, None));
    }

    let mut wanted = BTreeSet::new();
    for case in objects(data, "cases") {
        let r = &case["request"];
        let gw = r["gateway"].as_str().context("request.gateway")?;
        let port = u16::try_from(r["port"].as_u64().context("request.port")?)?;
        wanted.insert((gw.to_owned(), port));
    }
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
    proxy.install(snapshot, routes);
    Ok(BtlsCtx {
        proxy,
        addrs,
        listener_ca,
        _pods: pods,
    })
}

/// One attempt at a case: send it, describe what came back.
async fn attempt(ctx: &BtlsCtx, case: &Value) -> Result<Seen> {
    let request = &case["request"];
    only_keys("request", request, REQUEST_KEYS)?;
    let gw = request["gateway"].as_str().context("request.gateway")?;
    let port = u16::try_from(request["port"].as_u64().context("request.port")?)?;
    let addr = *ctx
        .addrs
        .get(&(gw.to_owned(), port))
        .ok_or_else(|| anyhow!("no socket for {gw}:{port}"))?;
    let (req, _, _) = build_request(request, addr, None)?;
    let tls = request["requires_tls"].as_bool().unwrap_or(false);
    ensure!(
        tls == (request["scheme"] == "https"),
        "scheme https goes with requires_tls"
    );
    let reply = if tls {
        let sni = request["tls"]["sni"].as_str().context("request.tls.sni")?;
        tls_client::send(
            &ctx.listener_ca,
            addr,
            sni,
            tls_client::Protocol::Http1,
            req,
        )
        .await?
    } else {
        ensure!(request["tls"].is_null(), "request.tls without requires_tls");
        client::send(addr, req).await?
    };
    Ok(Seen {
        status: reply.status.as_u16(),
        reason: reply
            .headers
            .get("x-switchyard-reason")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: if reply.status == 200 {
            String::new()
        } else {
            String::from_utf8_lossy(&reply.body).into_owned()
        },
        backend: if reply.status == 200 {
            reply.json()?
        } else {
            Value::Null
        },
    })
}

/// The suite's retry rule: `PASSES_IN_A_ROW` passes in a row within
/// `deadline`.
async fn run_case(ctx: &BtlsCtx, case: &Value, deadline: Duration) -> Result<()> {
    only_keys("case", case, CASE_KEYS)?;
    let until = Instant::now() + deadline;
    let mut in_a_row = 0;
    loop {
        let result = match attempt(ctx, case).await {
            Ok(seen) => judge(&case["request"], &case["expected"], &seen),
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

/// Runs one file's cases, each within `deadline`; a case in
/// `known` must fail with its recorded phrase (then it counts as passed,
/// the difference confirmed), and passing it is a failure.
pub(crate) async fn run_file(
    name: &str,
    data: &Value,
    deadline: Duration,
    known: &[(&str, u64, &str)],
) -> Tally {
    let mut tally = Tally::default();
    let ctx = match setup(name, data).await {
        Ok(ctx) => ctx,
        Err(error) => {
            tally.record(format!("{name} setup"), Err(error));
            return tally;
        }
    };
    for case in objects(data, "cases") {
        let id = case["id"].as_u64().unwrap_or(u64::MAX);
        let label = format!(
            "{name} case {id}{}",
            case["group"]
                .as_str()
                .map(|g| format!(" ({g})"))
                .unwrap_or_default()
        );
        let result = run_case(&ctx, case, deadline).await;
        let result = match known.iter().find(|(f, i, _)| *f == name && *i == id) {
            None => result,
            Some((_, _, phrase)) => match result {
                Err(e) if format!("{e:#}").contains(phrase) => Ok(()),
                Err(e) => Err(e.context(format!(
                    "a known difference, but not failing with {phrase:?}"
                ))),
                Ok(()) => Err(anyhow!(
                    "a known difference now passes: remove it from KNOWN_FAILURES and the README"
                )),
            },
        };
        tally.record(label, result);
    }
    ctx.proxy.shutdown().await;
    tally
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str) -> Value {
        let path = switchyard_test_support::gateway_api_cases().join(format!("{name}.yaml"));
        let text = std::fs::read_to_string(path)
            .unwrap()
            .replace("{GATEWAY_CLASS_NAME}", crate::support::CLASS);
        yaml_serde::from_str(&text).unwrap()
    }

    fn seen(status: u16, sni: &str) -> Seen {
        Seen {
            status,
            reason: None,
            body: String::new(),
            backend: json!({
                "backend": "gateway-conformance-infra/tls-backend-0",
                "sni": sni, "method": "GET", "path": "/p", "host": "abc.example.com",
            }),
        }
    }

    #[test]
    fn the_judge_checks_status_forms_and_the_backends_sni() {
        let request = json!({"path": "/p", "host": "abc.example.com"});
        let ok = json!({"status": 200, "namespace": "gateway-conformance-infra",
            "backend_tls": {"sni": "abc.example.com"}});
        judge(&request, &ok, &seen(200, "abc.example.com")).unwrap();
        let err = judge(&request, &ok, &seen(200, "other.example.com")).unwrap_err();
        assert!(
            err.to_string().contains("SNI \"other.example.com\""),
            "{err}"
        );
        let mut wrong_ns = ok.clone();
        wrong_ns["namespace"] = json!("elsewhere");
        assert!(judge(&request, &wrong_ns, &seen(200, "abc.example.com")).is_err());
        let other_path = json!({"path": "/q", "host": "abc.example.com"});
        assert!(judge(&other_path, &ok, &seen(200, "abc.example.com")).is_err());
        let failure = json!({"failure": true});
        judge(&request, &failure, &seen(503, "")).unwrap();
        judge(&request, &failure, &seen(404, "")).unwrap();
        assert!(judge(&request, &failure, &seen(200, "abc.example.com")).is_err());
        assert!(judge(&request, &failure, &seen(504, "")).is_err());
        let five = json!({"status_one_of": [500, 502, 503]});
        judge(&request, &five, &seen(503, "")).unwrap();
        assert!(judge(&request, &five, &seen(404, "")).is_err());
        assert!(
            judge(
                &request,
                &json!({"status": 200, "extra": 1}),
                &seen(200, "")
            )
            .is_err()
        );
        assert!(
            judge(
                &request,
                &json!({"status": 200, "failure": true}),
                &seen(200, "")
            )
            .is_err()
        );
    }

    /// Through the real data plane: `BackendTLSPolicyConflictResolution`
    /// with case 0 expecting the losing policy's SNI, and
    /// `BackendTLSPolicy` with the cert-mismatch case expecting a 200,
    /// fail exactly those cases, each saying why.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wrong_expectation_fails_through_the_proxy() {
        let mut data = file("BackendTLSPolicyConflictResolution");
        assert_eq!(
            data["cases"][0]["expected"]["backend_tls"]["sni"],
            "other.example.com"
        );
        data["cases"][0]["expected"]["backend_tls"]["sni"] = json!("abc.example.com");
        let tally = run_file("flipped", &data, Duration::from_secs(2), &[]).await;
        assert_eq!(
            (tally.passed, tally.failed),
            (3, 1),
            "{:#?}",
            tally.failures
        );
        assert!(
            tally.failures[0].starts_with("flipped case 0 ")
                && tally.failures[0].contains(
                    "backend's handshake had SNI \"other.example.com\" (want abc.example.com)"
                ),
            "{:#?}",
            tally.failures
        );

        let mut data = file("BackendTLSPolicy");
        assert_eq!(data["cases"][3]["expected"], json!({"failure": true}));
        data["cases"][3]["expected"] = json!({"status": 200});
        let tally = run_file("flipped", &data, Duration::from_secs(2), &[]).await;
        assert_eq!(
            (tally.passed, tally.failed),
            (3, 1),
            "{:#?}",
            tally.failures
        );
        assert!(
            tally.failures[0].starts_with("flipped case 3 ")
                && tally.failures[0].contains("status 503"),
            "{:#?}",
            tally.failures
        );
    }

    /// A known difference that stops failing, or fails for another
    /// reason, fails the run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_known_difference_must_keep_its_reason() {
        let data = file("BackendTLSPolicyConflictResolution");
        let wrong = [("flipped", 0, "anything")];
        let tally = run_file("flipped", &data, Duration::from_secs(2), &wrong).await;
        assert_eq!(
            (tally.passed, tally.failed),
            (3, 1),
            "{:#?}",
            tally.failures
        );
        assert!(
            tally.failures[0].contains("a known difference now passes"),
            "{:#?}",
            tally.failures
        );
    }
}
