//! Strict field validation of files: a key the kind's schema does not have
//! is an error, as `kubectl apply` refuses it with server-side field
//! validation `Strict` (`unknown field "spec.rules[0].matchs"`). Without
//! it a misspelt `matches:` is dropped and the rule matches everything.
//!
//! How: the typed structs ignore keys they do not know, so the document is
//! deserialized into its typed struct, the struct is serialized back into a
//! generic value, and every key of the input is looked up in that round
//! trip. A key the round trip lacks is one the schema dropped. Maps with
//! arbitrary keys (`labels`, `annotations`, `selector.matchLabels`,
//! `managedFields[].fieldsV1`) come back whole, so their keys are never
//! unknown; every `metadata` field Kubernetes writes (`uid`,
//! `resourceVersion`, `creationTimestamp`, `managedFields`, ...) is a field
//! of `ObjectMeta` and comes back too.
//!
//! Accepted although the round trip may lack them:
//!
//! - a key whose value is empty (`null`, `""`, `[]`, `{}`): it says
//!   nothing, and serializers leave out empty optional values (`kubectl
//!   get -o yaml` writes `creationTimestamp: null`);
//! - `status` at the top of a kind that has one (all but EndpointSlice),
//!   whatever it holds: controllers write it, `kubectl apply` ignores it
//!   for kinds with a status subresource, and switchyard never reads it
//!   from a file. It must still be of the right shape, because the typed
//!   decode reads it.
//!
//! YAML merge keys (`<<: *anchor`) are not expanded by the YAML parser, so
//! what they would merge was silently dropped; they are now refused as the
//! unknown field `['<<']`.
//!
//! It deliberately does not check objects read from a live cluster
//! (`crate::live`): the API server validated them against the schema it
//! serves, which may be newer than these types, and one object the types
//! do not fully know must not be refused there.

use crate::error::Problem;
use serde::Serialize;
use serde_json::Value;
use switchyard_proto::model::Kind;

/// Refuses keys of `input` that the typed decode `typed` of the same
/// document dropped.
pub(crate) fn check<T: Serialize>(kind: Kind, input: &Value, typed: &T) -> Result<(), Problem> {
    let round_trip = serde_json::to_value(typed).map_err(|e| Problem::Schema {
        kind,
        message: format!("cannot encode the decoded object again to check its fields: {e}"),
    })?;
    refuse_unknown(kind, input, &round_trip)
}

/// The check `switchyard delete -f` makes: it reads only identities, so
/// only the top-level keys and the keys of `metadata` are checked (a
/// misspelt `namespace` would delete another object); what is below them
/// is not looked at. It accepts everything [`check`] accepts.
pub(crate) fn check_header(kind: Kind, input: &Value) -> Result<(), Problem> {
    let Some(top) = input.as_object() else {
        return Ok(());
    };
    let mut fields = Vec::new();
    for (key, value) in top {
        let known = ["apiVersion", "kind", "metadata"].contains(&key.as_str())
            || top_level_fields(kind).contains(&key.as_str())
            || (key == "status" && has_status(kind));
        if !known && !is_empty(value) {
            fields.push(field_path("", key));
        }
    }
    if let Some(Value::Object(meta)) = top.get("metadata") {
        for (key, value) in meta {
            if !METADATA_FIELDS.contains(&key.as_str()) && !is_empty(value) {
                fields.push(field_path("metadata", key));
            }
        }
    }
    if fields.is_empty() {
        Ok(())
    } else {
        Err(Problem::UnknownFields { kind, fields })
    }
}

/// The fields of `ObjectMeta` (`metadata`), as Kubernetes spells them.
/// The test `metadata_fields_are_those_of_object_meta` keeps the list
/// equal to the type's.
const METADATA_FIELDS: &[&str] = &[
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];

/// The top-level fields of `kind` besides `apiVersion`, `kind`, `metadata`
/// and `status` (see [`has_status`]).
pub(crate) fn top_level_fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::EndpointSlice => &["addressType", "endpoints", "ports"],
        Kind::Secret => &["data", "immutable", "stringData", "type"],
        Kind::ConfigMap => &["binaryData", "data", "immutable"],
        Kind::GatewayClass
        | Kind::Gateway
        | Kind::HTTPRoute
        | Kind::GRPCRoute
        | Kind::ReferenceGrant
        | Kind::Namespace
        | Kind::Service
        | Kind::BackendTLSPolicy => &["spec"],
    }
}

