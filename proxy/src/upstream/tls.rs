//! TLS to backends: the client side of a connection to an endpoint whose
//! Service port a BackendTLSPolicy covers (`gateway_api::backend_tls`
//! decides which policy, with which trust).
//!
//! The certificate must chain to the policy's authorities (its CA
//! ConfigMaps, or the system's store for `wellKnownCACertificates:
//! System`) and be valid for one of the policy's names (its
//! `subjectAltNames`, else its `hostname`); SNI is the `hostname`. ALPN
//! offers `h2` to HTTP/2 and gRPC backends and `http/1.1` to the others.
//!
//! The handshake is part of every new connection, health checks included:
//! a backend is warm only once the proxy completed a verified handshake
//! with it and got an answer through it — the real data path.
//!
//! Cost: one client configuration per endpoint, built when the endpoint is
//! created (the authorities are parsed then, not per connection); the
//! system store is read once per process, on first use.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::{Arc, OnceLock};
use switchyard_proto::model::gateway_api::{Trust, UpstreamTls};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Where the system's trust store is read from when `SSL_CERT_FILE` does
/// not say (Debian's and Ubuntu's bundle; Alpine links the same path).
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// What connects to one endpoint over TLS, built once per endpoint.
#[derive(Clone)]
pub(crate) struct UpstreamConnector {
    connector: TlsConnector,
    server_name: ServerName<'static>,
    /// `namespace/name` of the policy, for errors.
    policy: String,
}

impl std::fmt::Debug for UpstreamConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamConnector")
            .field("server_name", &self.server_name)
            .field("policy", &self.policy)
            .finish()
    }
}

impl UpstreamConnector {
    /// A connector for `tls`, offering `h2` when `http2`, else `http/1.1`.
    /// The error says why the policy cannot be used here (an unreadable
    /// system store, a name that is not a DNS name).
    pub(crate) fn new(tls: &UpstreamTls, http2: bool) -> Result<Self, String> {
        let policy = tls.policy.to_string();
        let mut roots = RootCertStore::empty();
        match &tls.trust {
            Trust::Authorities(certificates) => {
                roots.add_parsable_certificates(certificates.iter().cloned());
            }
            Trust::System => {
                roots.add_parsable_certificates(system_roots()?.iter().cloned());
            }
        }
        if roots.is_empty() {
            return Err(format!("BackendTLSPolicy {policy}: no usable authority"));
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki =
            WebPkiServerVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(|e| format!("BackendTLSPolicy {policy}: {e}"))?;
        let names = tls
            .verify_names
            .iter()
            .map(|n| {
                ServerName::try_from(n.clone())
                    .map_err(|_| format!("BackendTLSPolicy {policy}: {n:?} is not a DNS name"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let verifier = Arc::new(AnyOfNames {
            inner: webpki,
            names,
            uris: tls.verify_uris.clone(),
            roots,
            provider: Arc::clone(&provider),
        });
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("BackendTLSPolicy {policy}: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        config.alpn_protocols = vec![if http2 {
            b"h2".to_vec()
        } else {
            b"http/1.1".to_vec()
        }];
        let server_name = ServerName::try_from(tls.server_name.clone()).map_err(|_| {
            format!(
                "BackendTLSPolicy {policy}: hostname {:?} is not a DNS name",
                tls.server_name
            )
        })?;
        Ok(UpstreamConnector {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
            policy,
        })
    }

    /// Runs the handshake over `tcp`; the error names the policy.
    pub(crate) async fn connect(&self, tcp: TcpStream) -> Result<TlsStream<TcpStream>, String> {
        self.connector
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| {
                format!(
                    "TLS handshake (BackendTLSPolicy {}) failed: {e}",
                    self.policy
                )
            })
    }
}

/// The system's trust store, read once: `SSL_CERT_FILE`, else
/// [`SYSTEM_BUNDLE`].
fn system_roots() -> Result<&'static [CertificateDer<'static>], String> {
    static ROOTS: OnceLock<Result<Vec<CertificateDer<'static>>, String>> = OnceLock::new();
    let loaded = ROOTS.get_or_init(|| {
        let path = std::env::var("SSL_CERT_FILE").unwrap_or_else(|_| SYSTEM_BUNDLE.to_string());
        let pem = std::fs::read(&path)
            .map_err(|e| format!("cannot read the system trust store {path}: {e}"))?;
        CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the system trust store {path} is not PEM: {e}"))
    });
    loaded.as_deref().map_err(Clone::clone)
}

/// webpki's verification, passing when the certificate is valid for any
/// of the policy's DNS names or carries one of its URIs as a URI subject
/// alternative name (whatever name the handshake was started with: SNI is
/// the policy's hostname, which `subjectAltNames` replace for
/// verification).
#[derive(Debug)]
struct AnyOfNames {
    inner: Arc<WebPkiServerVerifier>,
    names: Vec<ServerName<'static>>,
    /// URI SANs, compared exactly; matched after webpki verified the chain
    /// for server authentication (webpki itself matches DNS and IP only).
    uris: Vec<String>,
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl AnyOfNames {
    /// The chain verified to the policy's authorities for server
    /// authentication, then one of the policy's URIs among the
    /// certificate's URI SANs.
    fn verify_uri(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let invalid = |why: String| rustls::Error::General(format!("backend certificate: {why}"));
        let cert =
            webpki::EndEntityCert::try_from(end_entity).map_err(|e| invalid(e.to_string()))?;
        cert.verify_for_usage(
            self.provider.signature_verification_algorithms.all,
            &self.roots.roots,
            intermediates,
            now,
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .map_err(|e| invalid(e.to_string()))?;
        if cert
            .valid_uri_names()
            .any(|uri| self.uris.iter().any(|wanted| wanted == uri))
        {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(invalid(format!(
                "no URI subject alternative name among {:?}",
                self.uris
            )))
        }
    }
}

impl ServerCertVerifier for AnyOfNames {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let mut last = rustls::Error::General("no name to verify".into());
        for name in &self.names {
            match self
                .inner
                .verify_server_cert(end_entity, intermediates, name, ocsp_response, now)
            {
                Ok(verified) => return Ok(verified),
                Err(e) => last = e,
            }
        }
        if !self.uris.is_empty() {
            return self.verify_uri(end_entity, intermediates, now);
        }
        Err(last)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
