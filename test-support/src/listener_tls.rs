//! Certificates and clients for tests of HTTPS listeners: a test CA that
//! issues server certificates for DNS names, the `kubernetes.io/tls`
//! Secret carrying one, and a rustls client that trusts the CA (so a test
//! verifies the proxy's certificate as a real client would).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::sync::Arc;
use switchyard_proto::model::{ObjectMeta, PrivateKeyPem, Secret, TLS_SECRET_TYPE};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A certificate authority for one test.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub cert_pem: String,
}

/// A server certificate chain and its key, PEM.
#[derive(Debug, Clone)]
pub struct ServerCert {
    /// Leaf first, then the CA.
    pub chain_pem: String,
    /// The private key.
    pub key_pem: String,
}

impl TestCa {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A server certificate for `names` (DNS SANs), signed by this CA.
    pub fn server(&self, names: &[&str]) -> ServerCert {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("DNS names");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().expect("key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("server certificate");
        ServerCert {
            chain_pem: format!("{}{}", cert.pem(), self.cert_pem),
            key_pem: key.serialize_pem(),
        }
    }

    /// A client that trusts only this CA, offering `alpn` protocols.
    pub fn client(&self, alpn: &[&[u8]]) -> TlsConnector {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.cert_pem.as_bytes()) {
            roots.add(cert.expect("CA PEM")).expect("CA certificate");
        }
        let mut config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }
}

impl ServerCert {
    /// The `kubernetes.io/tls` Secret `namespace/name` holding it.
    pub fn secret(&self, namespace: &str, name: &str) -> Secret {
        Secret {
            meta: ObjectMeta::named(namespace, name),
            secret_type: TLS_SECRET_TYPE.into(),
            certificate_chain: self.chain_pem.clone(),
            private_key: PrivateKeyPem(self.key_pem.clone()),
        }
    }
}

/// Connects to `addr` and completes a handshake for `sni`, verifying the
/// server's certificate with `connector`'s roots.
pub async fn connect(
    connector: &TlsConnector,
    addr: std::net::SocketAddr,
    sni: &str,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(sni.to_string())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    connector.connect(name, tcp).await
}
