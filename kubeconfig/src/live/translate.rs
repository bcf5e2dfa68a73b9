//! One object as a watcher delivers it into the model: the same typed
//! deserialization, translation and validation as the file side, so a
//! cluster and a file describing the same objects give equal resources.
//!
//! Objects are watched as `DynamicObject`s and decoded here one at a time,
//! rather than watched as typed structs: with a typed watcher one object
//! the typed schema cannot read (a newer API version's enum value, say)
//! fails the whole list of its kind, in every cluster, forever. Decoded
//! here, it is rejected alone and reported.
//!
//! A `ServiceExport` keeps only its metadata (which Service, since when):
//! its spec is empty and its status is the MCS controller's.
//!
//! It deliberately does not decide what is served or what happens to a
//! rejected object; the cache keeps its last good version.

use super::cache::Object;
use super::kinds::Watched;
use crate::error::{Location, ParseError, Problem};
use crate::{backend, backend_tls, gateway, grpc_route, route, secret};
use kube::core::DynamicObject;
use serde::de::DeserializeOwned;
use serde_json::Value;
use switchyard_proto::model::{Kind, ObjectMeta, Resource, validate_resource};

/// Translates one watched object read from `cluster`. EndpointSlices are
/// tagged with the cluster.
pub(crate) fn translate(
    cluster: &str,
    watched: Watched,
    object: &DynamicObject,
) -> Result<Object, ParseError> {
    let at = Location {
        file: format!("cluster {cluster}"),
        document: None,
        kind: Some(watched.to_string()),
        object: Some(object_label(object)),
    };
    let kind = match watched {
        Watched::Model(kind) => kind,
        Watched::ServiceExport => return Ok(Object::Export(export_meta(object))),
    };
    let value = serde_json::to_value(object).map_err(|e| {
        ParseError::new(
            &at,
            Problem::Schema {
                kind,
                message: e.to_string(),
            },
        )
    })?;
    let mut resource = typed(kind, value).map_err(|p| ParseError::new(&at, p))?;
    if let Resource::EndpointSlice(slice) = &mut resource {
        slice.cluster = Some(cluster.to_string());
    }
    validate_resource(&resource).map_err(|e| ParseError::new(&at, Problem::Validation(e)))?;
    Ok(Object::Resource(resource))
}

/// A ServiceExport's namespace, name (the exported Service's) and
/// creation time (the oldest export wins a conflict).
fn export_meta(object: &DynamicObject) -> ObjectMeta {
    ObjectMeta {
        creation_timestamp_ms: object
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_millisecond()),
        ..ObjectMeta::named(
            object.metadata.namespace.clone().unwrap_or_default(),
            object.metadata.name.clone().unwrap_or_default(),
        )
    }
}

/// `namespace/name` (or `name`) of a watched object, for errors and logs.
pub(crate) fn object_label(object: &DynamicObject) -> String {
    let name = object.metadata.name.as_deref().unwrap_or("");
    match object.metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

fn typed(kind: Kind, value: Value) -> Result<Resource, Problem> {
    match kind {
        Kind::GatewayClass => gateway::gateway_class(decode(kind, value)?),
        Kind::Gateway => gateway::gateway(decode(kind, value)?),
        Kind::HTTPRoute => route::http_route(decode(kind, value)?),
        Kind::GRPCRoute => grpc_route::grpc_route(decode(kind, value)?),
        Kind::ReferenceGrant => backend::reference_grant(decode(kind, value)?),
        Kind::Namespace => gateway::namespace(decode(kind, value)?),
        Kind::Service => {
            let raw = value.clone();
            backend::service(decode(kind, value)?, &raw)
        }
        Kind::EndpointSlice => {
            let raw = value.clone();
            backend::endpoint_slice(decode(kind, value)?, &raw)
        }
        Kind::Secret => secret::secret(decode(kind, value)?),
        Kind::ConfigMap => backend_tls::config_map(decode(kind, value)?),
        Kind::BackendTLSPolicy => backend_tls::backend_tls_policy(decode(kind, value)?),
    }
}

fn decode<T: DeserializeOwned>(kind: Kind, value: Value) -> Result<T, Problem> {
    serde_json::from_value(value).map_err(|e| Problem::Schema {
        kind,
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_listed_slice_without_type_meta_translates_and_is_tagged() {
        // List items from the API server carry no apiVersion/kind.
        let o = object(json!({
            "metadata": {"name": "blue-x1", "namespace": "demo",
                         "labels": {"kubernetes.io/service-name": "blue"}},
            "addressType": "IPv4",
            "ports": [{"port": 8080}],
            "endpoints": [{"addresses": ["10.0.0.1"], "zone": "a"}]
        }));
        let translated = translate("east", Watched::Model(Kind::EndpointSlice), &o).unwrap();
        let Object::Resource(Resource::EndpointSlice(s)) = translated else {
            panic!("not a slice")
        };
        assert_eq!(s.cluster.as_deref(), Some("east"));
        assert_eq!(s.service_name(), Some("blue"));
        assert_eq!(s.endpoints[0].zone.as_deref(), Some("a"));
    }

    #[test]
    fn an_unreadable_object_is_an_error_naming_cluster_kind_and_object() {
        let o = object(json!({
            "metadata": {"name": "app", "namespace": "demo"},
            "spec": {"rules": [{"matches": [{"path": {"type": "RegularExpression", "value": "(("}}]}]}
        }));
        let err = translate("east", Watched::Model(Kind::HTTPRoute), &o)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cluster east, HTTPRoute demo/app: "),
            "{err}"
        );
    }

    #[test]
    fn a_service_export_keeps_its_name_and_age() {
        let o = object(json!({
            "metadata": {"name": "blue", "namespace": "shop",
                         "creationTimestamp": "2026-01-02T03:04:05Z"},
            "spec": {}
        }));
        let Object::Export(meta) = translate("east", Watched::ServiceExport, &o).unwrap() else {
            panic!("not an export")
        };
        assert_eq!(meta.object_name().to_string(), "shop/blue");
        assert_eq!(meta.creation_timestamp_ms, Some(1_767_323_045_000));
    }
}
