//! One client connection: TLS termination when its listener is HTTPS
//! (within the header read timeout; a listener that cannot be served
//! closes the connection, never answers in plaintext), then HTTP/1.1 or
//! HTTP/2 (ALPN or prior knowledge) through hyper-util's auto builder, a
//! first-request watchdog, and the drain protocol.
//!
//! Drain, per connection:
//! - HTTP/2: GOAWAY at once (hyper's graceful shutdown); streams in flight
//!   finish, the client opens new ones elsewhere.
//! - HTTP/1.1: nothing is cut. Every response from now on carries
//!   `Connection: close` (the request stack adds it), so a busy client
//!   learns to reconnect between requests. A connection that stays idle for
//!   the drain grace period is closed then; closing it at once would race a
//!   request the client may already have on the wire.
//! - A tunnel (the connection switched protocols after a 101, see
//!   `tunnel`): run by this task once hyper lets go of the connection, so
//!   it keeps its slot and the drain waits for it; it is closed when the
//!   drain timeout passes, like every connection still open then.
//!
//! Limit hits counted here: a connection closed because no request head
//! arrived within the header read timeout (the watchdog's, or hyper's own
//! for later heads and idle keep-alive connections), and an HTTP/1 head
//! hyper answered 431. Not counted: an HTTP/2 header list over the limit —
//! h2 answers 431 on that stream itself and nothing reaches this code.
//! The access log's line for a head hyper refused (431, 400) is sent here
//! too: no request reached the request stack.
//!
//! Not here: accepting connections and waiting for all of them
//! ([`super::serve`]), what a request does ([`super::service`]).

use super::StreamExecutor;
use super::forwarded::{Peer, Scheme};
use super::service::{self, ConnShared};
use super::wake_gate::WakeGate;
use crate::dataplane::DataPlane;
use crate::metrics::{Limit, TlsOutcome};
use crate::router::{ListenerKey, Transport};
use http::StatusCode;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto::Builder;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, mpsc, watch};
use tokio::time::{Instant, sleep, sleep_until};
use tokio_rustls::TlsAcceptor;
use tracing::debug;

/// Signals one `serve` call shares with its connections.
#[derive(Debug, Clone)]
pub(crate) struct Signals {
    /// Read per response by the request stack.
    pub draining: Arc<AtomicBool>,
    /// Turns true when the drain starts.
    pub drain: watch::Receiver<bool>,
    /// Turns true when the drain timeout passed: close now.
    pub force: watch::Receiver<bool>,
    /// Held until the connection ends; `serve` waits for all of them.
    pub alive: mpsc::Sender<()>,
}

/// Serves one accepted connection to completion: plaintext, or TLS
/// first when its listener key says so (see `router::Transport`), or
/// closed at once when the listener cannot be served.
pub(crate) async fn serve_connection(
    dp: Arc<DataPlane>,
    builder: Arc<Builder<StreamExecutor>>,
    stream: TcpStream,
    listener: Arc<ListenerKey>,
    signals: Signals,
    slot: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().ok();
    let metrics = Arc::clone(dp.metrics_arc());
    metrics.downstream_connections.inc();
    let transport = dp
        .served()
        .map(|served| served.table.transport(&listener))
        .unwrap_or_default();
    match transport {
        Transport::Plaintext => {
            let transport = Accepted {
                scheme: "http",
                sni: None,
                peer,
            };
            serve_http(dp, builder, stream, transport, listener, signals).await;
        }
        Transport::Refused(why) => {
            metrics.record_tls(TlsOutcome::Refused);
            debug!(port = listener.port, %why, "closing client connection: its listener cannot be served");
        }
        Transport::Tls(config) => {
            // Boxed: a TLS stream and its handshake make the future twice
            // the size, and every plaintext connection's task would carry
            // that space too.
            Box::pin(serve_tls(
                dp, builder, stream, config, peer, listener, signals,
            ))
            .await;
        }
    }
    // The slot first: once the gauge shows this connection gone, a new
    // one must find room.
    drop(slot);
    metrics.downstream_connections.dec();
}

