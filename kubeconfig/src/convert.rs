//! Conversions every kind module needs: Kubernetes `ObjectMeta` into the
//! model's, and the checked narrowing of Kubernetes' `int32` ports and
//! counts into the model's unsigned types.
//!
//! It deliberately does not validate names or label syntax; the model's
//! `validate_resource` does that once for every source.

use crate::error::Problem;
use crate::header::DEFAULT_NAMESPACE;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as K8sMeta;
use switchyard_proto::model::{Kind, ObjectMeta};

/// The API group of Gateway API kinds, the default of parentRef and
/// allowedRoutes `group` fields.
pub(crate) const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// Translates metadata. A namespaced object without a namespace gets
/// [`DEFAULT_NAMESPACE`]; the name is required.
pub(crate) fn object_meta(meta: K8sMeta, kind: Kind) -> Result<ObjectMeta, Problem> {
    let name = meta
        .name
        .filter(|n| !n.is_empty())
        .ok_or(Problem::missing("metadata.name"))?;
    let namespace = meta.namespace.filter(|ns| !ns.is_empty());
    let namespace = if kind.cluster_scoped() {
        namespace.unwrap_or_default()
    } else {
        namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
    };
    Ok(ObjectMeta {
        namespace,
        name,
        labels: meta.labels.unwrap_or_default(),
        annotations: meta.annotations.unwrap_or_default(),
        creation_timestamp_ms: meta.creation_timestamp.map(|t| t.0.as_millisecond()),
        k8s_generation: meta.generation,
        origin: None,
        revision: 0,
    })
}

/// A port number in 1..=65535.
pub(crate) fn port(field: &str, value: i32) -> Result<u16, Problem> {
    match u16::try_from(value) {
        Ok(p) if p != 0 => Ok(p),
        _ => Err(Problem::InvalidPort {
            field: field.to_string(),
            value: value.into(),
        }),
    }
}

/// An optional port.
pub(crate) fn opt_port(field: &str, value: Option<i32>) -> Result<Option<u16>, Problem> {
    value.map(|v| port(field, v)).transpose()
}

/// A count that must not be negative (weights, percentages).
pub(crate) fn non_negative(field: &str, value: i32) -> Result<u32, Problem> {
    u32::try_from(value)
        .map_err(|_| Problem::invalid(field, format!("{value} must not be negative")))
}

/// Kubernetes writes unnamed ports as `""` in some places and leaves the
/// field out in others; the model has one spelling, `None`.
pub(crate) fn port_name(name: Option<String>) -> Option<String> {
    name.filter(|n| !n.is_empty())
}

/// Translates each element of an optional list, giving each its field path
/// `{field}[{i}]`.
pub(crate) fn indexed<T, U>(
    items: Option<Vec<T>>,
    field: &str,
    translate: impl Fn(&str, T) -> Result<U, Problem>,
) -> Result<Vec<U>, Problem> {
    items
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, item)| translate(&format!("{field}[{i}]"), item))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_outside_the_range_are_rejected_with_the_field() {
        assert_eq!(port("p", 1).unwrap(), 1);
        assert_eq!(port("p", 65535).unwrap(), 65535);
        for bad in [0, -1, 65536, i32::MAX] {
            let err = port("spec.ports[0].port", bad).unwrap_err().to_string();
            assert!(err.contains("spec.ports[0].port"), "{err}");
            assert!(err.contains(&bad.to_string()), "{err}");
        }
    }

    #[test]
    fn namespaced_objects_default_to_the_default_namespace() {
        let meta = K8sMeta {
            name: Some("x".into()),
            ..Default::default()
        };
        let m = object_meta(meta.clone(), Kind::Service).unwrap();
        assert_eq!(m.namespace, DEFAULT_NAMESPACE);
        let m = object_meta(meta, Kind::GatewayClass).unwrap();
        assert_eq!(m.namespace, "");
    }
}
