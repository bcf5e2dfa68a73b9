//! One upstream endpoint (`ip:port`, probed at one health path): its
//! keep-alive connection pool, outstanding-request count, health and
//! ejection state — shared by every backend (Service port) whose endpoint
//! set lists it (see `upstream::shared`), so N Services on the same pods
//! cost one health check and one pool, not N. It keeps the list of the
//! backends using it, for their healthy-endpoint gauges and for retiring
//! it when the last one lets go.
//!
//! The pool is our own rather than hyper-util's legacy client because the
//! retry rule needs the seam the legacy client hides: a connection is
//! obtained *before* the request is handed over, so a connect failure
//! leaves the request (and its streaming body) in our hands to send to
//! another endpoint. HTTP/1.1 idle connections are reused LIFO, which
//! keeps about one upstream connection per concurrent request. An endpoint
//! whose Service port says `appProtocol: kubernetes.io/h2c` is spoken to
//! over one HTTP/2 (prior knowledge) connection that every request shares
//! as a stream, opened on first use and again once it closed.
//!
//! Not here: choosing among endpoints ([`super::balance`]), the request
//! retry loop ([`super::forward`]).

use super::grpc_health;
use super::health::{HealthStatus, HealthTracker};
use super::outlier::OutlierDetector;
use super::tls::UpstreamConnector;
use super::{BackendInfo, Context};
use crate::body::{self, ProxyBody};
use crate::error::ConnectError;
use crate::metrics::BackendLabels;
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::{TrySendError, http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use switchyard_proto::model::UpstreamProtocol;
use switchyard_proto::model::gateway_api::BackendTransport;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// A connection to an endpoint, ready for one request: an HTTP/1.1
/// connection of the pool, or a handle on the endpoint's shared HTTP/2
/// connection.
#[derive(Debug)]
pub enum Sender {
    /// HTTP/1.1: one request at a time, back to the pool after.
    Http1(http1::SendRequest<ProxyBody>),
    /// HTTP/2 (prior knowledge, or `h2` over TLS): a stream on the shared
    /// connection.
    Http2 {
        /// The shared connection's handle.
        sender: http2::SendRequest<ProxyBody>,
        /// Whether the connection is TLS: the request's `:scheme` is then
        /// `https`.
        tls: bool,
    },
}

impl Sender {
    /// Sends `req`; hands it back untouched when nothing of it was written
    /// (a stale pooled connection), so it can be sent elsewhere.
    pub fn try_send_request(
        &mut self,
        req: Request<ProxyBody>,
    ) -> impl Future<Output = Result<Response<Incoming>, TrySendError<Request<ProxyBody>>>> {
        match self {
            Sender::Http1(s) => futures::future::Either::Left(s.try_send_request(req)),
            Sender::Http2 { sender, tls } => {
                futures::future::Either::Right(sender.try_send_request(for_http2(req, *tls)))
            }
        }
    }

    /// Whether the connection is gone.
    pub fn is_closed(&self) -> bool {
        match self {
            Sender::Http1(s) => s.is_closed(),
            Sender::Http2 { sender, .. } => sender.is_closed(),
        }
    }

    fn is_ready(&self) -> bool {
        match self {
            Sender::Http1(s) => s.is_ready(),
            Sender::Http2 { sender, .. } => sender.is_ready(),
        }
    }

    async fn ready(&mut self) -> hyper::Result<()> {
        match self {
            Sender::Http1(s) => s.ready().await,
            Sender::Http2 { sender, .. } => sender.ready().await,
        }
    }
}

/// A connection taken for one request, and whether it was open before this
/// request asked for it: a kept-alive HTTP/1.1 connection from the pool or
/// the endpoint's already open HTTP/2 connection. Only such a connection can
/// have been closed by the backend (its idle timeout, its pod stopping)
/// while the proxy still counted it open, the request crossing the close on
/// the wire; a connection opened for the request cannot.
#[derive(Debug)]
pub struct Checkout {
    /// The connection.
    pub sender: Sender,
    /// Whether it was open before this request.
    pub reused: bool,
}

impl Checkout {
    fn reused(sender: Sender) -> Checkout {
        Checkout {
            sender,
            reused: true,
        }
    }
}

/// An HTTP/2 request names its target in `:scheme` and `:authority`,
/// which the h2 layer takes from the URI: the origin-form request the
/// server stack hands over gets `http://` (`https://` over TLS) and the
/// authority of its `Host` (which HTTP/2 then does not repeat).
fn for_http2(req: Request<ProxyBody>, tls: bool) -> Request<ProxyBody> {
    let (mut parts, body) = req.into_parts();
    if parts.uri.scheme().is_none() {
        let authority = parts
            .headers
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.parse::<http::uri::Authority>().ok());
        if let Some(authority) = authority {
            let mut uri = std::mem::take(&mut parts.uri).into_parts();
            uri.scheme = Some(if tls {
                http::uri::Scheme::HTTPS
            } else {
                http::uri::Scheme::HTTP
            });
            uri.authority = Some(authority);
            if uri.path_and_query.is_none() {
                uri.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
            }
            if let Ok(absolute) = http::Uri::from_parts(uri) {
                parts.uri = absolute;
                parts.headers.remove(http::header::HOST);
            }
        }
    }
    // gRPC servers expect `te: trailers` (the one TE value HTTP/2
    // allows), which hop-by-hop hygiene removed from the client's request.
    let grpc = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/grpc"));
    if grpc {
        parts
            .headers
            .insert(http::header::TE, http::HeaderValue::from_static("trailers"));
    }
    parts.version = http::Version::HTTP_2;
    Request::from_parts(parts, body)
}

