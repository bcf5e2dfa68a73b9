//! Certificate files: reading the CA bundle, certificate chain and key from
//! PEM, and building rustls server and client configurations from them.
//!
//! Owns: every error a user can hit with these files, each naming the file
//! and what is wrong with it.

use crate::COORDINATOR_SERVER_NAME;
use crate::identity::{Identity, IdentityError};
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a process's TLS material lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM bundle of the CA certificates to trust (more than one during a
    /// CA rotation).
    pub ca: PathBuf,
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why TLS material could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} file {path}: {error}")]
    Read {
        /// `CA`, `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A file was read but holds nothing usable.
    #[error("{what} file {path}: {why}")]
    Content {
        /// `CA`, `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The certificate names no usable identity.
    #[error("certificate file {path}: {error}")]
    Identity {
        /// The file.
        path: PathBuf,
        /// Why.
        error: IdentityError,
    },
    /// rustls refused the combination (key does not match certificate...).
    #[error("TLS configuration from {cert} and {key}: {why}")]
    Config {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls' reason.
        why: String,
    },
}

/// The files' contents, parsed.
pub(crate) struct Material {
    pub roots: Arc<RootCertStore>,
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    pub identity: Identity,
}

/// The raw bytes of the three files, for change detection.
pub(crate) type FileBytes = [Vec<u8>; 3];

impl TlsFiles {
    /// Reads the three files.
    pub(crate) fn read(&self) -> Result<FileBytes, TlsError> {
        let read = |what, path: &Path| {
            std::fs::read(path).map_err(|error| TlsError::Read {
                what,
                path: path.to_owned(),
                error,
            })
        };
        Ok([
            read("CA", &self.ca)?,
            read("certificate", &self.cert)?,
            read("key", &self.key)?,
        ])
    }

    /// Parses what [`TlsFiles::read`] returned.
    pub(crate) fn parse(&self, bytes: &FileBytes) -> Result<Material, TlsError> {
        let [ca, cert, key] = bytes;
        let content = |what, path: &Path, why: String| TlsError::Content {
            what,
            path: path.to_owned(),
            why,
        };
        let cas = CertificateDer::pem_slice_iter(ca)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| content("CA", &self.ca, format!("not PEM certificates: {e}")))?;
        if cas.is_empty() {
            return Err(content("CA", &self.ca, "holds no certificate".into()));
        }
        let mut roots = RootCertStore::empty();
        for ca_cert in cas {
            roots
                .add(ca_cert)
                .map_err(|e| content("CA", &self.ca, format!("unusable CA certificate: {e}")))?;
        }
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                content(
                    "certificate",
                    &self.cert,
                    format!("not PEM certificates: {e}"),
                )
            })?;
        let Some(leaf) = chain.first() else {
            return Err(content(
                "certificate",
                &self.cert,
                "holds no certificate".into(),
            ));
        };
        let identity = Identity::from_certificate(leaf).map_err(|error| TlsError::Identity {
            path: self.cert.clone(),
            error,
        })?;
        if matches!(identity, Identity::Coordinator(_)) {
            // Checked here so a coordinator whose certificate clients would
            // refuse learns it at start-up, not from its peers' logs.
            let name = rustls_pki_types::ServerName::try_from(COORDINATOR_SERVER_NAME)
                .expect("a valid DNS name");
            webpki::EndEntityCert::try_from(leaf)
                .and_then(|cert| cert.verify_is_valid_for_subject_name(&name))
                .map_err(|e| {
                    content(
                        "certificate",
                        &self.cert,
                        format!(
                            "a coordinator certificate must carry the DNS name {COORDINATOR_SERVER_NAME}: {e}"
                        ),
                    )
                })?;
        }
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| content("key", &self.key, format!("no PEM private key: {e}")))?;
        Ok(Material {
            roots: Arc::new(roots),
            chain,
            key,
            identity,
        })
    }

    fn config_error(&self, e: impl std::fmt::Display) -> TlsError {
        TlsError::Config {
            cert: self.cert.clone(),
            key: self.key.clone(),
            why: e.to_string(),
        }
    }

    /// The server side: a client certificate chaining to the CA is
    /// required; HTTP/2 is the only protocol offered (gRPC).
    pub(crate) fn server_config(&self, material: &Material) -> Result<ServerConfig, TlsError> {
        let provider = provider();
        let verifier =
            WebPkiClientVerifier::builder_with_provider(material.roots.clone(), provider.clone())
                .build()
                .map_err(|e| self.config_error(e))?;
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| self.config_error(e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(material.chain.clone(), material.key.clone_key())
            .map_err(|e| self.config_error(e))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }

    /// The client side: the server must present a certificate for
    /// [`COORDINATOR_SERVER_NAME`] chaining to the CA; ours goes along.
    pub(crate) fn client_config(&self, material: &Material) -> Result<ClientConfig, TlsError> {
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| self.config_error(e))?
            .with_root_certificates(material.roots.clone())
            .with_client_auth_cert(material.chain.clone(), material.key.clone_key())
            .map_err(|e| self.config_error(e))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }
}

/// `ring`, explicitly: never whichever provider another crate installed
/// as the process default.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
