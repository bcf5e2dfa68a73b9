//! The zero-drop prober: several request loops in flight at all times
//! through the proxies, each request recorded as ok or failed. A failure is
//! any transport error, any status other than 200, or no answer within the
//! request timeout. Bounded: it stops when told or at its deadline.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What one successful response showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The backend that answered (`x-backend`).
    pub backend: String,
    /// The version header the backend saw (set by the route's filter).
    pub version: String,
    /// When the request was sent.
    pub sent_at: Instant,
}

/// Counts and failures so far.
#[derive(Debug, Clone, Default)]
pub struct ProbeReport {
    /// Requests completed (ok or failed).
    pub sent: u64,
    /// Requests failed.
    pub failed: u64,
    /// The first failures, with what went wrong.
    pub failures: Vec<String>,
}

#[derive(Default)]
struct Stats {
    sent: AtomicU64,
    failed: AtomicU64,
    failures: Mutex<Vec<String>>,
    latest: Mutex<Option<Observation>>,
}

/// A running prober.
pub struct Prober {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
    stats: Arc<Stats>,
}

/// Most failures kept verbatim.
const KEEP_FAILURES: usize = 50;

impl Prober {
    /// Starts `concurrency` back-to-back GET loops spread over `urls`
    /// (`http://HOST:PORT`), each request with a cache-busting query. Stops
    /// by itself after `max_duration`.
    pub fn start(
        urls: Vec<String>,
        concurrency: usize,
        version_header: &'static str,
        max_duration: Duration,
    ) -> Prober {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Stats::default());
        let client: Client<HttpConnector, Empty<Bytes>> = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build_http();
        let deadline = Instant::now() + max_duration;
        let tasks = (0..concurrency)
            .map(|i| {
                let url = urls[i % urls.len().max(1)].clone();
                let (stop, stats, client) = (stop.clone(), stats.clone(), client.clone());
                tokio::spawn(async move {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        n += 1;
                        let uri = format!("{url}/probe?loop={i}&n={n}");
                        let sent_at = Instant::now();
                        let outcome = probe_once(&client, &uri, version_header).await;
                        stats.sent.fetch_add(1, Ordering::Relaxed);
                        match outcome {
                            Ok((backend, version)) => {
                                let mut latest =
                                    stats.latest.lock().unwrap_or_else(|e| e.into_inner());
                                if latest.as_ref().is_none_or(|o| o.sent_at <= sent_at) {
                                    *latest = Some(Observation {
                                        backend,
                                        version,
                                        sent_at,
                                    });
                                }
                            }
                            Err(reason) => {
                                stats.failed.fetch_add(1, Ordering::Relaxed);
                                let mut failures =
                                    stats.failures.lock().unwrap_or_else(|e| e.into_inner());
                                if failures.len() < KEEP_FAILURES {
                                    failures.push(format!("{uri}: {reason}"));
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        Prober { stop, tasks, stats }
    }

    /// Counts so far.
    pub fn report(&self) -> ProbeReport {
        ProbeReport {
            sent: self.stats.sent.load(Ordering::Relaxed),
            failed: self.stats.failed.load(Ordering::Relaxed),
            failures: self
                .stats
                .failures
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// Waits (up to `timeout`) for a successful response to a request sent
    /// after `after`, and returns what it showed.
    pub async fn observe_after(&self, after: Instant, timeout: Duration) -> Option<Observation> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let latest = self
                .stats
                .latest
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if let Some(o) = latest
                && o.sent_at > after
            {
                return Some(o);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        None
    }

    /// Stops every loop, waits for the requests in flight, and reports.
    pub async fn stop(self) -> ProbeReport {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
        let stats = &self.stats;
        ProbeReport {
            sent: stats.sent.load(Ordering::Relaxed),
            failed: stats.failed.load(Ordering::Relaxed),
            failures: stats
                .failures
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

/// Waits (up to `timeout`) until a request through each of `urls` is
/// answered by a backend, as a load balancer's health check would before
/// sending a proxy traffic. A proxy not serving yet refuses connections (it
/// listens only once its configuration is installed) or answers 404 for a
/// route it has not applied; a proxy whose lease ran out while it installed
/// a large store is such a proxy, and a cutover may have been committed
/// without it. On timeout, says which proxy did not answer and why.
pub async fn wait_until_each_answers(
    urls: &[String],
    version_header: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let deadline = Instant::now() + timeout;
    for url in urls {
        let uri = format!("{url}/probe?serving");
        loop {
            match probe_once(&client, &uri, version_header).await {
                Ok(_) => break,
                Err(reason) if Instant::now() >= deadline => {
                    anyhow::bail!("{url} does not serve the route after {timeout:?}: {reason}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
    Ok(())
}

async fn probe_once(
    client: &Client<HttpConnector, Empty<Bytes>>,
    uri: &str,
    version_header: &str,
) -> Result<(String, String), String> {
    let request = hyper::Request::get(uri)
        .body(Empty::new())
        .map_err(|e| format!("bad request: {e}"))?;
    let response = tokio::time::timeout(Duration::from_secs(5), client.request(request))
        .await
        .map_err(|_| "no response within 5s".to_string())?
        .map_err(|e| format!("transport error: {e}"))?;
    let status = response.status();
    let reason = response
        .headers()
        .get("x-switchyard-reason")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = tokio::time::timeout(Duration::from_secs(5), response.into_body().collect())
        .await
        .map_err(|_| "body not complete within 5s".to_string())?
        .map_err(|e| format!("body error: {e}"))?
        .to_bytes();
    if status != hyper::StatusCode::OK {
        return Err(format!(
            "status {status}{}",
            reason.map(|r| format!(" ({r})")).unwrap_or_default()
        ));
    }
    let json: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| format!("body is not the backend's JSON: {e}"))?;
    let backend = json["backend"].as_str().unwrap_or_default().to_string();
    let version = json["headers"][version_header]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Ok((backend, version))
}