/// Whether `kind` has a top-level `status` (accepted and ignored).
pub(crate) fn has_status(kind: Kind) -> bool {
    !matches!(kind, Kind::EndpointSlice | Kind::Secret | Kind::ConfigMap)
}

fn refuse_unknown(kind: Kind, input: &Value, round_trip: &Value) -> Result<(), Problem> {
    let mut fields = Vec::new();
    if let (Value::Object(input), Value::Object(round_trip)) = (input, round_trip) {
        for (key, value) in input {
            if key == "status" && has_status(kind) {
                continue;
            }
            let path = field_path("", key);
            match round_trip.get(key) {
                Some(back) => unknown_below(&path, value, back, &mut fields),
                None if is_empty(value) => {}
                None => fields.push(path),
            }
        }
    }
    if fields.is_empty() {
        Ok(())
    } else {
        Err(Problem::UnknownFields { kind, fields })
    }
}

/// Collects the paths of keys in `input` (at `at`) that `round_trip` lacks.
fn unknown_below(at: &str, input: &Value, round_trip: &Value, out: &mut Vec<String>) {
    match (input, round_trip) {
        (Value::Object(input), Value::Object(back)) => {
            for (key, value) in input {
                let path = field_path(at, key);
                match back.get(key) {
                    Some(b) => unknown_below(&path, value, b, out),
                    None if is_empty(value) => {}
                    None => out.push(path),
                }
            }
        }
        // Lists come back element for element.
        (Value::Array(input), Value::Array(back)) => {
            for (i, (value, b)) in input.iter().zip(back).enumerate() {
                unknown_below(&format!("{at}[{i}]"), value, b, out);
            }
        }
        // Scalars (and values a type spells differently, such as an
        // int-or-string) have no keys.
        _ => {}
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

/// `at.key`, with keys that would read as path syntax quoted.
fn field_path(at: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (at.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{at}.{key}"),
        // Single quotes: the path is shown inside double ones.
        (_, false) => format!("{at}['{key}']"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn unknown(input: Value, back: Value) -> Vec<String> {
        match refuse_unknown(Kind::HTTPRoute, &input, &back) {
            Ok(()) => Vec::new(),
            Err(Problem::UnknownFields { fields, .. }) => fields,
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn keys_the_round_trip_lacks_are_reported_with_their_paths() {
        let input = json!({"spec": {"rules": [{"matches": []}, {"matchs": [{"path": {}}]}]}});
        let back = json!({"spec": {"rules": [{"matches": []}, {}]}});
        assert_eq!(unknown(input, back), ["spec.rules[1].matchs"]);
    }

    #[test]
    fn empty_values_and_status_are_accepted() {
        let input = json!({
            "metadata": {"creationTimestamp": null, "x": ""},
            "spec": {"a": [], "b": {}},
            "status": {"anything": 1},
        });
        assert!(unknown(input, json!({"metadata": {}, "spec": {}})).is_empty());
        // An EndpointSlice has no status.
        let err = refuse_unknown(
            Kind::EndpointSlice,
            &json!({"status": {"a": 1}}),
            &json!({}),
        );
        assert!(matches!(err, Err(Problem::UnknownFields { fields, .. }) if fields == ["status"]));
    }

    #[test]
    fn scalars_spelled_differently_are_not_compared() {
        let input = json!({"spec": {"port": "80", "list": [1, {"k": 2}]}});
        let back = json!({"spec": {"port": 80, "list": [1, {"k": 2}]}});
        assert!(unknown(input, back).is_empty());
    }

    #[test]
    fn keys_that_look_like_path_syntax_are_quoted() {
        assert_eq!(field_path("metadata", "a.b"), "metadata['a.b']");
        assert_eq!(field_path("spec.ports[1]", "<<"), "spec.ports[1]['<<']");
        assert_eq!(field_path("", "spec"), "spec");
        assert_eq!(field_path("spec", "x-y_z"), "spec.x-y_z");
    }

    fn top_keys<T: Serialize>(t: &T) -> Vec<String> {
        let value = serde_json::to_value(t).unwrap();
        value.as_object().unwrap().keys().cloned().collect()
    }

    /// Every top-level key each kind's type writes (all optional parts
    /// filled in) is in [`top_level_fields`] or is one every kind has.
    #[test]
    fn the_top_level_table_covers_every_type() {
        use gateway_api::apis::standard::{
            gatewayclasses, gateways, grpcroutes, httproutes, referencegrants,
        };
        use k8s_openapi::api::core::v1::{Namespace, Service};
        use k8s_openapi::api::discovery::v1::EndpointSlice;
        let cases: Vec<(Kind, Vec<String>)> = vec![
            (
                Kind::GatewayClass,
                top_keys(&gatewayclasses::GatewayClass {
                    status: Some(Default::default()),
                    ..Default::default()
                }),
            ),
            (
                Kind::Gateway,
                top_keys(&gateways::Gateway {
                    status: Some(Default::default()),
                    ..Default::default()
                }),
            ),
            (
                Kind::HTTPRoute,
                top_keys(&httproutes::HttpRoute {
                    status: Some(Default::default()),
                    ..Default::default()
                }),
            ),
            (
                Kind::GRPCRoute,
                top_keys(&grpcroutes::GrpcRoute {
                    status: Some(Default::default()),
                    ..Default::default()
                }),
            ),
            (
                Kind::ReferenceGrant,
                top_keys(&referencegrants::ReferenceGrant::default()),
            ),
            (
                Kind::Namespace,
                top_keys(&Namespace {
                    spec: Some(Default::default()),
                    status: Some(Default::default()),
                    ..Default::default()
                }),
            ),
            (
                Kind::Service,
                top_keys(&Service {
                    spec: Some(Default::default()),
                    status: Some(Default::default()),
                    ..Default::default()
                }),
            ),
            (
                Kind::EndpointSlice,
                top_keys(&EndpointSlice {
                    ports: Some(Vec::new()),
                    ..Default::default()
                }),
            ),
            (
                Kind::Secret,
                top_keys(&k8s_openapi::api::core::v1::Secret {
                    data: Some(Default::default()),
                    immutable: Some(true),
                    string_data: Some(Default::default()),
                    type_: Some("kubernetes.io/tls".into()),
                    ..Default::default()
                }),
            ),
        ];
        for (kind, keys) in cases {
            for key in keys {
                let known = ["apiVersion", "kind", "metadata"].contains(&key.as_str())
                    || (key == "status" && has_status(kind))
                    || top_level_fields(kind).contains(&key.as_str());
                assert!(known, "{kind}: {key} is missing from the table");
            }
        }
    }

    /// The list is `ObjectMeta`'s fields: the struct literal names every
    /// field (a new one fails to compile), and each serializes under a
    /// name in the list.
    #[test]
    fn metadata_fields_are_those_of_object_meta() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
        let time = || serde_json::from_value::<Time>(json!("2024-01-01T00:00:00Z")).ok();
        let full = ObjectMeta {
            annotations: Some(Default::default()),
            creation_timestamp: time(),
            deletion_grace_period_seconds: Some(1),
            deletion_timestamp: time(),
            finalizers: Some(Vec::new()),
            generate_name: Some("g".into()),
            generation: Some(1),
            labels: Some(Default::default()),
            managed_fields: Some(Vec::new()),
            name: Some("n".into()),
            namespace: Some("ns".into()),
            owner_references: Some(Vec::new()),
            resource_version: Some("1".into()),
            self_link: Some("/x".into()),
            uid: Some("u".into()),
        };
        let mut keys = top_keys(&full);
        keys.sort();
        let mut listed: Vec<String> = METADATA_FIELDS.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(keys, listed);
    }

    #[test]
    fn delete_checks_only_the_header() {
        let ok = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "uid": "u", "labels": {"any.key/x": "v"}},
            "spec": {"whatever": 1},
            "status": {},
        });
        assert!(check_header(Kind::Service, &ok).is_ok());
        let typo = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespce": "a"}});
        let err = check_header(Kind::Service, &typo).unwrap_err().to_string();
        assert!(err.contains("unknown field \"metadata.namespce\""), "{err}");
        let top = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "sepc": {"a": 1}});
        let err = check_header(Kind::Service, &top).unwrap_err().to_string();
        assert!(err.contains("\"sepc\""), "{err}");
    }
}
