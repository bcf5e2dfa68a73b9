//! Kubernetes-shaped configuration for switchyard: YAML files of Gateway
//! API and core objects, turned into [`switchyard_proto::model::Resource`]
//! values.
//!
//! Each document is deserialized into the ecosystem's own types (the
//! `gateway-api` crate for `GatewayClass`, `Gateway`, `HTTPRoute` and
//! `ReferenceGrant`; `k8s-openapi` for `Namespace`, `Service` and
//! `EndpointSlice`), then translated to the model with the Gateway API's
//! defaults applied, then checked by the model's `validate_resource`.
//!
//! Supported kinds and apiVersions:
//!
//! | kind | apiVersion |
//! | --- | --- |
//! | `GatewayClass`, `Gateway`, `HTTPRoute` | `gateway.networking.k8s.io/v1` |
//! | `ReferenceGrant` | `gateway.networking.k8s.io/v1beta1` or `/v1` |
//! | `GRPCRoute`, `BackendTLSPolicy` | `gateway.networking.k8s.io/v1` |
//! | `Namespace`, `Service`, `Secret` (`tls.crt`/`tls.key` only), `ConfigMap` (`ca.crt` only) | `v1` |
//! | `EndpointSlice` | `discovery.k8s.io/v1` |
//!
//! Rules every entry point follows:
//!
//! - A namespaced object without `metadata.namespace` goes to
//!   [`DEFAULT_NAMESPACE`] (`default`), as `kubectl apply` would with a
//!   default context. A cluster-scoped object with a namespace is an error.
//! - Empty documents (`---` with nothing after it) are skipped; document
//!   indexes in errors still count them, so they match the file.
//! - A field the kind's schema does not have is an error naming its path
//!   (`unknown field "spec.rules[0].matchs"`), as `kubectl apply` with
//!   strict field validation says. `status` is accepted and ignored; keys
//!   with empty values (`null`, `""`, `[]`, `{}`) are accepted. Objects
//!   read from live clusters ([`live`]) are not checked this way.
//! - Any error fails the whole parse: there is no partial result.
//! - The same kind, namespace and name twice in one file is an error.
//!
//! This crate deliberately does no IO beyond reading the file it is given,
//! and does not resolve references between objects (a route to a missing
//! Service is valid configuration; the proxy answers 500 for it).
//!
//! # Layout
//!
//! - [`error`]: [`ParseError`], [`Location`], [`Problem`].
//! - `header`: apiVersion/kind/metadata checks, namespace default, keys.
//! - `document`: the stream pipeline (split, decode, translate, validate).
//! - `gateway`, `route`, `filter`, `backend`: per-kind translation.
//! - `convert`: metadata and checked port/count conversions.
//! - `strict`: unknown fields refused (files only).
//! - `default.yaml`: [`DEFAULT_CONFIG`], the built-in demo configuration.
//! - [`live`]: live clusters (watchers, multi-cluster merge, status
//!   write-back, leadership), through kube-rs.
//! - [`node_zone`]: a node's zone label, for `switchyard node-zone`.

mod backend;
mod backend_tls;
mod convert;
mod document;
pub mod error;
mod filter;
mod gateway;
mod grpc_route;
mod header;
pub mod live;
mod nesting;
pub mod node_zone;
mod route;
mod secret;
mod strict;

pub use error::{Location, ParseError, Problem};
pub use header::DEFAULT_NAMESPACE;

use std::path::Path;
use switchyard_proto::model::{Resource, ResourceKey};

/// The built-in configuration `switchyard demo` starts from: a
/// GatewayClass for [`switchyard_proto::model::CONTROLLER_NAME`], namespace
/// `demo`, Gateway `demo/gateway` (HTTP on 8080), Services `demo/blue` and
/// `demo/green` (port 80), one EndpointSlice each on 127.0.0.1 (ports 18081
/// and 18082, placeholders the demo rewrites to its real backends) and
/// HTTPRoute `demo/app` sending everything to `blue`.
pub const DEFAULT_CONFIG: &str = include_str!("default.yaml");

/// Parses a multi-document YAML text. `source` names the text in errors
/// (usually the file name). Returns the resources in document order.
pub fn parse_documents(source: &str, text: &str) -> Result<Vec<Resource>, ParseError> {
    document::parse_stream(source, text)
}

/// Reads and parses a YAML file; errors name it by its path as given.
pub fn parse_file(path: &Path) -> Result<Vec<Resource>, ParseError> {
    let (source, text) = read(path)?;
    parse_documents(&source, &text)
}

/// Parses one already-decoded object (for example one entry of a list in a
/// test-data file). `source` and `index` say where it came from, for
/// errors; field paths are reported, line numbers are not.
pub fn parse_object(
    source: &str,
    index: usize,
    value: serde_json::Value,
) -> Result<Resource, ParseError> {
    document::parse_value(source, index, value)
}

/// The keys of the objects in a multi-document YAML text, for
/// `switchyard delete -f`. Only `apiVersion`, `kind` and `metadata` are
/// read and checked, so documents without a `spec` are fine; unknown keys
/// at the top and in `metadata` are refused (a misspelt `namespace` would
/// name another object), what is below the other keys is not read. The
/// namespace default and the duplicate rule are the same as
/// [`parse_documents`], and whatever it accepts is accepted here.
pub fn parse_keys(source: &str, text: &str) -> Result<Vec<ResourceKey>, ParseError> {
    document::keys_of_stream(source, text)
}

/// [`parse_keys`] on a file.
pub fn parse_file_keys(path: &Path) -> Result<Vec<ResourceKey>, ParseError> {
    let (source, text) = read(path)?;
    parse_keys(&source, &text)
}

fn read(path: &Path) -> Result<(String, String), ParseError> {
    let source = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => Ok((source, text)),
        Err(e) => {
            let at = Location {
                file: source,
                ..Location::default()
            };
            Err(ParseError::new(&at, Problem::Io(e)))
        }
    }
}
