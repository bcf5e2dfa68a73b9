//! The pipeline from text to resources: split a YAML stream into
//! documents, check each one's header, deserialize it into its Kubernetes
//! type, translate it, validate it, and reject duplicates.
//!
//! A stream is read twice. The first pass decodes every document into a
//! generic value: it catches malformed YAML anywhere in the file before any
//! translation, and gives the header checks something to look at. The
//! second pass deserializes each document's YAML again, straight into its
//! typed struct, because only the YAML deserializer reports *where* a typed
//! error is (`spec.listeners[0]: missing field `port` at line 9 column 7`).
//!
//! After the typed decode, keys the type does not have are refused
//! (`crate::strict`); `delete -f` checks only the header's keys.
//!
//! It deliberately keeps nothing on failure: the first error ends the parse.

use crate::error::{Location, ParseError, Problem};
use crate::header::{key_of, locate};
use crate::{backend, backend_tls, gateway, grpc_route, route, secret};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use switchyard_proto::model::{Kind, Resource, ResourceKey, validate_resource};

/// Every document of a stream as a generic value; `None` for empty ones.
fn load(file: &str, text: &str) -> Result<Vec<Option<Value>>, ParseError> {
    let max = crate::nesting::MAX_FLOW_DEPTH;
    if let Some(line) = crate::nesting::first_line_deeper_than(text, max) {
        let at = Location {
            file: file.to_string(),
            ..Location::default()
        };
        return Err(ParseError::new(&at, Problem::TooDeep { line, max }));
    }
    let mut out = Vec::new();
    for (index, doc) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc).map_err(|e| {
            let at = Location {
                file: file.to_string(),
                document: Some(index),
                ..Location::default()
            };
            ParseError::new(&at, Problem::Yaml(e.to_string()))
        })?;
        out.push(if value.is_null() { None } else { Some(value) });
    }
    Ok(out)
}

/// Parses a whole stream into resources, failing on the first error.
pub(crate) fn parse_stream(file: &str, text: &str) -> Result<Vec<Resource>, ParseError> {
    let values = load(file, text)?;
    let docs = yaml_serde::Deserializer::from_str(text);
    let mut seen = Seen::default();
    let mut out = Vec::new();
    for (index, (value, doc)) in values.iter().zip(docs).enumerate() {
        let Some(value) = value else { continue };
        let resource = translate(file, index, value, doc, true)?;
        seen.insert(resource.key(), file, index)?;
        out.push(resource);
    }
    Ok(out)
}

/// The keys of every document of a stream, checking only headers.
pub(crate) fn keys_of_stream(file: &str, text: &str) -> Result<Vec<ResourceKey>, ParseError> {
    let mut seen = Seen::default();
    let mut out = Vec::new();
    for (index, value) in load(file, text)?.iter().enumerate() {
        let Some(value) = value else { continue };
        let mut at = locate(file, index, value);
        let key = key_of(value).map_err(|p| ParseError::new(&at, p))?;
        at.object = Some(key.name.to_string());
        crate::strict::check_header(key.kind, value).map_err(|p| ParseError::new(&at, p))?;
        seen.insert(key.clone(), file, index)?;
        out.push(key);
    }
    Ok(out)
}

/// Parses one decoded object, as document `index` of `file`.
pub(crate) fn parse_value(file: &str, index: usize, value: Value) -> Result<Resource, ParseError> {
    // Render the value as YAML so the typed pass goes through the same
    // path-reporting deserializer; its line numbers would point into this
    // rendering, not the caller's input, so they are left out of errors.
    let text = yaml_serde::to_string(&value)
        .map_err(|e| ParseError::new(&locate(file, index, &value), Problem::Yaml(e.to_string())))?;
    translate(
        file,
        index,
        &value,
        yaml_serde::Deserializer::from_str(&text),
        false,
    )
}

/// Header check, typed decode, translation and validation of one document.
fn translate(
    file: &str,
    index: usize,
    value: &Value,
    doc: yaml_serde::Deserializer<'_>,
    with_lines: bool,
) -> Result<Resource, ParseError> {
    let mut at = locate(file, index, value);
    let key = key_of(value).map_err(|p| ParseError::new(&at, p))?;
    at.object = Some(key.name.to_string());
    let resource = typed(key.kind, value, doc, with_lines).map_err(|p| ParseError::new(&at, p))?;
    validate_resource(&resource).map_err(|e| ParseError::new(&at, Problem::Validation(e)))?;
    Ok(resource)
}

fn typed(
    kind: Kind,
    value: &Value,
    doc: yaml_serde::Deserializer<'_>,
    with_lines: bool,
) -> Result<Resource, Problem> {
    let d = Decoder {
        kind,
        value,
        with_lines,
    };
    match kind {
        Kind::GatewayClass => gateway::gateway_class(d.decode(doc)?),
        Kind::Gateway => gateway::gateway(d.decode(doc)?),
        Kind::HTTPRoute => route::http_route(d.decode(doc)?),
        Kind::GRPCRoute => grpc_route::grpc_route(d.decode(doc)?),
        Kind::ReferenceGrant => backend::reference_grant(d.decode(doc)?),
        Kind::Namespace => gateway::namespace(d.decode(doc)?),
        Kind::Service => backend::service(d.decode(doc)?, value),
        Kind::EndpointSlice => backend::endpoint_slice(d.decode(doc)?, value),
        Kind::Secret => secret::secret(d.decode(doc)?),
        Kind::ConfigMap => backend_tls::config_map(d.decode(doc)?),
        Kind::BackendTLSPolicy => backend_tls::backend_tls_policy(d.decode(doc)?),
    }
}

/// What decoding one document needs besides its YAML.
struct Decoder<'a> {
    kind: Kind,
    /// The same document as a generic value, for the unknown-field check.
    value: &'a Value,
    with_lines: bool,
}

impl Decoder<'_> {
    /// Deserializes a document into the ecosystem's type for the kind,
    /// then refuses keys the type does not have ([`crate::strict`]).
    fn decode<T: DeserializeOwned + Serialize>(
        &self,
        doc: yaml_serde::Deserializer<'_>,
    ) -> Result<T, Problem> {
        let typed = decode(self.kind, doc, self.with_lines)?;
        crate::strict::check(self.kind, self.value, &typed)?;
        Ok(typed)
    }
}

/// Deserializes a document into the ecosystem's type for `kind`.
fn decode<T: DeserializeOwned>(
    kind: Kind,
    doc: yaml_serde::Deserializer<'_>,
    with_lines: bool,
) -> Result<T, Problem> {
    T::deserialize(doc).map_err(|e| {
        let mut message = e.to_string();
        if !with_lines && let Some(loc) = e.location() {
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            if let Some(stripped) = message.strip_suffix(&suffix) {
                message = stripped.to_string();
            }
        }
        Problem::Schema { kind, message }
    })
}

/// Keys already seen in a stream, with the document that declared them.
#[derive(Default)]
struct Seen(HashMap<ResourceKey, usize>);

impl Seen {
    fn insert(&mut self, key: ResourceKey, file: &str, index: usize) -> Result<(), ParseError> {
        if let Some(&first) = self.0.get(&key) {
            let at = Location {
                file: file.to_string(),
                document: Some(index),
                kind: Some(key.kind.to_string()),
                object: Some(key.name.to_string()),
            };
            return Err(ParseError::new(
                &at,
                Problem::Duplicate {
                    first,
                    second: index,
                },
            ));
        }
        self.0.insert(key, index);
        Ok(())
    }
}
