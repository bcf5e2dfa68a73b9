//! Certificate generation: a CA and the certificates of a local cluster,
//! for `switchyard certs init`, the demo's throwaway CA and the tests.
//!
//! Owns: what a switchyard certificate contains. Every leaf carries its
//! [`Identity`] as a URI SAN; coordinator certificates also carry the DNS
//! name [`COORDINATOR_SERVER_NAME`] and may serve as well as connect; proxy
//! and admin certificates may only connect. Keys are ECDSA P-256.

use crate::COORDINATOR_SERVER_NAME;
use crate::identity::Identity;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::path::{Path, PathBuf};
use time::{Duration, OffsetDateTime};

/// Why certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused (a name that is not a valid SAN...).
    #[error("certificate generation failed: {0}")]
    Generate(rcgen::Error),
    /// Writing a file failed.
    #[error("cannot write {path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A CA file or key could not be read or used.
    #[error("cannot use the CA in {path}: {why}")]
    Ca {
        /// The CA certificate or key file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// `init` would overwrite an existing CA.
    #[error(
        "{0} already exists; pass --force to replace the whole set (every certificate signed by the old CA stops being trusted)"
    )]
    Exists(PathBuf),
}

// By hand rather than `#[from]`, so the cause is printed once (the message
// above has it) rather than again as the `source`.
impl From<rcgen::Error> for CertError {
    fn from(e: rcgen::Error) -> Self {
        CertError::Generate(e)
    }
}

/// When a certificate is valid.
#[derive(Clone, Copy, Debug)]
pub struct Validity {
    /// Start.
    pub not_before: OffsetDateTime,
    /// End.
    pub not_after: OffsetDateTime,
}

impl Validity {
    /// From an hour ago (clock skew between machines) for `days` days.
    pub fn days(days: i64) -> Validity {
        let now = OffsetDateTime::now_utc();
        Validity {
            not_before: now - Duration::hours(1),
            not_after: now + Duration::days(days),
        }
    }

    /// Ended yesterday (for tests of refusal).
    pub fn expired() -> Validity {
        let now = OffsetDateTime::now_utc();
        Validity {
            not_before: now - Duration::days(2),
            not_after: now - Duration::days(1),
        }
    }
}

/// A certificate and its key, PEM.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl Issued {
    /// Writes `<stem>.pem` and `<stem>-key.pem` into `dir` (the key
    /// readable by its owner only); returns the two paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf), CertError> {
        let cert = dir.join(format!("{stem}.pem"));
        let key = dir.join(format!("{stem}-key.pem"));
        write_file(&cert, &self.cert_pem, false)?;
        write_file(&key, &self.key_pem, true)?;
        Ok((cert, key))
    }
}

/// A certificate authority that can issue switchyard certificates.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl Authority {
    /// A new self-signed CA named `name`, valid for `validity`.
    pub fn generate(name: &str, validity: Validity) -> Result<Authority, CertError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        dn.push(DnType::OrganizationName, "switchyard");
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.not_before = validity.not_before;
        params.not_after = validity.not_after;
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Authority {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA `init_dir` wrote into `dir` (`ca.pem`, `ca-key.pem`), to
    /// issue more certificates from.
    pub fn load(dir: &Path) -> Result<Authority, CertError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|e| CertError::Ca {
                path: path.clone(),
                why: e.to_string(),
            })
        };
        let (cert_pem, key_pem) = (read("ca.pem")?, read("ca-key.pem")?);
        let key = KeyPair::from_pem(&key_pem).map_err(|e| CertError::Ca {
            path: dir.join("ca-key.pem"),
            why: format!("not a usable private key: {e}"),
        })?;
        let issuer = Issuer::from_ca_cert_pem(&cert_pem, key).map_err(|e| CertError::Ca {
            path: dir.join("ca.pem"),
            why: format!("not a usable CA certificate: {e}"),
        })?;
        Ok(Authority { issuer, cert_pem })
    }

    /// The CA certificate, PEM (what every process trusts).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key, PEM (keep it off the cluster's machines).
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// Issues a certificate naming `identity`.
    pub fn issue(&self, identity: &Identity, validity: Validity) -> Result<Issued, CertError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, identity.to_string());
        dn.push(DnType::OrganizationName, "switchyard");
        params.distinguished_name = dn;
        params.subject_alt_names = vec![SanType::URI(identity.uri().try_into()?)];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if matches!(identity, Identity::Coordinator(_)) {
            params
                .subject_alt_names
                .push(SanType::DnsName(COORDINATOR_SERVER_NAME.try_into()?));
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        params.use_authority_key_identifier_extension = true;
        params.not_before = validity.not_before;
        params.not_after = validity.not_after;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The file stem `init` and the demo use for `identity`.
pub fn file_stem(identity: &Identity) -> String {
    match identity {
        Identity::Coordinator(id) => format!("coordinator-{id}"),
        Identity::Proxy(id) => format!("proxy-{id}"),
        Identity::Admin(name) => format!("admin-{name}"),
    }
}

/// Creates `dir` with a new CA (`ca.pem`, `ca-key.pem`) and a certificate
/// and key per identity (`<file_stem>.pem`, `<file_stem>-key.pem`).
/// Refuses to replace an existing CA unless `force`. Returns every file
/// written.
pub fn init_dir(
    dir: &Path,
    identities: &[Identity],
    validity: Validity,
    force: bool,
) -> Result<Vec<PathBuf>, CertError> {
    std::fs::create_dir_all(dir).map_err(|error| CertError::Write {
        path: dir.to_owned(),
        error,
    })?;
    let ca_path = dir.join("ca.pem");
    if ca_path.exists() && !force {
        return Err(CertError::Exists(ca_path));
    }
    let authority = Authority::generate("switchyard CA", validity)?;
    let mut written = Vec::new();
    let ca = Issued {
        cert_pem: authority.cert_pem().to_owned(),
        key_pem: authority.key_pem(),
    };
    let (cert, key) = ca.write(dir, "ca")?;
    written.extend([cert, key]);
    for identity in identities {
        let (cert, key) = authority
            .issue(identity, validity)?
            .write(dir, &file_stem(identity))?;
        written.extend([cert, key]);
    }
    Ok(written)
}

fn write_file(path: &Path, contents: &str, private: bool) -> Result<(), CertError> {
    let error = |error| CertError::Write {
        path: path.to_owned(),
        error,
    };
    // Written beside and renamed over, so a process re-reading the files
    // never sees half of one.
    let partial = path.with_extension("pem.partial");
    std::fs::write(&partial, contents).map_err(error)?;
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o600))
            .map_err(error)?;
    }
    #[cfg(not(unix))]
    let _ = private;
    std::fs::rename(&partial, path).map_err(error)
}
