//! TLS to backends: which BackendTLSPolicy applies to a Service port, and
//! whether it can be used — the one rule the proxy (how it connects) and
//! the status writers (the policy's `Accepted` and `ResolvedRefs`) read.
//!
//! - A policy targets Services of its own namespace, all their ports or one
//!   port by `sectionName` (the port's name). For one port, a policy naming
//!   the port wins over one naming the whole Service.
//! - Policies naming the same target conflict: the oldest wins (creation
//!   time, then `namespace/name`), the others are `Accepted=False`,
//!   reason `Conflicted`, and do not apply there.
//! - The policy is usable when its trust resolves: every
//!   `caCertificateRefs` entry is a core `ConfigMap` (else `ResolvedRefs=
//!   False/InvalidKind`) of the policy's namespace with PEM certificates in
//!   `ca.crt` that can serve as trust anchors (else `InvalidCACertificateRef`);
//!   when none of them resolves the policy is also `Accepted=False/
//!   NoValidCACertificate`. `wellKnownCACertificates: System` trusts the
//!   proxy's system store. `subjectAltNames` (Hostname or URI) replace
//!   `hostname` for verification; `hostname` stays the SNI.
//! - A port no policy covers is plaintext, unless its `appProtocol` says
//!   TLS (`https`, `kubernetes.io/wss`): refused, as below.
//! - A port a policy applies to is **never spoken to in plaintext**: when
//!   the winning policy cannot be used, the port's endpoints are refused
//!   ([`BackendTransport::Refused`]), so they never pass a health check,
//!   never become ready and never take a cutover.
//!
//! Cost: each policy's certificates are parsed once per [`Topology`], on
//! the first question; a configuration without policies pays nothing.

use super::Topology;
use crate::model::backend::{Service, ServicePort};
use crate::model::backend_tls::{
    BackendTlsPolicy, CA_CERTIFICATE_KEY, SubjectAltName, WELL_KNOWN_SYSTEM,
};
use crate::model::meta::ObjectName;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How the proxy speaks to one Service port's endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum BackendTransport {
    /// No policy applies: plain TCP.
    #[default]
    Plaintext,
    /// TLS, verified as the policy says.
    Tls(Arc<UpstreamTls>),
    /// A policy applies but cannot be used (the text says why): the
    /// endpoints are not connected to at all.
    Refused(String),
}

impl BackendTransport {
    /// The transport of a port no policy covers: plaintext, unless its
    /// `appProtocol` says the endpoints expect TLS (`https`,
    /// `kubernetes.io/wss`): then they are refused — which authority to
    /// trust and which name to verify is a BackendTLSPolicy's to say, and
    /// plaintext to a TLS port only fails later and less clearly.
    pub fn without_policy(port: &ServicePort) -> BackendTransport {
        match port.app_protocol.as_deref() {
            Some(p) if TLS_APP_PROTOCOLS.iter().any(|t| p.eq_ignore_ascii_case(t)) => {
                BackendTransport::Refused(format!(
                    "port {} says appProtocol {p}: TLS needs a BackendTLSPolicy naming the backend's CA and hostname",
                    port.port
                ))
            }
            _ => BackendTransport::Plaintext,
        }
    }
}

/// `appProtocol` values that mean "the endpoints speak TLS".
const TLS_APP_PROTOCOLS: [&str; 2] = ["https", "kubernetes.io/wss"];

/// What a TLS connection to a backend needs from its policy.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamTls {
    /// The policy, `namespace/name` (for logs and errors).
    pub policy: ObjectName,
    /// `validation.hostname`: the SNI sent.
    pub server_name: String,
    /// DNS names the certificate may be valid for (`subjectAltNames`
    /// hostnames, else `hostname`); one of these or of `verify_uris`
    /// must match.
    pub verify_names: Vec<String>,
    /// URIs the certificate's URI subject alternative names may match
    /// (`subjectAltNames` of type URI, compared exactly).
    pub verify_uris: Vec<String>,
    /// Whom the certificate must chain to.
    pub trust: Trust,
}

/// The authorities a backend's certificate must chain to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Trust {
    /// The certificates of the policy's CA ConfigMaps (DER), in order.
    Authorities(Vec<CertificateDer<'static>>),
    /// The proxy system's trust store (`wellKnownCACertificates: System`).
    System,
}

