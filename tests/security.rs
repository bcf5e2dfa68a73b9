//! Mutual TLS and authorization against real coordinator and proxy
//! processes: who is refused by which service, that forged readiness
//! evidence never moves traffic, plaintext against a TLS port, start-up
//! without certificates, `certs init`, and rotation under traffic.
//!
//! The fleets here run exactly as `switchyard demo` does (a throwaway CA,
//! one certificate per process); the acceptance and chaos tests run on the
//! same TLS fleets.

use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use switchyard::client::WaitError;
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard::demo::manifests;
use switchyard::demo::start_serving;
use switchyard_chaos_tests::{Process, ProcessSpec, free_port};
use switchyard_proto::pb::{
    self, admin_service_client::AdminServiceClient, fleet_service_client::FleetServiceClient,
    raft_service_client::RaftServiceClient,
};
use switchyard_tls::certs::{Authority, Validity, file_stem};
use switchyard_tls::{COORDINATOR_SERVER_NAME, Identity, Security, Tls, TlsFiles};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

mod support;

/// Fleets start real processes; on two cores they run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard"))
}

/// Three TLS coordinators and no proxies.
fn coordinators_only() -> anyhow::Result<Fleet> {
    let mut options = FleetOptions::three_zones(binary());
    options.proxies.clear();
    tokio::task::block_in_place(|| Fleet::start(options))
}

/// Writes `identity`'s certificate from `issuer` (valid for `validity`)
/// into `dir`, trusting `ca_pem`; returns the security to connect with.
fn security(
    dir: &Path,
    ca_pem: &str,
    issuer: &Authority,
    identity: &Identity,
    validity: Validity,
) -> anyhow::Result<Security> {
    let stem = format!("{}-{}", file_stem(identity), rand_suffix());
    let (cert, key) = issuer.issue(identity, validity)?.write(dir, &stem)?;
    let ca = dir.join(format!("{stem}-ca.pem"));
    std::fs::write(&ca, ca_pem)?;
    Ok(Security::Tls(Tls::load(TlsFiles { ca, cert, key })?))
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A legitimate certificate from the fleet's CA.
fn fleet_security(fleet: &Fleet, identity: &Identity) -> anyhow::Result<Security> {
    let authority = fleet.authority().expect("a TLS fleet");
    security(
        fleet.dir(),
        authority.cert_pem(),
        authority,
        identity,
        Validity::days(1),
    )
}

fn channel(address: &str, security: &Security) -> Channel {
    switchyard_tls::client::channel(address, security, None, Duration::from_secs(2), |e| {
        e.timeout(Duration::from_secs(5))
    })
    .expect("a valid address")
}

/// A client that trusts the fleet's CA but presents no certificate.
fn channel_without_certificate(address: &str, ca_pem: &str) -> Channel {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    Endpoint::from_shared(format!("http://{address}"))
        .expect("a valid address")
        .timeout(Duration::from_secs(5))
        .connect_with_connector_lazy(NoCertificate(Arc::new(config)))
}

#[derive(Clone)]
struct NoCertificate(Arc<rustls::ClientConfig>);

impl tower_service::Service<http::Uri> for NoCertificate {
    type Response = TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let config = self.0.clone();
        Box::pin(async move {
            let address = format!(
                "{}:{}",
                uri.host().unwrap_or_default(),
                uri.port_u16().unwrap_or(80)
            );
            let tcp = tokio::net::TcpStream::connect(address).await?;
            let name = ServerName::try_from(COORDINATOR_SERVER_NAME).expect("a DNS name");
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await?;
            Ok(TokioIo::new(tls))
        })
    }
}

