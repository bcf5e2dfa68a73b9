//! Sending one request to a backend: endpoint choice, connection, timeout,
//! safe retries, outlier feedback, and handing the connection back to its
//! pool when the response body ends.
//!
//! The request given here is final (headers edited, hop-by-hop headers
//! stripped, origin-form URI, Host set): shaping it is the server's job.
//!
//! Timing: the backend is timed from the end of the client's request body
//! ([`Upload`]), not from the request head, so a slow upload is never a
//! slow backend. While the body is still arriving, the request timeout
//! runs only while the proxy waits on the backend to take the bytes it
//! already has; a client that stalls is cut off by the body's own idle
//! timeout and the request ends as the client's fault
//! ([`ProxyError::ClientTimeout`], 408), never as an endpoint failure.
//!
//! Responses with both `Content-Length` and `Transfer-Encoding` lose the
//! `Content-Length` (RFC 9112 §6.1: the body is framed by the transfer
//! coding, which hyper decoded) and their connection is not reused: a
//! backend that frames ambiguously may have meant the other framing, and
//! whatever follows on that connection cannot be trusted.
//!
//! A `101 Switching Protocols` is not a response with a body: it is
//! handed back as [`Answer::Switched`], and its connection never returns to
//! the pool — after the 101 it speaks another protocol, and it belongs to
//! the tunnel the server builds on it (or is closed).

use super::Backend;
use super::endpoint::{Checkout, Endpoint, InFlight, Sender};
use crate::body::{BoxError, ProxyBody};
use crate::error::{ConnectError, ProxyError};
use bytes::Bytes;
use http::header;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::debug;

/// How the client's request body is coming along: fed by the server's body
/// wrapper, read by [`forward_timed`] to time the backend.
#[derive(Debug)]
pub struct Upload {
    state: Mutex<UploadState>,
    changed: Notify,
}

#[derive(Debug, Clone, Copy)]
struct UploadState {
    /// The body ended (or broke off).
    ended: bool,
    /// The body idled out waiting on the client.
    stalled: bool,
    /// The proxy is waiting for the client's next bytes: time the backend
    /// is not charged for.
    waiting_on_client: bool,
    /// When the body last moved (the backend's clock runs from here while
    /// the proxy is not waiting on the client).
    since: Instant,
}

impl Upload {
    /// A body that has not started arriving.
    pub fn new() -> Arc<Upload> {
        Arc::new(Upload {
            state: Mutex::new(UploadState {
                ended: false,
                stalled: false,
                waiting_on_client: false,
                since: Instant::now(),
            }),
            changed: Notify::new(),
        })
    }

    fn update(&self, f: impl FnOnce(&mut UploadState) -> bool) {
        let notify = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut state)
        };
        if notify {
            self.changed.notify_waiters();
        }
    }

    fn snapshot(&self) -> UploadState {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The proxy now waits for the client's next bytes.
    pub(crate) fn waiting_on_client(&self) {
        self.update(|s| {
            let was = s.waiting_on_client;
            s.waiting_on_client = true;
            !was
        });
    }

    /// A frame of the body arrived.
    pub(crate) fn progressed(&self) {
        self.update(|s| {
            let was = s.waiting_on_client;
            s.waiting_on_client = false;
            s.since = Instant::now();
            was
        });
    }

    /// The body ended, or the client broke it off.
    pub(crate) fn ended(&self) {
        self.update(|s| {
            let was = s.ended;
            s.ended = true;
            !was
        });
    }

    /// The client paused longer than the body idle timeout; the body ends
    /// with an error.
    pub(crate) fn stalled(&self) {
        self.update(|s| {
            let was = s.stalled;
            s.stalled = true;
            s.ended = true;
            !was
        });
    }

    /// Whether the body idled out on the client.
    pub fn is_stalled(&self) -> bool {
        self.snapshot().stalled
    }
}

/// What a backend answered.
#[derive(Debug)]
pub enum Answer {
    /// An ordinary response; its body hands the connection back to the
    /// pool when it ends.
    Response {
        /// The response.
        response: Response<ProxyBody>,
        /// The endpoint that answered.
        endpoint: SocketAddr,
    },
    /// `101 Switching Protocols`: the connection left the pool for good.
    Switched(Switched),
}

/// A backend's `101 Switching Protocols` and the connection it switched.
#[derive(Debug)]
pub struct Switched {
    /// The 101 head (its body is empty). [`hyper::upgrade::on`] on it
    /// yields the switched connection, once hyper has handed it over.
    pub response: Response<Incoming>,
    /// The endpoint that answered.
    pub endpoint: SocketAddr,
    /// Holds the connection and its share of the endpoint's load.
    pub lease: Lease,
}