/// A new connection's stream: as connected, or after its TLS handshake.
enum Secured {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

struct IdleConn {
    sender: http1::SendRequest<ProxyBody>,
    since: Instant,
}

/// One endpoint of one backend.
pub struct Endpoint {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The path health checks request.
    health_path: String,
    /// What the proxy speaks to it.
    protocol: UpstreamProtocol,
    /// Plaintext, TLS per a BackendTLSPolicy, or refused.
    transport: BackendTransport,
    /// The TLS client when `transport` asks for TLS; `Err` (why) when the
    /// endpoint must not be connected to.
    connector: Result<Option<UpstreamConnector>, String>,
    /// The shared HTTP/2 connection (h2c endpoints only), once opened.
    h2: Mutex<Option<http2::SendRequest<ProxyBody>>>,
    /// The backends whose endpoint sets list it. Empty only once retired.
    users: Mutex<Vec<Arc<BackendInfo>>>,
    ctx: Arc<Context>,
    outstanding: AtomicUsize,
    /// Mirror of `health.status() == Healthy`, read lock-free per request.
    healthy: AtomicBool,
    /// A probe of its own passed while it was healthy. Only then does its
    /// health count as readiness evidence: an endpoint seeded with its
    /// predecessor's health (a new health path, protocol or transport for
    /// the same address) takes traffic at once, so an active route drops
    /// nothing, but a transition waiting on it waits for a probe over the
    /// new data path.
    vouched: AtomicBool,
    health: Mutex<HealthTracker>,
    outlier: Mutex<OutlierDetector>,
    /// Idle HTTP/1.1 connections, one list per thread slot
    /// (`server::workers::slots`: each worker's, and the main thread's):
    /// a connection's task runs on the thread that opened it, and a
    /// request reuses one of its own thread's.
    idle: Box<[Mutex<Vec<IdleConn>>]>,
    retired: AtomicBool,
    checker: Mutex<Option<AbortHandle>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.addr)
            .field("health_path", &self.health_path)
            .field("protocol", &self.protocol)
            .field("tls", &matches!(self.transport, BackendTransport::Tls(_)))
            .field("healthy", &self.is_healthy())
            .field("outstanding", &self.outstanding())
            .finish()
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked (all
/// critical sections here are single assignments).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts a request against an endpoint's load until dropped.
#[derive(Debug)]
pub struct InFlight {
    endpoint: Arc<Endpoint>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.endpoint.outstanding.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Endpoint {
    pub(crate) fn new(
        addr: SocketAddr,
        health_path: String,
        protocol: UpstreamProtocol,
        transport: BackendTransport,
        ctx: Arc<Context>,
    ) -> Self {
        let connector = match &transport {
            BackendTransport::Plaintext => Ok(None),
            BackendTransport::Tls(tls) => {
                UpstreamConnector::new(tls, protocol.is_http2()).map(Some)
            }
            BackendTransport::Refused(why) => Err(why.clone()),
        };
        if let Err(why) = &connector {
            // Once per endpoint: its health checks then fail quietly, and
            // the backend is never ready, never cut over to.
            warn!(endpoint = %addr, reason = %why, "backend endpoint not connected to: its BackendTLSPolicy cannot be used");
        }
        let idle_lists = (0..crate::server::workers::slots(ctx.settings.workers))
            .map(|_| Mutex::new(Vec::new()))
            .collect();
        Endpoint {
            addr,
            health_path,
            protocol,
            transport,
            connector,
            h2: Mutex::new(None),
            users: Mutex::new(Vec::new()),
            ctx,
            outstanding: AtomicUsize::new(0),
            healthy: AtomicBool::new(false),
            vouched: AtomicBool::new(false),
            health: Mutex::new(HealthTracker::default()),
            outlier: Mutex::new(OutlierDetector::default()),
            idle: idle_lists,
            retired: AtomicBool::new(false),
            checker: Mutex::new(None),
        }
    }

    /// Adds `backend` to the endpoint's users; false (nothing added) when
    /// the endpoint was retired meanwhile — the caller makes a new one.
    pub(crate) fn add_user(&self, backend: &Arc<BackendInfo>) -> bool {
        let mut users = lock(&self.users);
        if self.retired.load(Ordering::Relaxed) {
            return false;
        }
        if !users.iter().any(|u| Arc::ptr_eq(u, backend)) {
            users.push(Arc::clone(backend));
            if self.is_healthy() {
                self.healthy_gauge(&backend.labels).inc();
            }
        }
        true
    }

    /// Removes `backend` from the users; the last one out retires the
    /// endpoint (health checks stop, idle connections close).
    pub(crate) fn remove_user(&self, backend: &Arc<BackendInfo>) {
        let mut users = lock(&self.users);
        let before = users.len();
        users.retain(|u| !Arc::ptr_eq(u, backend));
        if users.len() < before && self.is_healthy() {
            self.healthy_gauge(&backend.labels).dec();
        }
        if users.is_empty() {
            self.retire_locked();
        }
    }

    /// The path its health checks request.
    pub fn health_path(&self) -> &str {
        &self.health_path
    }

    /// What the proxy speaks to it.
    pub fn protocol(&self) -> UpstreamProtocol {
        self.protocol
    }

    /// Plaintext, TLS (with which policy), or refused.
    pub fn transport(&self) -> &BackendTransport {
        &self.transport
    }

    fn is_tls(&self) -> bool {
        matches!(self.connector, Ok(Some(_)))
    }

    /// How many backends use it.
    pub fn users(&self) -> usize {
        lock(&self.users).len()
    }

    /// Starts as healthy as `other` (the same address probed at another
    /// path): a Service whose health path changes keeps its endpoints'
    /// health until the new path's first probe — which runs at once — says
    /// otherwise, instead of taking them out of traffic meanwhile.
    pub(crate) fn seed_health_from(&self, other: &Endpoint) {
        let tracker = lock(&other.health).clone();
        let healthy = tracker.status() == HealthStatus::Healthy;
        *lock(&self.health) = tracker;
        self.healthy.store(healthy, Ordering::Relaxed);
    }

    fn healthy_gauge(&self, labels: &BackendLabels) -> prometheus_client::metrics::gauge::Gauge {
        self.ctx
            .metrics
            .healthy_endpoints
            .get_or_create(labels)
            .clone()
    }

    /// Whether the proxy's own health check currently passes (or, until
    /// its first probe, its predecessor's did: see [`Endpoint::is_vouched`]).
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Whether a probe of its own has passed: its health is then readiness
    /// evidence, not only a reason to send it traffic.
    pub fn is_vouched(&self) -> bool {
        self.vouched.load(Ordering::Relaxed)
    }

    /// Health status as the checker last saw it.
    pub fn health_status(&self) -> HealthStatus {
        lock(&self.health).status()
    }

    /// Whether passive outlier detection has it out of rotation.
    pub fn is_ejected(&self, now: Instant) -> bool {
        lock(&self.outlier).is_ejected(now)
    }

    /// Requests in flight on it.
    pub fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Relaxed)
    }

    /// Starts counting one request against this endpoint.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.outstanding.fetch_add(1, Ordering::Relaxed);
        InFlight {
            endpoint: Arc::clone(self),
        }
    }

