//! `switchyard backend`: a small HTTP backend for the demo and the tests.
//! It answers every request with a JSON echo naming itself, and its health
//! can be scripted: unhealthy (503) for its first seconds, or forever.
//!
//! It is a test fixture shipped in the binary so that demo and chaos tests
//! can start brand-new backend *processes*; it is not meant for production.

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_proto::model::parse_duration;

/// Flags of `switchyard backend`.
#[derive(Debug, Args)]
pub struct BackendArgs {
    /// Name reported in every answer (`"backend"` in the JSON, and the `x-backend` header).
    #[arg(long)]
    pub name: String,
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Answer 503 to everything for this long after start (a slow-starting backend).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub unhealthy_for: Duration,
    /// Answer 503 to everything, always (a backend that never becomes healthy).
    #[arg(long)]
    pub never_healthy: bool,
}

struct Backend {
    name: String,
    healthy_at: Option<Instant>,
}

impl Backend {
    fn answer(&self, request: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let healthy = self.healthy_at.is_some_and(|t| Instant::now() >= t);
        if !healthy {
            return Response::builder()
                .status(StatusCode::SERVICE_UNAVAILABLE)
                .header("x-backend", &self.name)
                .body(Full::new(Bytes::from_static(b"starting\n")))
                .unwrap_or_default();
        }
        let headers: serde_json::Map<String, serde_json::Value> = request
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
            .collect();
        let body = serde_json::json!({
            "backend": self.name,
            "method": request.method().as_str(),
            "path": request.uri().to_string(),
            "headers": headers,
        });
        Response::builder()
            .header("content-type", "application/json")
            .header("x-backend", &self.name)
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap_or_default()
    }
}

/// Serves until SIGTERM/SIGINT, then stops accepting, lets in-flight
/// requests finish (up to 5 s) and exits 0 — like a pod being deleted.
pub async fn run(args: BackendArgs) -> anyhow::Result<ExitCode> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let backend = Arc::new(Backend {
        name: args.name.clone(),
        healthy_at: (!args.never_healthy).then(|| Instant::now() + args.unhealthy_for),
    });
    let shutdown = super::shutdown_signal();
    println!("LISTENING http={}", listener.local_addr()?);
    std::io::stdout().flush()?;
    tokio::pin!(shutdown);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let http = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let backend = backend.clone();
        let service = hyper::service::service_fn(move |request| {
            let response = backend.answer(&request);
            async move { Ok::<_, std::convert::Infallible>(response) }
        });
        let connection = http.serve_connection_with_upgrades(TokioIo::new(stream), service);
        let connection = graceful.watch(connection.into_owned());
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
    Ok(ExitCode::SUCCESS)
}