/// Terminates TLS on `stream` within the header read timeout, then serves
/// HTTP over it.
async fn serve_tls(
    dp: Arc<DataPlane>,
    builder: Arc<Builder<StreamExecutor>>,
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    peer: Option<SocketAddr>,
    listener: Arc<ListenerKey>,
    signals: Signals,
) {
    let metrics = Arc::clone(dp.metrics_arc());
    let timeout = dp.settings().header_read_timeout;
    let handshake = TlsAcceptor::from(config).accept(stream);
    match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(tls)) => {
            metrics.record_tls(TlsOutcome::Handshake);
            let transport = Accepted {
                scheme: "https",
                sni: tls
                    .get_ref()
                    .1
                    .server_name()
                    .map(|name| name.to_ascii_lowercase().into_boxed_str()),
                peer,
            };
            serve_http(dp, builder, tls, transport, listener, signals).await;
        }
        Ok(Err(error)) => {
            metrics.record_tls(TlsOutcome::Failed);
            debug!(%error, "closing client connection: TLS handshake failed");
        }
        Err(_) => {
            metrics.record_tls(TlsOutcome::Timeout);
            debug!("closing client connection: no TLS handshake within the header read timeout");
        }
    }
}

/// What the connection is, below HTTP.
struct Accepted {
    /// `https` over TLS, else `http`.
    scheme: Scheme,
    /// The server name the TLS client asked for (SNI), lower-cased once
    /// here rather than per request.
    sni: Option<Box<str>>,
    /// The client's address.
    peer: Option<SocketAddr>,
}

