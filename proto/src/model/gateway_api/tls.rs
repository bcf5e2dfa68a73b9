//! Listener TLS: whether a listener of ours can be served, and with which
//! certificates — the one rule the router (what is served) and the status
//! writers (`ResolvedRefs`, `Accepted`, `Programmed`) both read.
//!
//! - An `HTTP` listener is served in plaintext; nothing to resolve.
//! - An `HTTPS` listener is served only with TLS terminated by the proxy
//!   (`tls.mode: Terminate`), and only when **every** `certificateRef`
//!   resolves: a core `Secret` (else `InvalidCertificateRef`), in the
//!   Gateway's namespace or permitted by a ReferenceGrant there for
//!   Gateways of the listener's namespace (else `RefNotPermitted`), of type
//!   `kubernetes.io/tls`, whose `tls.crt` and `tls.key` parse as PEM into a
//!   chain and a key the TLS stack supports and whose key matches the leaf
//!   certificate (else `InvalidCertificateRef`). All, not some: a listener
//!   whose status says a reference is broken must not quietly serve a
//!   subset of its certificates.
//! - `tls.mode: Passthrough`, and protocols other than HTTP and HTTPS, are
//!   not served (`UnsupportedProtocol`).
//!
//! A listener that is not served is never served in plaintext either: the
//! proxy refuses connections on a port whose listeners all failed here.
//!
//! Cost: each referenced Secret's PEM is parsed and its key loaded once per
//! [`Topology`] (on the first question, for every listener of ours), so a
//! configuration without HTTPS listeners pays nothing.

use super::{GATEWAY_GROUP, ListenerRef, Topology};
use crate::model::gateway::{CertificateRef, Gateway, Listener, ListenerProtocol, TlsMode};
use crate::model::secret::{Secret, TLS_SECRET_TYPE};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// How a listener that can be served carries its traffic.
#[derive(Debug, Clone)]
pub enum ListenerTransport {
    /// Plain HTTP.
    Plaintext,
    /// TLS terminated with these certificates, in `certificateRefs` order.
    Tls(Vec<ServedCertificate>),
}

/// One resolved certificate of a listener.
#[derive(Clone)]
pub struct ServedCertificate {
    /// `namespace/name` of the Secret.
    pub secret: String,
    /// The chain and the loaded signing key.
    pub key: Arc<CertifiedKey>,
}

impl fmt::Debug for ServedCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServedCertificate")
            .field("secret", &self.secret)
            .field("chain_len", &self.key.cert.len())
            .finish()
    }
}

/// Why a listener cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenerTlsProblem {
    /// The protocol or TLS mode is not one switchyard serves:
    /// `Accepted=False`, reason `UnsupportedProtocol`.
    UnsupportedProtocol(String),
    /// A certificateRef does not resolve: `ResolvedRefs=False`, reason
    /// `InvalidCertificateRef`.
    InvalidCertificateRef(String),
    /// A cross-namespace certificateRef without a ReferenceGrant:
    /// `ResolvedRefs=False`, reason `RefNotPermitted`.
    RefNotPermitted(String),
}

impl ListenerTlsProblem {
    /// The Gateway API condition reason.
    pub fn reason(&self) -> &'static str {
        match self {
            ListenerTlsProblem::UnsupportedProtocol(_) => "UnsupportedProtocol",
            ListenerTlsProblem::InvalidCertificateRef(_) => "InvalidCertificateRef",
            ListenerTlsProblem::RefNotPermitted(_) => "RefNotPermitted",
        }
    }

    /// Whether the problem is about the listener's protocol (its
    /// `Accepted` condition) rather than its references (`ResolvedRefs`).
    pub fn is_protocol(&self) -> bool {
        matches!(self, ListenerTlsProblem::UnsupportedProtocol(_))
    }
}

impl fmt::Display for ListenerTlsProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenerTlsProblem::UnsupportedProtocol(why)
            | ListenerTlsProblem::InvalidCertificateRef(why)
            | ListenerTlsProblem::RefNotPermitted(why) => f.write_str(why),
        }
    }
}

/// Whether `listener` of `gateway` can be served, and how.
pub type ListenerTlsResolution = Result<ListenerTransport, ListenerTlsProblem>;

