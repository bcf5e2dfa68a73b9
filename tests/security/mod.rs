//! What the security tests share: TLS fleets started as `switchyard demo`
//! starts them (a throwaway CA, one certificate per process), clients
//! with certificates of any issuer, identity and validity (or none at
//! all), and one state-changing call to each gRPC service.

#![allow(dead_code)] // each test file uses a different part

use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard::demo::manifests;
use switchyard_proto::pb::{
    self, admin_service_client::AdminServiceClient, fleet_service_client::FleetServiceClient,
    raft_service_client::RaftServiceClient,
};
use switchyard_test_support::eventually;
use switchyard_test_support::eventually::holds;
use switchyard_tls::certs::{Authority, Validity, file_stem};
use switchyard_tls::{COORDINATOR_SERVER_NAME, Identity, Security, Tls, TlsFiles};
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

/// Fleets start real processes; on two cores they run one at a time.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard"))
}

/// Three TLS coordinators and no proxies.
pub fn coordinators_only() -> anyhow::Result<Fleet> {
    let mut options = FleetOptions::three_zones(binary());
    options.proxies.clear();
    tokio::task::block_in_place(|| Fleet::start(options))
}

/// Writes `identity`'s certificate from `issuer` (valid for `validity`)
/// into `dir`, trusting `ca_pem`; returns the security to connect with.
pub fn security(
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

pub fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A legitimate certificate from the fleet's CA.
pub fn fleet_security(fleet: &Fleet, identity: &Identity) -> anyhow::Result<Security> {
    let authority = fleet.authority().expect("a TLS fleet");
    security(
        fleet.dir(),
        authority.cert_pem(),
        authority,
        identity,
        Validity::days(1),
    )
}

pub fn channel(address: &str, security: &Security) -> Channel {
    switchyard_tls::client::channel(address, security, None, Duration::from_secs(2), |e| {
        e.timeout(Duration::from_secs(5))
    })
    .expect("a valid address")
}

/// A client that trusts the fleet's CA but presents no certificate.
pub fn channel_without_certificate(address: &str, ca_pem: &str) -> Channel {
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
pub async fn call_each_service(channel: Channel, proxy_id: &str) -> [Code; 3] {
    let raft = RaftServiceClient::new(channel.clone())
        .vote(pb::RaftPayload {
            json: b"{}".to_vec(),
        })
        .await;
    let fleet = FleetServiceClient::new(channel.clone())
        .register(pb::RegisterRequest::for_proxy(
            proxy_id,
            "zone-x",
            "127.0.0.1:1",
        ))
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
pub async fn allowed(channel: Channel, proxy_id: &str, index: usize) -> Code {
    eventually(
        "an answer other than UNAVAILABLE",
        Duration::from_secs(10),
        async || {
            let code = call_each_service(channel.clone(), proxy_id).await[index];
            holds(code != Code::Unavailable, || code).map(|()| code)
        },
    )
    .await
    .unwrap_or(Code::Unavailable)
}

/// A call's status code, `Ok` when it succeeded.
pub fn code_of<T>(result: Result<tonic::Response<T>, tonic::Status>) -> Code {
    result.map_or_else(|status| status.code(), |_| Code::Ok)
}

/// The JSON of an apply that stores a route named `name`.
pub fn route_json(name: &str) -> Vec<u8> {
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
pub async fn stored_names(fleet: &Fleet) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let status = fleet.client().fetch_status().await?;
    Ok((
        status.routes.into_iter().map(|r| r.name).collect(),
        status.proxies.into_iter().map(|p| p.id).collect(),
    ))
}

/// The identity a bad client claims for `role`'s service.
pub fn identity_for(role: &str) -> Identity {
    match role {
        "coordinator" => Identity::Coordinator(1),
        "proxy" => Identity::Proxy("intruder".into()),
        _ => Identity::Admin("intruder".into()),
    }
}
