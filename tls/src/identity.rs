//! Identities: who a certificate says its holder is.
//!
//! Owns: the URI SAN format (`spiffe://switchyard/<role>/<name>`) and
//! reading it back out of a DER certificate. A certificate must carry
//! exactly one such URI; none, several, or a malformed one is no identity
//! at all (the caller is then refused, never guessed at).

use rustls_pki_types::CertificateDer;

/// The URI prefix of every switchyard identity.
const PREFIX: &str = "spiffe://switchyard/";

/// Who a certificate's holder is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// A coordinator, by Raft node id: may speak Raft.
    Coordinator(u64),
    /// A proxy, by proxy id: may register, heartbeat, watch and report as
    /// that id only.
    Proxy(String),
    /// An operator or controller: may apply, delete and read status.
    Admin(String),
}

/// Why a certificate names no identity.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    /// Not a certificate webpki can read.
    #[error("certificate cannot be parsed: {0}")]
    Unparsable(String),
    /// No `spiffe://switchyard/...` URI SAN.
    #[error("certificate has no switchyard identity (a URI SAN like {PREFIX}proxy/ID)")]
    Missing,
    /// More than one: ambiguous, so refused.
    #[error("certificate has {0} switchyard identities; exactly one is allowed")]
    Several(usize),
    /// A URI that is not `<role>/<name>` with a known role and a valid name.
    #[error(
        "certificate identity {0:?} is malformed (expected {PREFIX}coordinator/N, proxy/ID or admin/NAME)"
    )]
    Malformed(String),
}

impl Identity {
    /// The URI SAN naming this identity.
    pub fn uri(&self) -> String {
        match self {
            Identity::Coordinator(id) => format!("{PREFIX}coordinator/{id}"),
            Identity::Proxy(id) => format!("{PREFIX}proxy/{id}"),
            Identity::Admin(name) => format!("{PREFIX}admin/{name}"),
        }
    }

    /// Parses a URI SAN; `None` when it is not a switchyard URI at all.
    pub fn parse_uri(uri: &str) -> Option<Result<Identity, IdentityError>> {
        let rest = uri.strip_prefix(PREFIX)?;
        let malformed = || IdentityError::Malformed(uri.to_owned());
        let parsed = rest
            .split_once('/')
            .filter(|(_, name)| valid_name(name))
            .and_then(|(role, name)| match role {
                "coordinator" => name.parse().ok().map(Identity::Coordinator),
                "proxy" => Some(Identity::Proxy(name.to_owned())),
                "admin" => Some(Identity::Admin(name.to_owned())),
                _ => None,
            });
        Some(parsed.ok_or_else(malformed))
    }

    /// The identity a DER certificate names. The certificate's chain and
    /// validity are *not* checked here; rustls did that in the handshake.
    pub fn from_certificate(der: &CertificateDer<'_>) -> Result<Identity, IdentityError> {
        let cert = webpki::EndEntityCert::try_from(der)
            .map_err(|e| IdentityError::Unparsable(e.to_string()))?;
        let mut found: Vec<Result<Identity, IdentityError>> = cert
            .valid_uri_names()
            .filter_map(Identity::parse_uri)
            .collect();
        match found.len() {
            0 => Err(IdentityError::Missing),
            1 => found.remove(0),
            n => Err(IdentityError::Several(n)),
        }
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identity::Coordinator(id) => write!(f, "coordinator {id}"),
            Identity::Proxy(id) => write!(f, "proxy {id:?}"),
            Identity::Admin(name) => write!(f, "admin {name:?}"),
        }
    }
}

/// Names are one path segment of letters, digits, `-`, `_` and `.`: what
/// proxy ids and admin names look like, and nothing that could smuggle a
/// second segment or an empty one.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip() {
        for identity in [
            Identity::Coordinator(3),
            Identity::Proxy("zone-a.p1".into()),
            Identity::Admin("ops".into()),
        ] {
            assert_eq!(Identity::parse_uri(&identity.uri()), Some(Ok(identity)));
        }
    }

    #[test]
    fn foreign_and_malformed_uris() {
        assert_eq!(Identity::parse_uri("spiffe://other/proxy/p1"), None);
        for bad in [
            "spiffe://switchyard/proxy/",
            "spiffe://switchyard/proxy/a/b",
            "spiffe://switchyard/coordinator/x",
            "spiffe://switchyard/root/me",
            "spiffe://switchyard/proxy",
        ] {
            assert!(
                matches!(
                    Identity::parse_uri(bad),
                    Some(Err(IdentityError::Malformed(_)))
                ),
                "{bad}"
            );
        }
    }
}
