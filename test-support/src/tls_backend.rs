//! A backend that speaks only TLS, for tests of BackendTLSPolicy: it
//! serves a certificate a [`crate::listener_tls::TestCa`] issued, HTTP/2
//! when the client's ALPN asks for `h2`, HTTP/1.1 otherwise, and answers
//! every request with a JSON description of it (the backend's name, the
//! SNI and ALPN the handshake carried, the HTTP version, the method, the
//! path, HTTP/2's `:scheme`, and the host: the `Host` header, else the
//! URI's authority). It
//! counts TCP connections accepted and handshakes completed, so a test
//! can tell "never connected" from "connected but refused the
//! certificate"; and it can refuse service for a while after it starts
//! (`503` on everything, health checks included), as a fresh pod that is
//! not yet ready.

use crate::listener_tls::ServerCert;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

/// A running TLS backend; stops when dropped.
pub struct TlsBackend {
    /// Where it listens (127.0.0.1).
    pub addr: SocketAddr,
    /// TCP connections accepted.
    pub accepted: Arc<AtomicUsize>,
    /// TLS handshakes completed.
    pub handshakes: Arc<AtomicUsize>,
    /// Requests answered (any status).
    pub requests: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for TlsBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsBackend {
    /// Starts a backend named `name` serving `cert`, answering `503` for
    /// the first `unready_for` (zero: ready at once).
    pub async fn start(name: &str, cert: &ServerCert, unready_for: Duration) -> TlsBackend {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(cert.chain_pem.as_bytes())
                .collect::<Result<_, _>>()
                .expect("certificate chain PEM");
        let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).expect("key PEM");
        let mut config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .expect("certificate and key");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let handshakes = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let ready_at = Instant::now() + unready_for;
        let name: Arc<str> = Arc::from(name);
        let counters = (
            Arc::clone(&accepted),
            Arc::clone(&handshakes),
            Arc::clone(&requests),
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                counters.0.fetch_add(1, Ordering::Relaxed);
                let acceptor = acceptor.clone();
                let handshakes = Arc::clone(&counters.1);
                let requests = Arc::clone(&counters.2);
                let name = Arc::clone(&name);
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    handshakes.fetch_add(1, Ordering::Relaxed);
                    let (_, session) = tls.get_ref();
                    let sni = session.server_name().map(str::to_owned);
                    let alpn = session
                        .alpn_protocol()
                        .map(|p| String::from_utf8_lossy(p).into_owned());
                    let h2 = alpn.as_deref() == Some("h2");
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        requests.fetch_add(1, Ordering::Relaxed);
                        let host = req
                            .headers()
                            .get(http::header::HOST)
                            .and_then(|h| h.to_str().ok())
                            .map(str::to_owned)
                            .or_else(|| req.uri().authority().map(|a| a.to_string()));
                        let seen = serde_json::json!({
                            "backend": &*name,
                            "sni": sni,
                            "alpn": alpn,
                            "version": format!("{:?}", req.version()),
                            "method": req.method().as_str(),
                            "path": req.uri().path(),
                            "host": host,
                            // HTTP/2's `:scheme` (HTTP/1.1 carries none).
                            "scheme": req.uri().scheme_str(),
                        });
                        let status = if Instant::now() < ready_at {
                            StatusCode::SERVICE_UNAVAILABLE
                        } else {
                            StatusCode::OK
                        };
                        let mut resp = Response::new(Full::new(Bytes::from(seen.to_string())));
                        *resp.status_mut() = status;
                        async move { Ok::<_, Infallible>(resp) }
                    });
                    let io = TokioIo::new(tls);
                    if h2 {
                        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(io, service)
                            .await;
                    } else {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, service)
                            .await;
                    }
                });
            }
        });
        TlsBackend {
            addr,
            accepted,
            handshakes,
            requests,
            task,
        }
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Handshakes completed so far.
    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::Relaxed)
    }
}