/// A switched upstream connection's hold on its endpoint: counted as one
/// outstanding request (so balancing sees long-lived tunnels) until
/// dropped. It holds the endpoint, not the backend: a tunnel outliving a
/// cutover keeps one retired endpoint's bookkeeping, never a pool.
#[derive(Debug)]
pub struct Lease {
    /// Kept until the switch completes: hyper hands the connection over
    /// when its connection task sees the 101 through, which a dropped
    /// request handle could cut short.
    _sender: Sender,
    _in_flight: InFlight,
}

/// How the first phase of sending (while the body still arrives) ended.
enum Sending<T> {
    /// The send finished (a response head, or an error) first.
    Done(T),
    /// The body ended: time the backend from now.
    BodyEnded,
    /// The backend took no bytes for `timeout` while the proxy had some.
    BackendStalled,
}

/// Drives `send` until the body ends, the backend answers, or the backend
/// stops taking the body for `timeout`.
async fn while_uploading<F: Future>(
    send: &mut Pin<&mut F>,
    upload: &Upload,
    timeout: Duration,
) -> Sending<F::Output> {
    loop {
        let notified = upload.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let state = upload.snapshot();
        if state.ended {
            return Sending::BodyEnded;
        }
        let deadline = state.since + timeout;
        if !state.waiting_on_client && Instant::now() >= deadline {
            return Sending::BackendStalled;
        }
        tokio::select! {
            biased;
            out = send.as_mut() => return Sending::Done(out),
            () = &mut notified => {}
            () = tokio::time::sleep_until(deadline), if !state.waiting_on_client => {}
        }
    }
}

/// Sends `req` to `backend`. Retries only attempts that failed before any
/// byte of the request was written: a failed connect is retried on an
/// endpoint not tried yet; a pooled connection that hyper finds closed
/// before writing is retried on a new connection (any endpoint). One more
/// case is retried although the request was written: an idempotent,
/// bodiless request whose reused connection failed before any answer
/// (the backend closed it as the request crossed: the keep-alive race).
/// `client_body_failed` is set by
/// the downstream body wrapper when the client broke the body off, so the
/// error is blamed on the client rather than the backend.
/// A 101 comes back as its head with an empty body, its connection closed
/// (a caller that wants to tunnel uses [`forward_timed`]).
pub async fn forward(
    backend: &Arc<Backend>,
    req: Request<ProxyBody>,
    client_body_failed: &AtomicBool,
) -> Result<Response<ProxyBody>, ProxyError> {
    match forward_timed(backend, req, client_body_failed, None).await? {
        Answer::Response { response, .. } => Ok(response),
        Answer::Switched(switched) => {
            let (parts, _) = switched.response.into_parts();
            Ok(Response::from_parts(parts, crate::body::empty()))
        }
    }
}

