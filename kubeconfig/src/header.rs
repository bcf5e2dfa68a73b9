//! The part every document shares: `apiVersion`, `kind` and
//! `metadata.{namespace,name}`. Decides which kinds and apiVersions are
//! read, applies the namespace default, and yields [`ResourceKey`]s for
//! callers that only need identities (`switchyard delete -f`).
//!
//! It deliberately does not look at `spec`: the typed per-kind modules do.

use crate::error::{Location, Problem};
use serde_json::Value;
use switchyard_proto::model::{Kind, ObjectName, ResourceKey};

/// The namespace a namespaced object gets when its document names none,
/// as `kubectl apply` does with its default context.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The apiVersions each kind is accepted under.
pub(crate) fn api_versions(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::GatewayClass | Kind::Gateway | Kind::HTTPRoute | Kind::GRPCRoute => {
            &["gateway.networking.k8s.io/v1"]
        }
        // v1beta1 is the long-standing version; the gateway-api crate's
        // standard channel serves the identical schema as v1.
        Kind::ReferenceGrant => &[
            "gateway.networking.k8s.io/v1beta1",
            "gateway.networking.k8s.io/v1",
        ],
        Kind::BackendTLSPolicy => &["gateway.networking.k8s.io/v1"],
        Kind::Namespace | Kind::Service | Kind::Secret | Kind::ConfigMap => &["v1"],
        Kind::EndpointSlice => &["discovery.k8s.io/v1"],
    }
}

/// `Kind (apiVersion, ...)` for every supported kind, for error messages.
pub(crate) fn supported_kinds() -> String {
    Kind::ALL
        .iter()
        .map(|k| format!("{k} ({})", api_versions(*k).join(" or ")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A document's identity, checked: known kind, right apiVersion, a name,
/// and the namespace with its default applied.
pub(crate) fn key_of(value: &Value) -> Result<ResourceKey, Problem> {
    let map = value.as_object().ok_or(Problem::NotAMapping {
        found: type_name(value),
    })?;
    let api_version = string_field(map.get("apiVersion")).ok_or(Problem::missing("apiVersion"))?;
    let kind_name = string_field(map.get("kind")).ok_or(Problem::missing("kind"))?;
    let kind = Kind::parse(kind_name).ok_or_else(|| Problem::UnknownKind {
        kind: kind_name.to_string(),
        supported: supported_kinds(),
    })?;
    let accepted = api_versions(kind);
    if !accepted.contains(&api_version) {
        return Err(Problem::WrongApiVersion {
            kind,
            found: api_version.to_string(),
            expected: accepted.join(" or "),
        });
    }
    let meta = map.get("metadata");
    let name = strict_string(meta, "name")?.ok_or(Problem::missing("metadata.name"))?;
    let namespace = strict_string(meta, "namespace")?;
    let namespace = match (kind.cluster_scoped(), namespace) {
        (true, None) => String::new(),
        (true, Some(ns)) => {
            return Err(Problem::invalid(
                "metadata.namespace",
                format!("{kind} is cluster-scoped; remove the namespace {ns:?}"),
            ));
        }
        (false, ns) => ns.unwrap_or(DEFAULT_NAMESPACE).to_string(),
    };
    Ok(ResourceKey {
        kind,
        name: ObjectName::new(namespace, name),
    })
}

/// The location of a document, with whatever kind and name it has even if
/// they turn out to be invalid, so every later error can name them.
pub(crate) fn locate(file: &str, index: usize, value: &Value) -> Location {
    let meta = value.get("metadata");
    let name = string_field(meta.and_then(|m| m.get("name")));
    let namespace = string_field(meta.and_then(|m| m.get("namespace")));
    Location {
        file: file.to_string(),
        document: Some(index),
        kind: string_field(value.get("kind")).map(str::to_string),
        object: name.map(|n| match namespace {
            Some(ns) => format!("{ns}/{n}"),
            None => n.to_string(),
        }),
    }
}

/// `metadata.<field>` as a string: absent or empty is `None`; any other
/// type (YAML `namespace: 2024` is a number) is an error, as the Kubernetes
/// API would say — otherwise the typed pass, which turns the scalar into
/// text, and this pass would disagree on the object's identity.
fn strict_string<'a>(meta: Option<&'a Value>, field: &str) -> Result<Option<&'a str>, Problem> {
    match meta.and_then(|m| m.get(field)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str()).filter(|s| !s.is_empty())),
        Some(other) => Err(Problem::invalid(
            format!("metadata.{field}"),
            format!("must be a string, found {}: quote it", type_name(other)),
        )),
    }
}

/// A present, non-empty string.
fn string_field(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}