/// Serves HTTP on `io` (the TCP stream or the TLS stream over it) until
/// the connection ends, per the module's drain protocol.
async fn serve_http<IO>(
    dp: Arc<DataPlane>,
    builder: Arc<Builder<StreamExecutor>>,
    io: IO,
    transport: Accepted,
    listener: Arc<ListenerKey>,
    signals: Signals,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Signals {
        draining,
        mut drain,
        mut force,
        alive,
    } = signals;
    let _alive = alive;
    let Accepted { scheme, sni, peer } = transport;
    let shared = Arc::new(ConnShared {
        peer: peer.map(|addr| Peer::new(addr, scheme)),
        scheme,
        sni,
        client: peer,
        listener,
        draining,
        saw_h2: AtomicBool::new(false),
        saw_request: AtomicBool::new(false),
        tunnel: Mutex::new(None),
    });
    let metrics = Arc::clone(dp.metrics_arc());

    let svc_dp = Arc::clone(&dp);
    let svc_shared = Arc::clone(&shared);
    let svc = hyper::service::service_fn(move |req| {
        let dp = Arc::clone(&svc_dp);
        let shared = Arc::clone(&svc_shared);
        async move { Ok::<_, Infallible>(service::handle(dp, shared, req).await) }
    });
    // With upgrades: a 101 hands the connection to its tunnel (below).
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    tokio::pin!(conn);

    let settings = dp.settings();
    // hyper's header read timeout starts only once it knows the protocol;
    // a client that connects and stays silent would otherwise hold the
    // connection forever.
    let watchdog = sleep(settings.header_read_timeout);
    tokio::pin!(watchdog);
    let mut watching = true;
    let grace = sleep_until(Instant::now() + settings.drain_timeout);
    tokio::pin!(grace);
    let mut draining = false;
    let mut shut_down = false;
    let mut force_closed = false;
    if *drain.borrow() {
        // Accepted from the backlog after the drain began.
        draining = true;
        grace
            .as_mut()
            .reset(Instant::now() + settings.drain_idle_grace);
    }

    // The connection's own signals, polled only when one of them fired
    // (`wake_gate`): the task wakes several times per request, and
    // re-polling them each time cost as much as routing a request.
    let gate = WakeGate::new();
    loop {
        // Scoped: the signals are borrowed until `control` is dropped.
        let event = {
            let control = async {
                tokio::select! {
                    _ = &mut watchdog, if watching => Control::Watchdog,
                    _ = drain.changed(), if !draining => Control::Drain,
                    _ = &mut grace, if draining && !shut_down => Control::Grace,
                    _ = force.changed(), if !force_closed => Control::Force,
                    else => std::future::pending().await,
                }
            };
            tokio::pin!(control);
            tokio::select! {
                biased;
                result = conn.as_mut() => {
                    if let Err(error) = result {
                        if let Some(limit) = limit_hit(&*error) {
                            metrics.record_limit_hit(limit);
                        }
                        if let Some(log) = dp.access_log()
                            && let Some(status) = refused_head(&*error)
                        {
                            log.refused(&shared.listener, peer, status, &error);
                        }
                        debug!(%error, "client connection ended with an error");
                    }
                    break;
                }
                event = gate.gated(control.as_mut()) => event,
            }
        };
        match event {
            Control::Watchdog => {
                watching = false;
                if !shared.saw_request.load(Ordering::Relaxed) {
                    metrics.record_limit_hit(Limit::HeaderTimeout);
                    debug!("closing client connection: no request within the header read timeout");
                    break;
                }
            }
            Control::Drain => {
                draining = true;
                if shared.saw_h2.load(Ordering::Relaxed) {
                    conn.as_mut().graceful_shutdown();
                    shut_down = true;
                } else {
                    grace
                        .as_mut()
                        .reset(Instant::now() + settings.drain_idle_grace);
                }
            }
            Control::Grace => {
                // Requests in flight still finish; idle connections close.
                conn.as_mut().graceful_shutdown();
                shut_down = true;
            }
            Control::Force => {
                force_closed = true;
                if *force.borrow() {
                    debug!("closing client connection: drain timeout passed");
                    break;
                }
            }
        }
    }
    // A 101 ended HTTP on the connection and left a tunnel: still this
    // connection (slot, gauge, drain), closed at the drain deadline.
    if let Some(tunnel) = shared.take_tunnel() {
        if *force.borrow() {
            debug!("closing tunnel: drain timeout passed");
        } else {
            tokio::select! {
                () = tunnel.run() => {}
                () = forced(&mut force) => debug!("closing tunnel: drain timeout passed"),
            }
        }
    }
}

/// Which of a connection's own signals fired.
enum Control {
    /// The first-request watchdog's time is up.
    Watchdog,
    /// The proxy started draining.
    Drain,
    /// An HTTP/1 connection's drain grace period ended.
    Grace,
    /// The drain deadline signal changed.
    Force,
}

/// Resolves once `force` says the drain deadline passed; never if `serve`
/// went away without saying so.
async fn forced(force: &mut watch::Receiver<bool>) {
    if force.wait_for(|forced| *forced).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The status hyper answered a request head it could not take with, when
/// it ended a connection with `error` for that: 431 for a head over the
/// limit (also for a request target over hyper's own 64 KiB limit, which
/// it answers 414), 400 for one it could not parse.
fn refused_head(error: &(dyn std::error::Error + 'static)) -> Option<StatusCode> {
    let error = error.downcast_ref::<hyper::Error>()?;
    if error.is_parse_too_large() {
        Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
    } else if error.is_parse() && !error.is_parse_version_h2() {
        Some(StatusCode::BAD_REQUEST)
    } else {
        None
    }
}

/// The limit hyper enforced when it ended a connection with `error`, if
/// any. hyper has already written its answer (431, or nothing for a
/// timeout); this error is the only trace of it the proxy gets.
fn limit_hit(error: &(dyn std::error::Error + 'static)) -> Option<Limit> {
    let error = error.downcast_ref::<hyper::Error>()?;
    if error.is_parse_too_large() {
        Some(Limit::HeaderSize)
    } else if error.is_timeout() {
        Some(Limit::HeaderTimeout)
    } else {
        None
    }
}
