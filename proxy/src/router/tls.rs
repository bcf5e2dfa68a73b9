//! How each listener key's connections are carried: plaintext, TLS with a
//! certificate chosen by SNI among the HTTPS listeners reachable through
//! the key, or refused.
//!
//! Which listener can be served and with which certificates is the
//! model's rule (`gateway_api::tls`, shared with status); this module
//! turns the servable ones into one rustls [`ServerConfig`] per key, built
//! when the table is compiled, so a handshake only looks a name up.
//!
//! - A key whose listeners are HTTPS gets TLS; the certificate is the
//!   first certificateRef of the listener whose hostname best matches the
//!   client's SNI (exact over wildcard, longer wildcard first, no hostname
//!   last — the Gateway API's listener precedence). No listener for the
//!   name: the handshake fails, nothing is served.
//! - A key whose listeners all failed (an HTTPS listener without a
//!   servable certificate, an unsupported protocol) is **refused**: the
//!   proxy closes connections on it rather than answer in plaintext.
//! - Any other key (HTTP listeners, or none: 404) is plaintext.
//!
//! Certificate rotation: a new Secret compiles a new table with a new
//! config; new connections use it, established ones keep theirs.
//! ALPN offers `h2` and `http/1.1`.

use super::ListenerKey;
use super::attach::Gateways;
use super::hostname::HostPattern;
use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use switchyard_proto::model::gateway_api::ListenerTransport;

/// How connections on one listener key are carried.
#[derive(Clone, Default)]
pub enum Transport {
    /// Plain HTTP.
    #[default]
    Plaintext,
    /// TLS terminated with this configuration, then HTTP.
    Tls(Arc<ServerConfig>),
    /// Not served at all: connections are closed. Says why, for logs.
    Refused(Arc<str>),
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::Plaintext => f.write_str("Plaintext"),
            Transport::Tls(_) => f.write_str("Tls"),
            Transport::Refused(why) => write!(f, "Refused({why})"),
        }
    }
}

/// What the listeners reachable through one key say.
#[derive(Default)]
struct KeyListeners {
    plaintext: bool,
    certificates: Vec<(Option<HostPattern>, Arc<CertifiedKey>)>,
    refused: Vec<String>,
}

/// The transport of every listener key that is not plain HTTP.
pub(crate) fn transports(gateways: &Gateways<'_, '_>) -> HashMap<ListenerKey, Transport> {
    let mut keys: HashMap<ListenerKey, KeyListeners> = HashMap::new();
    for l in &gateways.listeners {
        for key in ListenerKey::both(&l.gateway, l.port) {
            let entry = keys.entry(key).or_default();
            match &l.transport {
                ListenerTransport::Plaintext => entry.plaintext = true,
                ListenerTransport::Tls(certs) => {
                    if let Some(first) = certs.first() {
                        entry
                            .certificates
                            .push((l.hostname.clone(), Arc::clone(&first.key)));
                    }
                }
            }
        }
    }
    for r in &gateways.refused {
        for key in ListenerKey::both(&r.gateway, r.port) {
            keys.entry(key).or_default().refused.push(r.why.clone());
        }
    }
    keys.into_iter()
        .filter_map(|(key, l)| {
            let transport = if !l.certificates.is_empty() {
                Transport::Tls(server_config(l.certificates))
            } else if l.plaintext {
                return None;
            } else {
                Transport::Refused(l.refused.join("; ").into())
            };
            Some((key, transport))
        })
        .collect()
}

fn server_config(certificates: Vec<(Option<HostPattern>, Arc<CertifiedKey>)>) -> Arc<ServerConfig> {
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("the ring provider supports the default TLS versions")
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(BySni { certificates }));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

/// Picks the certificate of the listener whose hostname best matches SNI.
#[derive(Debug)]
struct BySni {
    certificates: Vec<(Option<HostPattern>, Arc<CertifiedKey>)>,
}

impl BySni {
    fn pick(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let sni = sni.map(|s| s.trim_end_matches('.').to_ascii_lowercase());
        self.certificates
            .iter()
            .filter_map(|(pattern, key)| {
                let rank = match (pattern, sni.as_deref()) {
                    (None, _) => (0, 0),
                    (Some(p), Some(name)) if p.matches(name) => match p {
                        HostPattern::Exact(_) => (2, 0),
                        HostPattern::Wildcard(suffix) => (1, suffix.len()),
                    },
                    _ => return None,
                };
                Some((rank, key))
            })
            // The first of equals: listeners are in precedence order.
            .fold(
                None,
                |best: Option<((u8, usize), &Arc<CertifiedKey>)>, (rank, key)| match best {
                    Some((r, _)) if r >= rank => best,
                    _ => Some((rank, key)),
                },
            )
            .map(|(_, key)| Arc::clone(key))
    }
}

impl ResolvesServerCert for BySni {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.pick(hello.server_name())
    }
}
