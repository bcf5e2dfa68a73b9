//! TLS to backends: `BackendTLSPolicy` (Gateway API v1, GEP-1897), which
//! says a Service's endpoints are spoken to over TLS and how their
//! certificate is verified, and the `ConfigMap`s whose `ca.crt` holds the
//! certificate authorities it trusts.
//!
//! Only what the policy needs is kept: of a ConfigMap, its `ca.crt` entry.
//! Whether a policy applies, conflicts or resolves is decided in one place,
//! `gateway_api::backend_tls`, for the proxy and the status writers alike.

use super::meta::{ObjectMeta, ObjectName};
use serde::{Deserialize, Serialize};

/// The ConfigMap entry a `caCertificateRefs` ConfigMap holds its PEM
/// certificate authorities in.
pub const CA_CERTIFICATE_KEY: &str = "ca.crt";

/// The only `wellKnownCACertificates` value the API defines: the trust
/// store of the proxy's system.
pub const WELL_KNOWN_SYSTEM: &str = "System";

/// A BackendTLSPolicy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendTlsPolicy {
    /// Metadata; the policy applies to Services of its own namespace.
    pub meta: ObjectMeta,
    /// `spec.targetRefs`: the Services (or one port of each, by
    /// `sectionName`) spoken to over TLS.
    pub target_refs: Vec<PolicyTargetRef>,
    /// `spec.validation`: how the backend's certificate is verified.
    pub validation: BackendTlsValidation,
}

/// One `targetRefs` entry: an object of the policy's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyTargetRef {
    /// API group (empty for core).
    #[serde(default)]
    pub group: String,
    /// Kind (`Service`).
    pub kind: String,
    /// Name.
    pub name: String,
    /// A port name of the Service, or `None` for all its ports.
    #[serde(default)]
    pub section_name: Option<String>,
}

impl PolicyTargetRef {
    /// Whether it names a core Service (the only kind a BackendTLSPolicy
    /// applies to here; other targets are ignored).
    pub fn is_service(&self) -> bool {
        self.group.is_empty() && self.kind == "Service"
    }
}

impl BackendTlsPolicy {
    /// The Services it targets (of its own namespace), each with the port
    /// name it is limited to (`sectionName`), if any.
    pub fn target_services(&self) -> impl Iterator<Item = (ObjectName, Option<&str>)> + '_ {
        self.target_refs.iter().filter(|t| t.is_service()).map(|t| {
            (
                ObjectName::new(self.meta.namespace.clone(), t.name.clone()),
                t.section_name.as_deref(),
            )
        })
    }
}

/// `spec.validation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct BackendTlsValidation {
    /// `caCertificateRefs`: objects of the policy's namespace holding the
    /// trusted authorities (core `ConfigMap`s).
    #[serde(default)]
    pub ca_certificate_refs: Vec<LocalObjectRef>,
    /// `wellKnownCACertificates` (`System`), exclusive with
    /// `caCertificateRefs`.
    #[serde(default)]
    pub well_known_ca_certificates: Option<String>,
    /// `hostname`: sent as SNI, and what the certificate must be valid for
    /// unless `subjectAltNames` is given.
    pub hostname: String,
    /// `subjectAltNames`: when present, the certificate must carry one of
    /// them (instead of `hostname`).
    #[serde(default)]
    pub subject_alt_names: Vec<SubjectAltName>,
}

/// A reference to an object in the referrer's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalObjectRef {
    /// API group (empty for core).
    #[serde(default)]
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

/// One `subjectAltNames` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubjectAltName {
    /// `type: Hostname`: a DNS name (a leading `*.` matches one label).
    Hostname(String),
    /// `type: URI` (SPIFFE IDs and the like).
    Uri(String),
}

/// A ConfigMap, as far as a BackendTLSPolicy reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigMap {
    /// Metadata.
    pub meta: ObjectMeta,
    /// `data["ca.crt"]`: PEM certificates, when present.
    #[serde(default)]
    pub ca_certificate: Option<String>,
}