/// [`forward`], timing the backend from the end of the client's body as
/// `upload` reports it (`None`: the body is complete already), and handing
/// a 101 back with its connection.
pub async fn forward_timed(
    backend: &Arc<Backend>,
    req: Request<ProxyBody>,
    client_body_failed: &AtomicBool,
    upload: Option<&Arc<Upload>>,
) -> Result<Answer, ProxyError> {
    let ctx = backend.context();
    let settings = &ctx.settings;
    let mut req = req;
    // Endpoints an earlier attempt failed on; the current attempt's is
    // added only when another attempt follows, so that the usual single
    // attempt allocates nothing.
    let mut tried: Vec<SocketAddr> = Vec::new();
    let mut failed_on: Option<SocketAddr> = None;
    let mut last_error: Option<ProxyError> = None;
    for attempt in 0..settings.max_attempts.max(1) {
        tried.extend(failed_on.take());
        let Some(endpoint) = backend.select(&tried) else {
            break;
        };
        if attempt > 0 {
            ctx.metrics.retries.get_or_create(backend.labels()).inc();
        }
        failed_on = Some(endpoint.addr);
        let in_flight = endpoint.begin();
        let (mut sender, reused) = match endpoint.checkout(backend.labels()).await {
            Ok(Checkout { sender, reused }) => (sender, reused),
            Err(source) => {
                ctx.metrics
                    .connect_errors
                    .get_or_create(backend.labels())
                    .inc();
                endpoint.record_failure();
                last_error = Some(ProxyError::Connect {
                    backend: backend.key().clone(),
                    endpoint: endpoint.addr,
                    cause: source,
                });
                continue;
            }
        };
        // What to send again should a reused connection turn out closed
        // under the request (see `replayable`); only then is the head
        // copied, and never for a request with a body.
        let replay = if reused { replayable(&req) } else { None };
        let timeout = settings.request_timeout;
        // `None`: the backend ran out of time.
        let (sent, started) = {
            let begun = Instant::now();
            let send = sender.try_send_request(req);
            tokio::pin!(send);
            let first = match upload {
                Some(upload) => while_uploading(&mut send, upload, timeout).await,
                None => Sending::BodyEnded,
            };
            match first {
                Sending::Done(out) => (Some(out), begun),
                Sending::BodyEnded => {
                    let started = Instant::now();
                    (
                        tokio::time::timeout(timeout, send.as_mut()).await.ok(),
                        started,
                    )
                }
                Sending::BackendStalled => {
                    debug!(backend = %backend.key(), endpoint = %endpoint.addr, "backend stopped reading the request body");
                    (None, Instant::now())
                }
            }
        };
        let stalled = || upload.is_some_and(|u| u.is_stalled());
        match sent {
            None => {
                endpoint.record_failure();
                return Err(ProxyError::Timeout {
                    backend: backend.key().clone(),
                    endpoint: endpoint.addr,
                    timeout,
                });
            }
            Some(Ok(resp)) => {
                endpoint.record_success();
                backend.observe_latency(started.elapsed().as_secs_f64());
                if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
                    return Ok(Answer::Switched(Switched {
                        response: resp,
                        endpoint: endpoint.addr,
                        lease: Lease {
                            _sender: sender,
                            _in_flight: in_flight,
                        },
                    }));
                }
                let addr = endpoint.addr;
                return Ok(Answer::Response {
                    response: pooled_response(
                        resp,
                        sender,
                        endpoint,
                        in_flight,
                        backend,
                        upload.cloned(),
                    ),
                    endpoint: addr,
                });
            }
            Some(Err(_)) if stalled() => {
                // The client's pause ended the body: its fault, and the
                // endpoint did nothing wrong.
                return Err(ProxyError::ClientTimeout {
                    backend: backend.key().clone(),
                    idle: settings.request_body_idle_timeout,
                });
            }
            Some(Err(mut error)) => match error.take_message() {
                Some(unsent) => {
                    // hyper gave the request back: nothing was written. The
                    // pooled connection went stale, not the endpoint, so
                    // the endpoint stays eligible (a new connection).
                    req = unsent;
                    failed_on = None;
                    last_error = Some(ProxyError::Connect {
                        backend: backend.key().clone(),
                        endpoint: endpoint.addr,
                        cause: ConnectError::Http(error.into_error()),
                    });
                }
                None => {
                    let source = error.into_error();
                    if client_body_failed.load(Ordering::Relaxed) {
                        return Err(ProxyError::DownstreamBody {
                            backend: backend.key().clone(),
                            cause: source,
                        });
                    }
                    if let Some(again) = replay {
                        // The request was written, no answer came, and the
                        // connection had been kept alive: most likely the
                        // backend closed it as the request crossed, which
                        // says nothing of the endpoint. The request is
                        // idempotent and bodiless, so it goes again, on a
                        // new connection or another endpoint.
                        debug!(backend = %backend.key(), endpoint = %endpoint.addr, error = %source, "reused connection failed before any answer; sending the request again");
                        req = again;
                        failed_on = None;
                        last_error = Some(ProxyError::Upstream {
                            backend: backend.key().clone(),
                            endpoint: endpoint.addr,
                            cause: source,
                        });
                        continue;
                    }
                    endpoint.record_failure();
                    return Err(ProxyError::Upstream {
                        backend: backend.key().clone(),
                        endpoint: endpoint.addr,
                        cause: source,
                    });
                }
            },
        }
    }
    Err(last_error.unwrap_or_else(|| ProxyError::NoReadyEndpoint {
        backend: backend.key().clone(),
    }))
}

/// A copy of `req` to send again should its connection fail before any
/// answer, when that is safe: the method is idempotent (RFC 9110 §9.2.2:
/// a client may repeat it automatically when the connection fails before
/// the response is read) and the body is empty (nothing of it needs
/// keeping). `None` otherwise.
fn replayable(req: &Request<ProxyBody>) -> Option<Request<ProxyBody>> {
    if !req.method().is_idempotent() || !req.body().is_end_stream() {
        return None;
    }
    let mut copy = Request::new(crate::body::empty());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    Some(copy)
}