/// One call to each service, each a request that changes state if it is
/// let through. Returns the three results' status codes (`Ok` when the
/// call succeeded).
async fn call_each_service(channel: Channel, proxy_id: &str) -> [Code; 3] {
    let raft = RaftServiceClient::new(channel.clone())
        .vote(pb::RaftPayload {
            json: b"{}".to_vec(),
        })
        .await;
    let fleet = FleetServiceClient::new(channel.clone())
        .register(pb::RegisterRequest {
            proxy: Some(pb::ProxyIdentity {
                id: proxy_id.into(),
                zone: "zone-x".into(),
                admin_address: "127.0.0.1:1".into(),
            }),
        })
        .await;
    let admin = AdminServiceClient::new(channel)
        .apply(pb::ApplyRequest {
            resources_json: route_json("intruder"),
        })
        .await;
    [code_of(raft), code_of(fleet), code_of(admin)]
}

/// Service `index` of [`call_each_service`] for a caller that should get
/// through, retried while the cluster has no leader for a moment (a
/// fresh cluster may hold a second election): `UNAVAILABLE` then says
/// nothing about authorization.
async fn allowed(channel: Channel, proxy_id: &str, index: usize) -> Code {
    let mut code = Code::Unavailable;
    for _ in 0..50 {
        code = call_each_service(channel.clone(), proxy_id).await[index];
        if code != Code::Unavailable {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    code
}

/// A call's status code, `Ok` when it succeeded.
fn code_of<T>(result: Result<tonic::Response<T>, tonic::Status>) -> Code {
    result.map_or_else(|status| status.code(), |_| Code::Ok)
}

/// The JSON of an apply that stores a route named `name`.
fn route_json(name: &str) -> Vec<u8> {
    let backend = "127.0.0.1:1".parse().expect("an address");
    let yaml = format!(
        "{}{}{}",
        manifests::base(),
        manifests::backend("v1", backend),
        manifests::route("v1", "h0", "30s").replace(
            &format!("name: {}", manifests::ROUTE),
            &format!("name: {name}")
        )
    );
    let resources = switchyard_kubeconfig::parse_documents("test.yaml", &yaml).expect("YAML");
    serde_json::to_vec(&resources).expect("JSON")
}

/// Route and proxy names the cluster has stored.
async fn stored_names(fleet: &Fleet) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let status = fleet.client().fetch_status().await?;
    Ok((
        status.routes.into_iter().map(|r| r.name).collect(),
        status.proxies.into_iter().map(|p| p.id).collect(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_a_valid_certificate_are_refused_by_every_service() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let fleet = coordinators_only()?;
    fleet.wait_leader(Duration::from_secs(20)).await?;
    let address = fleet.coordinator_addresses[0].clone();
    let authority = fleet.authority().expect("a TLS fleet");
    let other = Authority::generate("another CA", Validity::days(1))?;
    let dir = fleet.dir();

    // Each bad client presents, for each service, the identity that service
    // would accept: what stops it is the certificate, not authorization.
    let clients: Vec<(&str, Vec<Channel>)> = vec![
        (
            "no certificate",
            vec![channel_without_certificate(&address, authority.cert_pem()); 3],
        ),
        (
            "another CA",
            ["coordinator", "proxy", "admin"]
                .iter()
                .map(|role| {
                    let identity = identity_for(role);
                    security(
                        dir,
                        authority.cert_pem(),
                        &other,
                        &identity,
                        Validity::days(1),
                    )
                    .map(|s| channel(&address, &s))
                })
                .collect::<anyhow::Result<_>>()?,
        ),
        (
            "an expired certificate",
            ["coordinator", "proxy", "admin"]
                .iter()
                .map(|role| {
                    let identity = identity_for(role);
                    security(
                        dir,
                        authority.cert_pem(),
                        authority,
                        &identity,
                        Validity::expired(),
                    )
                    .map(|s| channel(&address, &s))
                })
                .collect::<anyhow::Result<_>>()?,
        ),
    ];
    for (what, channels) in clients {
        for (service, channel) in ["RaftService", "FleetService", "AdminService"]
            .iter()
            .zip(channels)
        {
            let codes = call_each_service(channel, "intruder").await;
            let index = ["RaftService", "FleetService", "AdminService"]
                .iter()
                .position(|s| s == service)
                .expect("a service");
            let code = codes[index];
            assert!(
                code != Code::Ok && code != Code::PermissionDenied,
                "{service} with {what}: expected the handshake to fail, got {code:?}"
            );
        }
    }
    let (routes, proxies) = stored_names(&fleet).await?;
    assert!(!routes.contains(&"intruder".to_string()), "{routes:?}");
    assert!(!proxies.contains(&"intruder".to_string()), "{proxies:?}");

    // The same calls with the right certificates go through: what was
    // refused above was a valid request.
    let admin = fleet_security(&fleet, &Identity::Admin("ops".into()))?;
    let proxy = fleet_security(&fleet, &Identity::Proxy("intruder".into()))?;
    assert_eq!(allowed(channel(&address, &admin), "x", 2).await, Code::Ok);
    assert_eq!(
        allowed(channel(&address, &proxy), "intruder", 1).await,
        Code::Ok
    );
    let (routes, proxies) = stored_names(&fleet).await?;
    assert!(routes.contains(&"intruder".to_string()), "{routes:?}");
    assert!(proxies.contains(&"intruder".to_string()), "{proxies:?}");
    Ok(())
}

fn identity_for(role: &str) -> Identity {
    match role {
        "coordinator" => Identity::Coordinator(1),
        "proxy" => Identity::Proxy("intruder".into()),
        _ => Identity::Admin("intruder".into()),
    }
}

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
    assert!(
        eventually_logged(|| fleet.logs(), "refused: Register needs proxy \"proxy-y\"").await,
        "refusals are logged"
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_to_the_tls_port_fails_cleanly() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let fleet = coordinators_only()?;
    fleet.wait_leader(Duration::from_secs(20)).await?;
    let address = fleet.coordinator_addresses[0].clone();

    // gRPC without TLS: an error, not a hang.
    let mut plain = switchyard::client::AdminClient::new(
        vec![address.clone()],
        Duration::from_secs(3),
        Security::Insecure,
    );
    assert!(plain.fetch_status().await.is_err());

    // The CLI says so in one line and exits non-zero.
    let out = tokio::task::block_in_place(|| {
        support::cli(&[
            "status",
            "--coordinators",
            &address,
            "--timeout",
            "3s",
            "--insecure",
        ])
    })?;
    assert_ne!(out.code, 0, "{out:?}");
    // One line after the --insecure warning, saying what to do.
    let errors: Vec<&str> = out.stderr.lines().filter(|l| !l.contains("WARN")).collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].contains("requires TLS: pass --ca, --cert and --key"),
        "{}",
        out.stderr
    );

    // Raw HTTP: the server closes the connection.
    let mut tcp = tokio::net::TcpStream::connect(&address).await?;
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await?;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(15), tcp.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server kept a plaintext connection open");
    assert!(
        !String::from_utf8_lossy(&buf).contains("HTTP/1.1 200"),
        "plaintext got an answer"
    );

    // And the port still serves TLS clients.
    fleet.client().fetch_status().await?;
    Ok(())
}

/// Whether `needle` shows up in `logs` within 10 s (child output is read
/// on background threads, so it can trail what the test just caused).
async fn eventually_logged(logs: impl Fn() -> String, needle: &str) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if logs().contains(needle) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs the CLI and returns (exit code, stderr).
fn cli(args: &[&str]) -> anyhow::Result<(i32, String)> {
    let out = support::cli(args)?;
    Ok((out.code, out.stderr))
}

#[test]
fn without_certificates_or_insecure_nothing_starts() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data").to_string_lossy().into_owned();
    let runs: [&[&str]; 4] = [
        &[
            "coordinator",
            "--id",
            "1",
            "--peers",
            "1=127.0.0.1:1",
            "--data-dir",
            &data,
        ],
        &[
            "proxy",
            "--id",
            "p1",
            "--listener",
            "80=127.0.0.1:0",
            "--coordinators",
            "127.0.0.1:1",
        ],
        &["status", "--coordinators", "127.0.0.1:1"],
        &["apply", "-f", "x.yaml", "--coordinators", "127.0.0.1:1"],
    ];
    for args in runs {
        let (code, stderr) = cli(args)?;
        assert_ne!(code, 0, "{args:?} started without certificates");
        assert!(
            stderr.contains("--ca, --cert and --key")
                && stderr.contains("switchyard certs init")
                && stderr.contains("--insecure"),
            "{args:?}: the message must name both ways out: {stderr}"
        );
    }
    assert!(
        !dir.path().join("data").exists(),
        "the coordinator created its store"
    );
    Ok(())
}

#[test]
fn insecure_is_warned_about() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let address = format!("127.0.0.1:{}", free_port());
    let args: Vec<String> = [
        "coordinator",
        "--id",
        "1",
        "--peers",
        &format!("1={address}"),
        "--listen",
        &address,
        "--data-dir",
        &dir.path().join("data").to_string_lossy(),
        "--insecure",
    ]
    .map(String::from)
    .to_vec();
    let mut process = Process::start(ProcessSpec::new("insecure", binary(), args))?;
    // stderr is read on its own thread: give it a moment to catch up.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !process
        .log_text()
        .contains("--insecure: gRPC runs without TLS")
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = process.log_text();
    process.kill();
    assert!(
        log.contains("--insecure: gRPC runs without TLS"),
        "no warning at start-up: {log}"
    );
    Ok(())
}

