//! Gateways, their listeners and classes, and the namespaces whose labels
//! `allowedRoutes` selectors read.

use super::meta::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `controllerName` a GatewayClass must carry for switchyard to serve
/// its Gateways.
pub const CONTROLLER_NAME: &str = "switchyard.io/gateway-controller";

/// A GatewayClass: which controller serves Gateways of this class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayClass {
    /// Metadata (cluster-scoped: empty namespace).
    pub meta: ObjectMeta,
    /// `spec.controllerName`.
    pub controller_name: String,
}

/// A Namespace, kept for its labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespace {
    /// Metadata (cluster-scoped: empty namespace; labels matter).
    pub meta: ObjectMeta,
}

/// A Gateway: listeners that routes attach to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gateway {
    /// Metadata.
    pub meta: ObjectMeta,
    /// `spec.gatewayClassName`.
    pub gateway_class_name: String,
    /// `spec.listeners`, in order.
    pub listeners: Vec<Listener>,
}

/// Listener protocols.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListenerProtocol {
    /// Plain HTTP.
    Http,
    /// HTTPS: TLS terminated by the proxy with the listener's
    /// certificates (`tls.mode: Terminate`), then HTTP.
    Https,
    /// Anything else, kept by name so status can say it is unsupported.
    Other(String),
}

/// One Gateway listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listener {
    /// `name` (the `sectionName` routes refer to).
    pub name: String,
    /// `port`, the Gateway's port (redirects derive default ports from it).
    pub port: u16,
    /// `protocol`.
    pub protocol: ListenerProtocol,
    /// `hostname`: exact (`foo.example.com`) or wildcard (`*.example.com`).
    #[serde(default)]
    pub hostname: Option<String>,
    /// `allowedRoutes`.
    #[serde(default)]
    pub allowed_routes: AllowedRoutes,
    /// `tls`: how an HTTPS listener terminates TLS (`None` when absent).
    #[serde(default)]
    pub tls: Option<ListenerTls>,
}

/// A listener's `tls`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListenerTls {
    /// `mode` (`Terminate` when absent).
    #[serde(default)]
    pub mode: TlsMode,
    /// `certificateRefs`, in order.
    #[serde(default)]
    pub certificate_refs: Vec<CertificateRef>,
}

/// `tls.mode`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum TlsMode {
    /// The proxy terminates TLS.
    #[default]
    Terminate,
    /// TLS passes through to the backend (TLSRoute; not served).
    Passthrough,
    /// Anything else, kept by name so status can say it is unsupported.
    Other(String),
}

/// One `tls.certificateRefs` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateRef {
    /// API group (empty: core).
    #[serde(default)]
    pub group: String,
    /// Kind (`Secret`).
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace; the Gateway's when absent.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `allowedRoutes` of a listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct AllowedRoutes {
    /// `namespaces.from`.
    #[serde(default)]
    pub namespaces: RouteNamespaces,
    /// `kinds`: allowed route kinds as `(group, kind)`; empty means the
    /// protocol's default (HTTPRoute for HTTP/HTTPS).
    #[serde(default)]
    pub kinds: Vec<GroupKind>,
}

/// A `group` plus `kind` pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupKind {
    /// API group (`gateway.networking.k8s.io`; empty for core).
    pub group: String,
    /// Kind.
    pub kind: String,
}

/// Which namespaces may attach routes to a listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum RouteNamespaces {
    /// Only the Gateway's own namespace (the Gateway API default).
    #[default]
    Same,
    /// Every namespace.
    All,
    /// Namespaces whose labels match the selector.
    Selector(LabelSelector),
}

/// A Kubernetes label selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LabelSelector {
    /// `matchLabels`: every pair must be present.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// `matchExpressions`: every expression must hold.
    #[serde(default)]
    pub match_expressions: Vec<LabelExpression>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelExpression {
    /// Label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` / `NotIn`.
    #[serde(default)]
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Whether `labels` satisfy this selector. Unknown operators never match.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let pairs = self
            .match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v));
        let exprs = self.match_expressions.iter().all(|e| {
            let value = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| e.values.contains(v)),
                "NotIn" => !value.is_some_and(|v| e.values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        });
        pairs && exprs
    }
}