/// Why a policy is not (wholly) in force: each maps to a condition and a
/// reason as the Gateway API names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendTlsProblem {
    /// `Accepted=False`, reason `Conflicted`: an older policy names the
    /// same target.
    Conflicted(String),
    /// `Accepted=False`, reason `Invalid`: a value switchyard does not
    /// support.
    Invalid(String),
    /// `ResolvedRefs=False`, reason `InvalidKind` (and `Accepted=False`,
    /// `NoValidCACertificate`).
    InvalidKind(String),
    /// `ResolvedRefs=False`, reason `InvalidCACertificateRef` (and
    /// `Accepted=False`, `NoValidCACertificate`).
    InvalidCaCertificateRef(String),
}

impl BackendTlsProblem {
    /// The text an operator reads.
    pub fn message(&self) -> &str {
        match self {
            BackendTlsProblem::Conflicted(m)
            | BackendTlsProblem::Invalid(m)
            | BackendTlsProblem::InvalidKind(m)
            | BackendTlsProblem::InvalidCaCertificateRef(m) => m,
        }
    }
}

/// A policy's conditions: `Err` holds the reason and message of a `False`
/// condition, `Ok` means `True` with the positive reason (`Accepted`,
/// `ResolvedRefs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendTlsPolicyConditions {
    /// `Accepted`.
    pub accepted: Result<(), (&'static str, String)>,
    /// `ResolvedRefs`.
    pub resolved_refs: Result<(), (&'static str, String)>,
}

/// One policy worked out: its trust (or why it has none) and where it
/// lost to an older policy.
#[derive(Debug, Clone)]
struct Worked {
    usable: Result<Arc<UpstreamTls>, BackendTlsProblem>,
    conflicted_on: Option<String>,
}

/// Every policy of a topology worked out, and the winner per target.
#[derive(Debug, Default)]
pub(super) struct BackendTlsIndex {
    by_policy: BTreeMap<ObjectName, Worked>,
    /// `(namespace, service, sectionName)` → the winning policy.
    winners: BTreeMap<(String, String, Option<String>), ObjectName>,
}

impl Topology<'_> {
    /// How the proxy speaks to `service`'s `port` (see the module docs).
    pub fn backend_transport(&self, service: &Service, port: &ServicePort) -> BackendTransport {
        let index = self.backend_tls_index();
        if index.winners.is_empty() {
            return BackendTransport::without_policy(port);
        }
        let ns = service.meta.namespace.clone();
        let name = service.meta.name.clone();
        let by_port = port
            .name
            .clone()
            .and_then(|p| index.winners.get(&(ns.clone(), name.clone(), Some(p))));
        let Some(policy) = by_port.or_else(|| index.winners.get(&(ns, name, None))) else {
            return BackendTransport::without_policy(port);
        };
        match &index.by_policy[policy].usable {
            Ok(tls) => BackendTransport::Tls(Arc::clone(tls)),
            Err(problem) => BackendTransport::Refused(format!(
                "BackendTLSPolicy {policy} cannot be used: {}",
                problem.message()
            )),
        }
    }

    /// The `Accepted` and `ResolvedRefs` conditions of the policy
    /// `policy`, or `None` when no such policy is known.
    pub fn backend_tls_policy_conditions(
        &self,
        policy: &ObjectName,
    ) -> Option<BackendTlsPolicyConditions> {
        let worked = self.backend_tls_index().by_policy.get(policy)?;
        let mut conditions = BackendTlsPolicyConditions {
            accepted: Ok(()),
            resolved_refs: Ok(()),
        };
        match &worked.usable {
            Ok(_) => {}
            Err(BackendTlsProblem::Invalid(m)) => conditions.accepted = Err(("Invalid", m.clone())),
            Err(BackendTlsProblem::Conflicted(m)) => {
                conditions.accepted = Err(("Conflicted", m.clone()));
            }
            Err(BackendTlsProblem::InvalidKind(m)) => {
                conditions.resolved_refs = Err(("InvalidKind", m.clone()));
                conditions.accepted = Err(("NoValidCACertificate", m.clone()));
            }
            Err(BackendTlsProblem::InvalidCaCertificateRef(m)) => {
                conditions.resolved_refs = Err(("InvalidCACertificateRef", m.clone()));
                conditions.accepted = Err(("NoValidCACertificate", m.clone()));
            }
        }
        if let Some(m) = &worked.conflicted_on
            && conditions.accepted.is_ok()
        {
            conditions.accepted = Err(("Conflicted", m.clone()));
        }
        Some(conditions)
    }

    fn backend_tls_index(&self) -> &BackendTlsIndex {
        self.backend_tls.get_or_init(|| self.index_backend_tls())
    }

    fn index_backend_tls(&self) -> BackendTlsIndex {
        let mut index = BackendTlsIndex::default();
        // Oldest first, then by name: the first to claim a target keeps it.
        let mut policies = self.backend_tls_policies.clone();
        policies.sort_by(|a, b| {
            let age = |p: &BackendTlsPolicy| p.meta.creation_timestamp_ms.unwrap_or(i64::MAX);
            age(a)
                .cmp(&age(b))
                .then_with(|| a.meta.object_name().cmp(&b.meta.object_name()))
        });
        for policy in policies {
            let name = policy.meta.object_name();
            let mut conflicted_on = None;
            for target in &policy.target_refs {
                if !target.is_service() {
                    continue;
                }
                let key = (
                    policy.meta.namespace.clone(),
                    target.name.clone(),
                    target.section_name.clone(),
                );
                match index.winners.get(&key) {
                    Some(older) if *older != name => {
                        conflicted_on.get_or_insert_with(|| {
                            format!(
                                "BackendTLSPolicy {older} already targets Service {}{}",
                                target.name,
                                target
                                    .section_name
                                    .as_ref()
                                    .map(|s| format!(" port {s}"))
                                    .unwrap_or_default()
                            )
                        });
                    }
                    _ => {
                        index.winners.insert(key, name.clone());
                    }
                }
            }
            let usable = self.policy_trust(policy).map(Arc::new);
            index.by_policy.insert(
                name,
                Worked {
                    usable,
                    conflicted_on,
                },
            );
        }
        index
    }

    fn policy_trust(&self, policy: &BackendTlsPolicy) -> Result<UpstreamTls, BackendTlsProblem> {
        let v = &policy.validation;
        let mut verify_names = Vec::new();
        let mut verify_uris = Vec::new();
        for san in &v.subject_alt_names {
            match san {
                SubjectAltName::Hostname(h) => verify_names.push(h.clone()),
                SubjectAltName::Uri(u) => verify_uris.push(u.clone()),
            }
        }
        // `hostname` verifies only when no subjectAltNames are given.
        if v.subject_alt_names.is_empty() {
            verify_names.push(v.hostname.clone());
        }
        let trust = match &v.well_known_ca_certificates {
            Some(w) if w == WELL_KNOWN_SYSTEM => Trust::System,
            Some(other) => {
                return Err(BackendTlsProblem::Invalid(format!(
                    "wellKnownCACertificates {other:?} is not supported (only {WELL_KNOWN_SYSTEM})"
                )));
            }
            None => Trust::Authorities(self.policy_authorities(policy)?),
        };
        Ok(UpstreamTls {
            policy: policy.meta.object_name(),
            server_name: v.hostname.clone(),
            verify_names,
            verify_uris,
            trust,
        })
    }

    /// The certificates of every CA reference; any reference that does not
    /// resolve makes the whole policy unusable (a policy whose status says
    /// a reference is broken must not quietly trust a subset).
    fn policy_authorities(
        &self,
        policy: &BackendTlsPolicy,
    ) -> Result<Vec<CertificateDer<'static>>, BackendTlsProblem> {
        let ns = policy.meta.namespace.as_str();
        let mut all = Vec::new();
        for r in &policy.validation.ca_certificate_refs {
            if !r.group.is_empty() || r.kind != "ConfigMap" {
                let group = if r.group.is_empty() { "core" } else { &r.group };
                return Err(BackendTlsProblem::InvalidKind(format!(
                    "caCertificateRefs {}: kind {group}/{} is not supported (only core ConfigMap)",
                    r.name, r.kind
                )));
            }
            let invalid = |why: &str| {
                BackendTlsProblem::InvalidCaCertificateRef(format!(
                    "caCertificateRefs ConfigMap {ns}/{}: {why}",
                    r.name
                ))
            };
            let Some(map) = self.config_maps.get(&(ns, r.name.as_str())) else {
                return Err(invalid("not found"));
            };
            let Some(pem) = map.ca_certificate.as_deref() else {
                return Err(invalid(&format!("has no {CA_CERTIFICATE_KEY} entry")));
            };
            let certificates: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .map_err(|e| invalid(&format!("{CA_CERTIFICATE_KEY} is not PEM: {e}")))?;
            if certificates.is_empty() {
                return Err(invalid(&format!(
                    "{CA_CERTIFICATE_KEY} holds no certificate"
                )));
            }
            let mut store = rustls::RootCertStore::empty();
            let (_, unusable) = store.add_parsable_certificates(certificates.iter().cloned());
            if unusable > 0 {
                return Err(invalid(&format!(
                    "{unusable} certificate(s) in {CA_CERTIFICATE_KEY} cannot be trust anchors"
                )));
            }
            all.extend(certificates);
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests;