    pub(crate) fn set_checker(&self, handle: Option<AbortHandle>) {
        *lock(&self.checker) = handle;
    }

    /// A connection ready for one request: for HTTP/1.1 the most recently
    /// used idle one that is still open, or a new one; for h2c the shared
    /// connection, or a new one when it closed (counted as opened for
    /// `opener`).
    pub async fn checkout(&self, opener: &BackendLabels) -> Result<Checkout, ConnectError> {
        if self.protocol.is_http2() {
            return self.checkout_h2(opener).await;
        }
        let settings = &self.ctx.settings;
        loop {
            let candidate = lock(self.idle_here()).pop();
            let Some(conn) = candidate else {
                break;
            };
            if conn.sender.is_closed() || conn.since.elapsed() > settings.pool_idle_timeout {
                continue;
            }
            let mut sender = Sender::Http1(conn.sender);
            if sender.is_ready() {
                return Ok(Checkout::reused(sender));
            }
            // Released a moment ago: hyper flags it ready once its connection
            // task has seen the previous response end. Closed connections
            // error out here, before any byte of a request is written.
            if let Ok(Ok(())) = tokio::time::timeout(settings.connect_timeout, sender.ready()).await
            {
                return Ok(Checkout::reused(sender));
            }
        }
        // Connecting is the cold path and its future (TCP, TLS, the HTTP
        // handshake) the largest part of a request's: boxed, here and in
        // `checkout_h2`, so that every request's future — moved whole when
        // it is spawned or stored — does not carry its space.
        let sender = Box::pin(self.connect_http1(opener)).await?;
        Ok(Checkout {
            sender,
            reused: false,
        })
    }

