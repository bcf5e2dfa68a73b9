//! The admin listener: `GET /metrics` (Prometheus/OpenMetrics text) and
//! `GET /ready` (200 when the caller's readiness predicate holds, else
//! 503). Plain HTTP/1.1, tiny, separate from the data plane listeners so a
//! scrape never competes with traffic routing.
//!
//! Shared by the coordinator and the proxy (neither depends on the other).
//! Not here: deciding what "ready" means (the caller passes it in).

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use prometheus_client::registry::Registry;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tracing::{debug, warn};

/// How long the admin server waits for open requests at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves `/metrics` and `/ready` on `listener` until `shutdown` resolves.
pub async fn serve<R>(
    listener: TcpListener,
    registry: Arc<Registry>,
    ready: R,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    R: Fn() -> bool + Send + Sync + 'static,
{
    let ready = Arc::new(ready);
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(pair) => pair,
                    Err(error) => {
                        warn!(%error, "admin accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let registry = Arc::clone(&registry);
                let ready = Arc::clone(&ready);
                let svc = hyper::service::service_fn(move |req| {
                    let resp = answer(&req, &registry, ready.as_ref());
                    async move { Ok::<_, Infallible>(resp) }
                });
                let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), svc));
                tokio::spawn(async move {
                    if let Err(error) = conn.await {
                        debug!(%error, "admin connection ended with an error");
                    }
                });
            }
        }
    }
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await;
    Ok(())
}

fn answer<R: Fn() -> bool>(
    req: &Request<Incoming>,
    registry: &Registry,
    ready: &R,
) -> Response<Full<Bytes>> {
    let (status, content_type, text) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => {
            let mut out = String::new();
            match prometheus_client::encoding::text::encode(&mut out, registry) {
                Ok(()) => (
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    out,
                ),
                Err(_) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    "metrics encoding failed\n".to_owned(),
                ),
            }
        }
        (&Method::GET, "/ready") => {
            if ready() {
                (StatusCode::OK, "text/plain", "ready\n".to_owned())
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "not ready\n".to_owned(),
                )
            }
        }
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_owned(),
        ),
    };
    let mut resp = Response::new(Full::new(Bytes::from(text)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    resp
}