impl Topology<'_> {
    /// How `gateway`'s `listener` is served, or why it is not (see the
    /// module docs for the rule).
    pub fn listener_transport(
        &self,
        gateway: &Gateway,
        listener: &Listener,
    ) -> ListenerTlsResolution {
        if !self.is_ours(gateway) {
            return self.resolve_transport(gateway, listener);
        }
        let memo = self.transports.get_or_init(|| {
            let mut all = BTreeMap::new();
            for g in self.gateways().filter(|g| self.is_ours(g)) {
                for l in &g.listeners {
                    let key = ListenerRef::new(g.meta.object_name(), &l.name);
                    all.insert(key, self.resolve_transport(g, l));
                }
            }
            all
        });
        match memo.get(&ListenerRef::new(
            gateway.meta.object_name(),
            &listener.name,
        )) {
            Some(known) => known.clone(),
            // Not among the Gateway's listeners as stored (a caller's
            // edited copy): worked out afresh.
            None => self.resolve_transport(gateway, listener),
        }
    }

    fn resolve_transport(&self, gateway: &Gateway, listener: &Listener) -> ListenerTlsResolution {
        match &listener.protocol {
            ListenerProtocol::Http => Ok(ListenerTransport::Plaintext),
            ListenerProtocol::Https => self.https_transport(gateway, listener),
            ListenerProtocol::Other(p) => Err(ListenerTlsProblem::UnsupportedProtocol(format!(
                "protocol {p} is not supported; switchyard serves HTTP and HTTPS listeners"
            ))),
        }
    }

    fn https_transport(&self, gateway: &Gateway, listener: &Listener) -> ListenerTlsResolution {
        let Some(tls) = listener.tls.as_ref() else {
            return Err(ListenerTlsProblem::InvalidCertificateRef(
                "an HTTPS listener needs tls.certificateRefs".into(),
            ));
        };
        match &tls.mode {
            TlsMode::Terminate => {}
            TlsMode::Passthrough => {
                return Err(ListenerTlsProblem::UnsupportedProtocol(
                    "tls.mode Passthrough is not supported on HTTPS listeners; switchyard terminates TLS".into(),
                ));
            }
            TlsMode::Other(mode) => {
                return Err(ListenerTlsProblem::UnsupportedProtocol(format!(
                    "tls.mode {mode} is not supported; switchyard terminates TLS"
                )));
            }
        }
        if tls.certificate_refs.is_empty() {
            return Err(ListenerTlsProblem::InvalidCertificateRef(
                "an HTTPS listener needs at least one tls.certificateRefs entry".into(),
            ));
        }
        let certificates = tls
            .certificate_refs
            .iter()
            .map(|r| self.resolve_certificate(&gateway.meta.namespace, r))
            .collect::<Result<_, _>>()?;
        Ok(ListenerTransport::Tls(certificates))
    }

    fn resolve_certificate(
        &self,
        gateway_namespace: &str,
        r: &CertificateRef,
    ) -> Result<ServedCertificate, ListenerTlsProblem> {
        let ns = r.namespace.as_deref().unwrap_or(gateway_namespace);
        let target = format!("{ns}/{}", r.name);
        let invalid = |why: String| {
            ListenerTlsProblem::InvalidCertificateRef(format!("certificateRef {target}: {why}"))
        };
        if !r.group.is_empty() || r.kind != "Secret" {
            let group = if r.group.is_empty() { "core" } else { &r.group };
            return Err(invalid(format!(
                "kind {group}/{} is not supported (only core Secret)",
                r.kind
            )));
        }
        if ns != gateway_namespace && !self.secret_granted(gateway_namespace, ns, &r.name) {
            return Err(ListenerTlsProblem::RefNotPermitted(format!(
                "certificateRef {target}: no ReferenceGrant in {ns} permits Gateways from {gateway_namespace}"
            )));
        }
        let Some(secret) = self.secrets.get(&(ns, r.name.as_str())) else {
            return Err(invalid("Secret not found".into()));
        };
        let key = certified_key(secret).map_err(invalid)?;
        Ok(ServedCertificate {
            secret: target,
            key: Arc::new(key),
        })
    }

    /// Whether a grant in `secret_ns` lets Gateways of `gateway_ns` refer
    /// to the Secret `name`.
    fn secret_granted(&self, gateway_ns: &str, secret_ns: &str, name: &str) -> bool {
        self.grants.iter().any(|g| {
            g.meta.namespace == secret_ns
                && g.permits(GATEWAY_GROUP, "Gateway", gateway_ns, "", "Secret", name)
        })
    }
}

/// The chain and key of a `kubernetes.io/tls` Secret, loaded as the proxy
/// serves them; the error says what is wrong with the Secret.
pub fn certified_key(secret: &Secret) -> Result<CertifiedKey, String> {
    if secret.secret_type != TLS_SECRET_TYPE {
        return Err(format!(
            "Secret type is {:?}, not {TLS_SECRET_TYPE}",
            secret.secret_type
        ));
    }
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(secret.certificate_chain.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("tls.crt is not PEM certificates: {e}"))?;
    if chain.is_empty() {
        return Err("tls.crt holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(secret.private_key.0.as_bytes())
        .map_err(|e| format!("tls.key is not a PEM private key: {e}"))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            "tls.key does not match the certificate in tls.crt".to_string()
        }
        other => format!("tls.crt and tls.key cannot be served: {other}"),
    })
}

#[cfg(test)]
mod tests;
