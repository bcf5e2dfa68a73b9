//! Secrets: the certificate chain and private key a Gateway listener's
//! `tls.certificateRefs` name (`kubernetes.io/tls` Secrets, their
//! `tls.crt` and `tls.key`).
//!
//! Only those two entries are kept, whatever else a Secret holds, and the
//! key never appears in `Debug` output (logs, test failures). Whether a
//! Secret can be served — its type, PEM that parses, a key that matches the
//! certificate — is decided in one place, `gateway_api::tls`, for the
//! router and the status writers alike.

use super::meta::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The Secret type whose `tls.crt` and `tls.key` a listener can serve.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

/// A Secret, as far as a Gateway listener reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Secret {
    /// Metadata.
    pub meta: ObjectMeta,
    /// `type` (`kubernetes.io/tls` for a listener certificate).
    pub secret_type: String,
    /// `data["tls.crt"]`: the PEM certificate chain, leaf first (empty when
    /// absent).
    #[serde(default)]
    pub certificate_chain: String,
    /// `data["tls.key"]`: the PEM private key (empty when absent).
    #[serde(default)]
    pub private_key: PrivateKeyPem,
}

/// A PEM private key: kept as the Secret had it, never printed.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct PrivateKeyPem(pub String);

impl fmt::Debug for PrivateKeyPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrivateKeyPem(<{} bytes redacted>)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_private_key_never_shows_in_debug_output() {
        let secret = Secret {
            meta: ObjectMeta::named("ns", "cert"),
            secret_type: TLS_SECRET_TYPE.into(),
            certificate_chain: "-----BEGIN CERTIFICATE-----".into(),
            private_key: PrivateKeyPem("-----BEGIN PRIVATE KEY-----\nsecret".into()),
        };
        let shown = format!("{secret:?}");
        assert!(!shown.contains("secret\""), "{shown}");
        assert!(!shown.contains("BEGIN PRIVATE KEY"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}
