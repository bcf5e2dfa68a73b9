//! Test plumbing shared by the workspace's tests; only ever a
//! dev-dependency, so nothing here reaches a binary a user runs.
//!
//! Layout:
//! - [`eventually`](mod@eventually): waiting for a condition with a
//!   deadline (async and blocking), failing with what was waited for and
//!   the last thing seen.
//! - [`conformance_secrets`]: the Secrets a Gateway API conformance
//!   file declares (`secrets`), as `v1 Secret` documents.
//! - [`fake_kube`]: a fake Kubernetes API server on loopback (lists,
//!   watches, `410 Gone`, status patches, every request recorded).
//! - [`fixtures`]: Kubernetes objects for it and for YAML tests.
//! - [`grpc`]: a gRPC backend (h2c, health service, unary and streaming)
//!   and a tonic client, for GRPCRoute tests.
//! - [`listener_tls`]: a test CA, server certificates and their Secrets,
//!   and verifying TLS clients, for HTTPS listener tests.
//! - [`tls_backend`]: a TLS-only HTTP backend (h2 or HTTP/1.1 by ALPN)
//!   that counts connections and handshakes, for BackendTLSPolicy tests.
//! - [`strategies`]: proptest strategies for the model's values, and the
//!   proptest configuration every property file uses.
//! - here: where the repository's test data lives (the Gateway API
//!   conformance cases in `tests/data/gateway-api/`), found one way by
//!   every runner, which fails — never skips — when the data is missing.
//!
//! Does not own: anything one test file alone uses (it stays next to that
//! test), or the product's own harnesses (processes, fleets, probers).

pub mod conformance_secrets;
pub mod eventually;
pub mod fake_kube;
pub mod fixtures;
pub mod grpc;
pub mod listener_tls;
pub mod strategies;
pub mod tls_backend;

pub use eventually::{eventually, eventually_blocking};

use std::path::PathBuf;

/// The Gateway API conformance cases kept in the repository
/// (`tests/data/gateway-api/`, see its README). Panics with the path when
/// they are missing: a runner without its data must fail, not pass.
pub fn gateway_api_cases() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/gateway-api");
    assert!(
        dir.is_dir(),
        "Gateway API conformance cases not found at {}: they are part of the repository",
        dir.display()
    );
    dir
}

/// Every case file (`*.yaml`) of [`gateway_api_cases`], sorted by name (so
/// a seed replays the same order); panics when there are none.
pub fn gateway_api_case_files() -> Vec<PathBuf> {
    let dir = gateway_api_cases();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no case files in {}", dir.display());
    files
}
