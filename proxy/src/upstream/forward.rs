//! Sending one request to a backend: endpoint choice, connection, timeout,
//! safe retries, outlier feedback, and handing the connection back to its
//! pool when the response body ends.
//!
//! The request given here is final (headers edited, hop-by-hop headers
//! stripped, origin-form URI, Host set): shaping it is the server's job.

use super::Backend;
use super::endpoint::{Endpoint, InFlight, Sender};
use crate::body::{BoxError, ProxyBody};
use crate::error::{ConnectError, ProxyError};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use tokio::time::Instant;

/// Sends `req` to `backend`. Retries only attempts that failed before any
/// byte of the request was written: a failed connect is retried on an
/// endpoint not tried yet; a pooled connection that hyper finds closed
/// before writing is retried on a new connection (any endpoint).
/// `client_body_failed` is set by
/// the downstream body wrapper when the client broke the body off, so the
/// error is blamed on the client rather than the backend.
pub async fn forward(
    backend: &Arc<Backend>,
    req: Request<ProxyBody>,
    client_body_failed: &AtomicBool,
) -> Result<Response<ProxyBody>, ProxyError> {
    let ctx = backend.context();
    let settings = &ctx.settings;
    let mut req = req;
    let mut tried: Vec<SocketAddr> = Vec::new();
    let mut last_error: Option<ProxyError> = None;
    for attempt in 0..settings.max_attempts.max(1) {
        let Some(endpoint) = backend.select(&tried) else {
            break;
        };
        if attempt > 0 {
            ctx.metrics.retries.get_or_create(backend.labels()).inc();
        }
        tried.push(endpoint.addr);
        let in_flight = endpoint.begin();
        let mut sender = match endpoint.checkout().await {
            Ok(sender) => sender,
            Err(source) => {
                ctx.metrics
                    .connect_errors
                    .get_or_create(backend.labels())
                    .inc();
                endpoint.record_failure();
                last_error = Some(ProxyError::Connect {
                    backend: backend.key().clone(),
                    endpoint: endpoint.addr,
                    source,
                });
                continue;
            }
        };
        let started = Instant::now();
        let sent =
            tokio::time::timeout(settings.request_timeout, sender.try_send_request(req)).await;
        match sent {
            Err(_elapsed) => {
                endpoint.record_failure();
                return Err(ProxyError::Timeout {
                    backend: backend.key().clone(),
                    endpoint: endpoint.addr,
                    timeout: settings.request_timeout,
                });
            }
            Ok(Ok(resp)) => {
                endpoint.record_success();
                ctx.metrics
                    .upstream_latency
                    .get_or_create(backend.labels())
                    .observe(started.elapsed().as_secs_f64());
                return Ok(pooled_response(resp, sender, endpoint, in_flight, backend));
            }
            Ok(Err(mut error)) => match error.take_message() {
                Some(unsent) => {
                    // hyper gave the request back: nothing was written. The
                    // pooled connection went stale, not the endpoint, so
                    // the endpoint stays eligible (a new connection).
                    req = unsent;
                    tried.pop();
                    last_error = Some(ProxyError::Connect {
                        backend: backend.key().clone(),
                        endpoint: endpoint.addr,
                        source: ConnectError::Http(error.into_error()),
                    });
                }
                None => {
                    let source = error.into_error();
                    if client_body_failed.load(Ordering::Relaxed) {
                        return Err(ProxyError::DownstreamBody {
                            backend: backend.key().clone(),
                            source,
                        });
                    }
                    endpoint.record_failure();
                    return Err(ProxyError::Upstream {
                        backend: backend.key().clone(),
                        endpoint: endpoint.addr,
                        source,
                    });
                }
            },
        }
    }
    Err(last_error.unwrap_or_else(|| ProxyError::NoReadyEndpoint {
        backend: backend.key().clone(),
    }))
}

fn pooled_response(
    resp: Response<Incoming>,
    sender: Sender,
    endpoint: Arc<Endpoint>,
    in_flight: InFlight,
    backend: &Arc<Backend>,
) -> Response<ProxyBody> {
    let (parts, incoming) = resp.into_parts();
    let mut body = PooledBody {
        inner: incoming,
        conn: Some((sender, endpoint)),
        _in_flight: in_flight,
        backend: Arc::clone(backend),
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
    _in_flight: InFlight,
    backend: Arc<Backend>,
}

impl PooledBody {
    fn release(&mut self) {
        if let Some((sender, endpoint)) = self.conn.take() {
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
                ctx.metrics
                    .upstream_body_errors
                    .get_or_create(this.backend.labels())
                    .inc();
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
