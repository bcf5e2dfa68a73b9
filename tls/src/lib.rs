//! switchyard's mutual TLS: every gRPC connection between coordinators,
//! proxies and admin clients is TLS 1.2+/1.3 with client certificates signed
//! by the cluster's CA (rustls on `ring`).
//!
//! Owns: who a certificate says its holder is ([`Identity`], a URI SAN such
//! as `spiffe://switchyard/proxy/p1`), what each identity may call
//! ([`authz`]), loading and re-reading the PEM files ([`Tls`]), the server
//! side (an accept loop handing tonic authenticated connections,
//! [`server::incoming`]) and the client side ([`client::Connector`]), and
//! generating a CA and certificates ([`certs`]). Does not own: which RPC
//! needs which role (the services call [`authz`]) or the CLI flags.
//!
//! Servers are named by role, not address: every coordinator certificate
//! carries the DNS name [`COORDINATOR_SERVER_NAME`] and clients verify
//! that name, so the same certificate works behind any address, relay or
//! Kubernetes Service.

pub mod authz;
pub mod certs;
pub mod client;
pub mod conn;
mod files;
mod identity;
mod reload;
pub mod server;

pub use files::{TlsError, TlsFiles};
pub use identity::{Identity, IdentityError};
pub use reload::{ReloadOutcome, Tls};

use std::sync::Arc;

/// The DNS name every coordinator certificate carries and every client
/// verifies.
pub const COORDINATOR_SERVER_NAME: &str = "coordinator.switchyard.internal";

/// How a process talks gRPC: mutual TLS with reloadable files, or (only
/// when `--insecure` was given) plaintext with every caller allowed.
#[derive(Clone, Debug)]
pub enum Security {
    /// Plaintext; authorization allows everything.
    Insecure,
    /// Mutual TLS with this process's certificate and CA.
    Tls(Arc<Tls>),
}
