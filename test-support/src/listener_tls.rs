//! Certificates and clients for tests of HTTPS listeners: a test CA that
//! issues server certificates for DNS names, the `kubernetes.io/tls`
//! Secret carrying one, and a rustls client that trusts the CA (so a test
//! verifies the proxy's certificate as a real client would).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::net::IpAddr;
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
        self.issue(CertificateParams::new(names).expect("DNS names"))
    }

    /// A server certificate for the `hosts` a Gateway API conformance test
    /// gives the suite's certificate generator, each one made the kind of
    /// SAN the suite makes it ([`suite_san`]), signed by this CA.
    pub fn server_for_suite_hosts(&self, hosts: &[&str]) -> ServerCert {
        let mut params = CertificateParams::default();
        params.subject_alt_names = hosts
            .iter()
            .map(|h| match suite_san(h) {
                SuiteSan::Ip(ip) => SanType::IpAddress(ip),
                SuiteSan::Dns(name) => SanType::DnsName(name.try_into().expect("ASCII DNS name")),
                SuiteSan::Uri(uri) => SanType::URI(uri.try_into().expect("ASCII URI")),
            })
            .collect();
        self.issue(params)
    }

    fn issue(&self, mut params: CertificateParams) -> ServerCert {
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

/// The kind of subject alternative name the Gateway API conformance
/// suite's certificate generator makes of a host
/// (`conformance/utils/kubernetes/certificate.go`, `generateRSACert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuiteSan {
    /// The host parses as an IP address.
    Ip(IpAddr),
    /// A DNS name (a DNS-1123 subdomain, optionally behind `*.`).
    Dns(String),
    /// Anything else: the suite files it as a URI, which no client
    /// matches against a host name. The suite's `*` ends up here.
    Uri(String),
}

/// How the suite files `host`: an IP address, else a DNS name when it is
/// a DNS-1123 subdomain once a leading `*.` is cut, else a URI (Go's
/// `url.Parse` accepts every host these tests use).
pub fn suite_san(host: &str) -> SuiteSan {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return SuiteSan::Ip(ip);
    }
    let bare = host.strip_prefix("*.").unwrap_or(host);
    if is_dns1123_subdomain(bare) {
        SuiteSan::Dns(host.to_string())
    } else {
        SuiteSan::Uri(host.to_string())
    }
}

/// Kubernetes' `IsDNS1123Subdomain`: at most 253 characters, dot-separated
/// labels of lowercase letters, digits and `-`, each starting and ending
/// with a letter or digit and at most 63 long.
fn is_dns1123_subdomain(name: &str) -> bool {
    let label = |l: &str| {
        let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| alnum(c) || c == '-')
            && l.starts_with(alnum)
            && l.ends_with(alnum)
    };
    !name.is_empty() && name.len() <= 253 && name.split('.').all(label)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_become_the_sans_the_suite_makes_of_them() {
        assert_eq!(suite_san("*.org"), SuiteSan::Dns("*.org".into()));
        assert_eq!(
            suite_san("second-example.org"),
            SuiteSan::Dns("second-example.org".into())
        );
        assert_eq!(
            suite_san("127.0.0.1"),
            SuiteSan::Ip(IpAddr::from([127, 0, 0, 1]))
        );
        // Not a DNS-1123 subdomain: the suite makes it a URI SAN.
        assert_eq!(suite_san("*"), SuiteSan::Uri("*".into()));
        assert_eq!(suite_san("*.*.org"), SuiteSan::Uri("*.*.org".into()));
        assert_eq!(suite_san("Upper.org"), SuiteSan::Uri("Upper.org".into()));
        assert_eq!(suite_san("-a.org"), SuiteSan::Uri("-a.org".into()));
    }

    #[test]
    fn a_certificate_for_suite_hosts_serves_the_dns_names() {
        let ca = TestCa::new("t");
        let cert = ca.server_for_suite_hosts(&["*", "*.org"]);
        let secret = cert.secret("ns", "c");
        assert!(
            secret
                .certificate_chain
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        assert!(secret.private_key.0.contains("PRIVATE KEY"));
    }
}