    async fn checkout_h2(&self, opener: &BackendLabels) -> Result<Checkout, ConnectError> {
        let shared = lock(&self.h2).clone().filter(|s| !s.is_closed());
        let reused = shared.is_some();
        let mut sender = match shared {
            Some(sender) => Sender::Http2 {
                sender,
                tls: self.is_tls(),
            },
            None => {
                let fresh = Box::pin(self.connect_http2(opener)).await?;
                let mut slot = lock(&self.h2);
                // Two requests may have opened one at once: keep the first
                // one stored that is still open, and use it.
                match slot.as_ref().filter(|s| !s.is_closed()) {
                    Some(existing) => Sender::Http2 {
                        sender: existing.clone(),
                        tls: self.is_tls(),
                    },
                    None => {
                        *slot = Some(fresh.clone());
                        Sender::Http2 {
                            sender: fresh,
                            tls: self.is_tls(),
                        }
                    }
                }
            }
        };
        // Waits for room under the server's stream limit; a connection that
        // closed meanwhile errors here, before any byte is written.
        tokio::time::timeout(self.ctx.settings.connect_timeout, sender.ready())
            .await
            .map_err(|_| ConnectError::Timeout(self.ctx.settings.connect_timeout))?
            .map_err(ConnectError::Http)?;
        Ok(Checkout { sender, reused })
    }

    async fn tcp_connect(&self, opener: &BackendLabels) -> Result<TcpStream, ConnectError> {
        if let Err(why) = &self.connector {
            return Err(ConnectError::Refused(why.clone()));
        }
        let timeout = self.ctx.settings.connect_timeout;
        let stream = tokio::time::timeout(timeout, TcpStream::connect(self.addr))
            .await
            .map_err(|_| ConnectError::Timeout(timeout))??;
        // Small request/response exchanges: do not wait for Nagle.
        let _ = stream.set_nodelay(true);
        self.ctx
            .metrics
            .connections_opened
            .get_or_create(opener)
            .inc();
        Ok(stream)
    }