fn pooled_response(
    resp: Response<Incoming>,
    sender: Sender,
    endpoint: Arc<Endpoint>,
    in_flight: InFlight,
    backend: &Arc<Backend>,
    upload: Option<Arc<Upload>>,
) -> Response<ProxyBody> {
    let (mut parts, incoming) = resp.into_parts();
    let mut reusable = true;
    if parts.headers.contains_key(header::TRANSFER_ENCODING)
        && parts.headers.remove(header::CONTENT_LENGTH).is_some()
    {
        debug!(backend = %backend.key(), endpoint = %endpoint.addr, "response had Content-Length and Transfer-Encoding: Content-Length removed, connection not reused");
        reusable = false;
    }
    let mut body = PooledBody {
        inner: incoming,
        conn: Some((sender, endpoint)),
        reusable,
        _in_flight: in_flight,
        backend: Arc::clone(backend),
        upload,
    };
    if body.inner.is_end_stream() {
        // hyper never polls a body that is already at its end, so hand the
        // connection back now.
        body.release();
    }
    Response::from_parts(parts, body.boxed_unsync())
}

/// An upstream response body that returns its connection to the pool when
/// it ends and counts as outstanding load until dropped. Dropped before its
/// end, the connection is dropped too (hyper closes it: it is mid-message).
struct PooledBody {
    inner: Incoming,
    conn: Option<(Sender, Arc<Endpoint>)>,
    /// `false`: close the connection at the end instead of pooling it.
    reusable: bool,
    _in_flight: InFlight,
    backend: Arc<Backend>,
    /// The client's upload, when it may still be arriving: a body that
    /// breaks because the client stalled is the client's fault.
    upload: Option<Arc<Upload>>,
}

impl PooledBody {
    fn release(&mut self) {
        if let Some((sender, endpoint)) = self.conn.take()
            && self.reusable
        {
            endpoint.release(sender);
        }
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => {
                // The server stops polling once `is_end_stream` says so, so
                // release as soon as the last frame is in hand.
                if this.inner.is_end_stream() {
                    this.release();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(error)) => {
                this.conn = None;
                let ctx = this.backend.context();
                if this.upload.as_ref().is_some_and(|u| u.is_stalled()) {
                    // The upstream connection failed because the client's
                    // body did: the response is cut (a reset for the
                    // client), and the client is to blame.
                    ctx.metrics.record_client_body_timeout();
                } else {
                    ctx.metrics
                        .upstream_body_errors
                        .get_or_create(this.backend.labels())
                        .inc();
                }
                Poll::Ready(Some(Err(error.into())))
            }
            None => {
                this.release();
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[tokio::test(start_paused = true)]
    async fn a_backend_that_stops_taking_the_body_runs_out_of_time() {
        let upload = Upload::new();
        upload.progressed();
        let send = std::future::pending::<()>();
        tokio::pin!(send);
        let started = Instant::now();
        let out = while_uploading(&mut send, &upload, TIMEOUT).await;
        assert!(matches!(out, Sending::BackendStalled));
        assert_eq!(started.elapsed(), TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn time_spent_waiting_on_the_client_is_not_the_backends() {
        let upload = Upload::new();
        upload.waiting_on_client();
        let feed = Arc::clone(&upload);
        tokio::spawn(async move {
            // The client pauses far longer than the request timeout, then
            // the backend takes the last bytes within it.
            tokio::time::sleep(TIMEOUT * 12).await;
            feed.progressed();
            tokio::time::sleep(TIMEOUT - Duration::from_secs(1)).await;
            feed.ended();
        });
        let send = std::future::pending::<()>();
        tokio::pin!(send);
        let started = Instant::now();
        let out = while_uploading(&mut send, &upload, TIMEOUT).await;
        assert!(matches!(out, Sending::BodyEnded));
        assert_eq!(started.elapsed(), TIMEOUT * 13 - Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_before_the_body_ends_is_taken() {
        let upload = Upload::new();
        upload.waiting_on_client();
        let send = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            7
        };
        tokio::pin!(send);
        let out = while_uploading(&mut send, &upload, TIMEOUT).await;
        assert!(matches!(out, Sending::Done(7)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_ends_the_wait_as_the_clients() {
        let upload = Upload::new();
        upload.waiting_on_client();
        upload.stalled();
        let send = std::future::pending::<()>();
        tokio::pin!(send);
        let out = while_uploading(&mut send, &upload, TIMEOUT).await;
        assert!(matches!(out, Sending::BodyEnded));
        assert!(upload.is_stalled());
    }
}