#[test]
fn certs_init_and_issue_make_certificates_a_cluster_runs_on() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let certs = dir.path().join("certs");
    let certs_dir = certs.to_string_lossy().into_owned();
    let (code, stderr) = cli(&[
        "certs",
        "init",
        "--dir",
        &certs_dir,
        "--coordinators",
        "1",
        "--proxies",
        "p1",
        "--admins",
        "ops",
    ])?;
    assert_eq!(code, 0, "{stderr}");
    for file in [
        "ca.pem",
        "ca-key.pem",
        "coordinator-1.pem",
        "coordinator-1-key.pem",
        "proxy-p1.pem",
        "proxy-p1-key.pem",
        "admin-ops.pem",
        "admin-ops-key.pem",
    ] {
        assert!(certs.join(file).exists(), "{file} missing");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(certs.join("ca-key.pem"))?
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "ca-key.pem is readable by others");
    }
    let (code, stderr) = cli(&["certs", "init", "--dir", &certs_dir])?;
    assert_ne!(code, 0);
    assert!(stderr.contains("already exists"), "{stderr}");

    let file = |name: &str| certs.join(name).to_string_lossy().into_owned();
    let tls = |who: &str| -> Vec<String> {
        vec![
            "--ca".into(),
            file("ca.pem"),
            "--cert".into(),
            file(&format!("{who}.pem")),
            "--key".into(),
            file(&format!("{who}-key.pem")),
        ]
    };
    let address = format!("127.0.0.1:{}", free_port());
    let mut args: Vec<String> = [
        "coordinator",
        "--id",
        "1",
        "--peers",
        &format!("1={address}"),
        "--listen",
        &address,
        "--data-dir",
        &dir.path().join("data").to_string_lossy(),
    ]
    .map(String::from)
    .to_vec();
    args.extend(tls("coordinator-1"));
    let mut coordinator = Process::start(ProcessSpec::new("coordinator-1", binary(), args))?;

    let status = |who: &str| {
        let mut args = vec![
            "status".to_string(),
            "--coordinators".into(),
            address.clone(),
            "--timeout".into(),
            "10s".into(),
        ];
        args.extend(tls(who));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&args)
    };
    let (code, stderr) = status("admin-ops")?;
    assert_eq!(code, 0, "{stderr}");

    // More certificates later, from the same CA: a new admin gets in.
    let (code, stderr) = cli(&["certs", "issue", "--dir", &certs_dir, "--admins", "ops2"])?;
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr) = status("admin-ops2")?;
    assert_eq!(code, 0, "{stderr}");
    let empty = dir.path().join("empty").to_string_lossy().into_owned();
    let (code, stderr) = cli(&["certs", "issue", "--dir", &empty, "--admins", "x"])?;
    assert_ne!(code, 0);
    assert!(stderr.contains("cannot use the CA in"), "{stderr}");
    let (code, stderr) = status("proxy-p1")?;
    assert_ne!(code, 0);
    assert!(stderr.contains("needs an admin certificate"), "{stderr}");

    // A proxy whose certificate names another id stops at once.
    let mut args = vec![
        "proxy",
        "--id",
        "p2",
        "--listener",
        "80=127.0.0.1:0",
        "--coordinators",
        &address,
    ];
    let proxy_tls = tls("proxy-p1");
    args.extend(proxy_tls.iter().map(String::as_str));
    let (code, stderr) = cli(&args)?;
    assert_ne!(code, 0);
    assert!(stderr.contains("names proxy \"p1\""), "{stderr}");
    coordinator.kill();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_certificates_are_used_by_new_connections_with_zero_failed_requests()
-> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let (mut fleet, prober) = start_serving(FleetOptions::three_zones(binary()), &[]).await?;
    let admin = fleet_security(&fleet, &Identity::Admin("ops".into()))?;
    let before: Vec<Vec<u8>> = presented(&fleet, &admin).await?;

    let issued = fleet.rotate_certificates()?;
    // Each coordinator picks the new files up (the fleet polls every
    // 500 ms) and presents them to the next connection.
    for (i, address) in fleet.coordinator_addresses.clone().iter().enumerate() {
        let stem = file_stem(&Identity::Coordinator(i as u64 + 1));
        let expected = CertificateDer::from_pem_slice(issued[&stem].as_bytes())?.to_vec();
        assert_ne!(before[i], expected);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if presented_by(address, &admin).await? == expected {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "coordinator {} still presents its old certificate",
                i + 1
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert!(eventually_logged(|| fleet.logs(), "TLS files changed on disk").await);

    // The fleet keeps working on the new certificates: a leader change
    // makes every proxy and coordinator open new connections, and a
    // cutover completes through them.
    let leader = fleet.wait_leader(Duration::from_secs(10)).await?;
    fleet.coordinators[leader].kill();
    let backend = tokio::task::block_in_place(|| fleet.start_backend("v2", &[]))?;
    let yaml = format!(
        "{}{}",
        manifests::backend("v2", backend),
        manifests::route("v2", "h1", "30s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;
    fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(60), |_| {})
        .await?;
    let seen = prober
        .observe_after(tokio::time::Instant::now(), Duration::from_secs(10))
        .await
        .expect("responses keep coming");
    assert_eq!(seen.backend, "v2");
    tokio::task::block_in_place(|| fleet.coordinators[leader].restart())?;
    let report = prober.stop().await;
    assert_eq!(report.failed, 0, "failed requests: {:?}", report.failures);
    assert!(report.sent > 100, "the prober barely ran: {}", report.sent);
    Ok(())
}

/// The certificate each coordinator presents to a new connection.
async fn presented(fleet: &Fleet, client: &Security) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for address in &fleet.coordinator_addresses {
        out.push(presented_by(address, client).await?);
    }
    Ok(out)
}

async fn presented_by(address: &str, client: &Security) -> anyhow::Result<Vec<u8>> {
    use tower_service::Service;
    let mut connector =
        switchyard_tls::client::Connector::new(client.clone(), None, Duration::from_secs(5));
    let conn = connector
        .call(format!("http://{address}").parse()?)
        .await?
        .into_inner();
    let switchyard_tls::client::ClientConn::Tls(stream) = conn else {
        anyhow::bail!("not TLS");
    };
    let certificate = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|c| c.to_vec())
        .ok_or_else(|| anyhow::anyhow!("no server certificate"))?;
    Ok(certificate)
}