    /// Completes a new connection's TLS handshake when its policy asks for
    /// one, within the connect timeout.
    async fn secure(&self, stream: TcpStream) -> Result<Secured, ConnectError> {
        let Ok(Some(connector)) = &self.connector else {
            return Ok(Secured::Plain(stream));
        };
        let timeout = self.ctx.settings.connect_timeout;
        match tokio::time::timeout(timeout, connector.connect(stream)).await {
            Err(_) => Err(ConnectError::Timeout(timeout)),
            Ok(Err(why)) => Err(ConnectError::Tls(why)),
            Ok(Ok(tls)) => Ok(Secured::Tls(Box::new(tls))),
        }
    }

    async fn connect_http1(&self, opener: &BackendLabels) -> Result<Sender, ConnectError> {
        let stream = self.tcp_connect(opener).await?;
        match self.secure(stream).await? {
            Secured::Plain(plain) => self.handshake_http1(plain).await,
            Secured::Tls(tls) => self.handshake_http1(tls).await,
        }
    }

    async fn handshake_http1<I>(&self, io: I) -> Result<Sender, ConnectError>
    where
        I: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (sender, conn) = http1::Builder::new().handshake(TokioIo::new(io)).await?;
        let addr = self.addr;
        // With upgrades, so that a 101 hands the connection over to the
        // tunnel (`forward::Switched`); for every other response it runs
        // exactly like the plain connection.
        let conn = conn.with_upgrades();
        self.ctx.spawn(async move {
            if let Err(error) = conn.await {
                debug!(%addr, %error, "upstream connection ended with an error");
            }
        });
        Ok(Sender::Http1(sender))
    }

    async fn connect_http2(
        &self,
        opener: &BackendLabels,
    ) -> Result<http2::SendRequest<ProxyBody>, ConnectError> {
        let stream = self.tcp_connect(opener).await?;
        match self.secure(stream).await? {
            Secured::Plain(plain) => self.handshake_http2(plain).await,
            Secured::Tls(tls) => self.handshake_http2(tls).await,
        }
    }

    async fn handshake_http2<I>(&self, io: I) -> Result<http2::SendRequest<ProxyBody>, ConnectError>
    where
        I: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (sender, conn) = http2::Builder::new(TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            .handshake(TokioIo::new(io))
            .await?;
        let addr = self.addr;
        self.ctx.spawn(async move {
            if let Err(error) = conn.await {
                debug!(%addr, %error, "upstream HTTP/2 connection ended with an error");
            }
        });
        Ok(sender)
    }

    /// Returns a connection whose response ended cleanly. Connections of a
    /// retired endpoint are closed instead (dropping the sender closes an
    /// idle hyper connection).
    pub fn release(&self, sender: Sender) {
        // A stream handle needs no returning: the connection is shared.
        let Sender::Http1(sender) = sender else {
            return;
        };
        if self.retired.load(Ordering::Relaxed) || sender.is_closed() {
            return;
        }
        let settings = &self.ctx.settings;
        let mut idle = lock(self.idle_here());
        // Reap from the cold end so connections nobody reuses do not linger.
        let expired = idle
            .iter()
            .take_while(|c| c.sender.is_closed() || c.since.elapsed() > settings.pool_idle_timeout)
            .count();
        idle.drain(..expired);
        if idle.len() < settings.max_idle_per_endpoint {
            idle.push(IdleConn {
                sender,
                since: Instant::now(),
            });
        }
    }

    /// Idle connections in the pool (for tests and debugging).
    pub fn idle_connections(&self) -> usize {
        self.idle.iter().map(|list| lock(list).len()).sum()
    }

    /// The idle list of the worker thread this runs on.
    fn idle_here(&self) -> &Mutex<Vec<IdleConn>> {
        &self.idle[crate::server::workers::current() % self.idle.len()]
    }

    /// One health probe: `GET <health path>` through the pool, healthy when
    /// a response head below 500 arrives within the health timeout.
    pub async fn probe(&self) -> bool {
        // A probe's connection is counted for the first backend using the
        // endpoint (any of them would do; the count is per backend).
        let opener = lock(&self.users).first().map(|u| u.labels.clone());
        let Some(opener) = opener else {
            return false;
        };
        let grpc = self.protocol == UpstreamProtocol::Grpc
            && self.health_path == super::discovery::GRPC_HEALTH_PATH;
        let probe = async {
            let mut sender = self.checkout(&opener).await.ok()?.sender;
            let req = if grpc {
                grpc_health::request(self.addr)?
            } else {
                http::Request::get(self.health_path.as_str())
                    .header(http::header::HOST, self.addr.to_string())
                    .header(http::header::USER_AGENT, "switchyard-health-check")
                    .body(body::empty())
                    .ok()?
            };
            let resp = sender.try_send_request(req).await.ok()?;
            let (head, incoming) = resp.into_parts();
            // Read the body so the connection can serve traffic next.
            let collected = incoming.collect().await.ok();
            if collected.is_some() {
                self.release(sender);
            }
            Some(if grpc {
                collected.is_some_and(|body| grpc_health::serving(&head, body))
            } else {
                head.status.as_u16() < 500
            })
        };
        matches!(
            tokio::time::timeout(self.ctx.settings.health.timeout, probe).await,
            Ok(Some(true))
        )
    }

    pub(crate) fn health_interval(&self) -> Duration {
        self.ctx.settings.health.interval
    }

    /// Feeds one probe result to the thresholds; on a change of
    /// healthy-ness, updates the lock-free flag, the gauge, and wakes
    /// readiness watchers.
    pub(crate) fn record_health(&self, passed: bool) {
        let (changed, healthy_now) = {
            let mut tracker = lock(&self.health);
            let changed = tracker.record(passed, &self.ctx.settings.health);
            (changed, tracker.status() == HealthStatus::Healthy)
        };
        if passed && healthy_now && !self.vouched.swap(true, Ordering::Relaxed) && changed.is_none()
        {
            // A seeded endpoint's own first probe passed: its health now
            // counts as evidence (a change of health notifies below).
            self.ctx.notify_readiness();
        }
        let Some(status) = changed else {
            return;
        };
        if self.retired.load(Ordering::Relaxed) {
            return;
        }
        let users = lock(&self.users);
        let healthy = status == HealthStatus::Healthy;
        let was = self.healthy.swap(healthy, Ordering::Relaxed);
        if was != healthy {
            for user in users.iter() {
                let gauge = self.healthy_gauge(&user.labels);
                if healthy {
                    gauge.inc();
                } else {
                    gauge.dec();
                }
            }
            let backend = users.first().map(|u| u.key.to_string()).unwrap_or_default();
            info!(backend = %backend, backends = users.len(), endpoint = %self.addr, ?status, "endpoint health changed");
            drop(users);
            self.ctx.notify_readiness();
        }
    }

    /// A request through this endpoint got a response head.
    pub fn record_success(&self) {
        lock(&self.outlier).record_success();
    }

    /// A request through this endpoint failed at the gateway level.
    pub fn record_failure(&self) {
        let ejected =
            lock(&self.outlier).record_failure(Instant::now(), &self.ctx.settings.outlier);
        if let Some(length) = ejected {
            let users = lock(&self.users);
            for user in users.iter() {
                self.ctx.metrics.ejections.get_or_create(&user.labels).inc();
            }
            info!(endpoint = %self.addr, backends = users.len(), ?length, "endpoint ejected after consecutive failures");
        }
    }

    /// Whether it was taken out of service (no backend uses it).
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// Takes the endpoint out of service for good, once its last user left
    /// (the caller holds `users`): health checks stop, idle connections
    /// close. Requests already holding it finish normally (its last health
    /// state is kept so a request that picked it a moment ago still goes
    /// through); their connections close when they end.
    fn retire_locked(&self) {
        if self.retired.swap(true, Ordering::Relaxed) {
            return;
        }
        if let Some(handle) = lock(&self.checker).take() {
            handle.abort();
        }
        for list in &self.idle {
            lock(list).clear();
        }
        lock(&self.h2).take();
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(handle) = lock(&self.checker).take() {
            handle.abort();
        }
    }
}
