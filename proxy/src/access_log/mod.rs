//! The optional access log: one JSON line per request (`switchyard proxy
//! --access-log PATH|-`), off by default.
//!
//! It owns the line format (`record`), the body wrappers that count body
//! bytes and see a response end (`body`) and the writer thread
//! (`writer`). It does not decide what a request did: the request stack
//! (`server::service`, and `server::conn` for heads hyper refused) tells a
//! `Trail` as it goes. Metric names are [`crate::metrics`]'s.
//!
//! # Never in the way of a request
//!
//! - Off, the request stack checks one `Option` and allocates nothing: a
//!   `Trail` is then an empty `Option<Box<_>>` and each of its methods
//!   returns at once.
//! - On, the line is built and queued when the response body ends or is
//!   dropped, after its last byte went to hyper, so building it never
//!   delays a response. The queue is bounded ([`QUEUE_LINES`]); when the
//!   writer falls behind, a line that does not fit is dropped and counted
//!   in `switchyard_proxy_access_log_dropped_total`, never waited for.
//! - A dedicated thread (not a Tokio task: a slow disk or a stuck pipe must
//!   not hold a runtime worker) writes through a 64 KiB buffer. It flushes
//!   at most a second after a line arrived, when the buffer fills, and when
//!   [`crate::DataPlane::serve`] returns (after the drain), so a clean stop
//!   loses no line. A failed write (disk full, closed pipe) is counted in
//!   `switchyard_proxy_access_log_write_errors_total` and logged at WARN
//!   once; lines are lost while writes fail, and the proxy keeps serving.
//!
//! # The line
//!
//! ```json
//! {"timestamp":"2025-06-01T12:00:00.123456Z","listener":"web/gw:80","client":"10.0.0.7:51234",
//!  "method":"GET","host":"app.example","path":"/cart","version":"HTTP/1.1","route":"web/app",
//!  "rule":0,"backend":"web/app:8080","endpoint":"10.1.2.3:8080","status":200,"upgrade":false,
//!  "bytes_received":0,"bytes_sent":512,"duration_headers_ms":1.204,"duration_ms":1.377,
//!  "complete":true,"direct":null,"error":null}
//! ```
//!
//! (one line in the file). `timestamp`: when the request head arrived
//! (RFC 3339, UTC, microseconds). `listener`: the Gateway listener the
//! socket serves, as `--listener` names it (`NAMESPACE/GATEWAY:PORT`, or
//! `PORT` for a socket serving every Gateway on the port). `path`: as
//! routed, normalized, without the query (for a request refused as
//! malformed, as received). `route` (`namespace/name`), `rule` (index in
//! the route's rules), `backend` (`namespace/service:port`): null when no
//! route took the request (404, 400, 503 before a configuration, redirects
//! and other answers of the router). `endpoint`: the `ip:port` the proxy
//! got its answer from or failed at (the last one tried, after retries),
//! null if none was chosen. `bytes_received` / `bytes_sent`: body bytes
//! (not heads), counted as the body wrappers pass them on — from the
//! client to the backend as of the response's end, and to hyper for the
//! client (bytes hyper could not write to a client that went away are
//! counted). `duration_headers_ms`: from the request head's arrival to
//! the response head handed to hyper; `duration_ms`: to the response body's
//! end or drop; `complete`: whether the body was sent to its end (false:
//! the client went away or the backend broke it off). `upgrade`: the
//! request became a tunnel (101); tunnel bytes and lifetime are not here
//! (`switchyard_proxy_tunnel_bytes_total`). `direct`: why the router
//! answered itself (`kind` as in `switchyard_proxy_direct_responses_total`,
//! `detail` naming route and rule). `error`: a request the proxy failed
//! (`kind` and `blame` as in `switchyard_proxy_errors_total`, `detail` the
//! operator's reason, e.g. `connecting to 10.1.2.3:8080 of web/app:8080
//! failed: connect timed out after 1s`).
//!
//! HTTP/1 heads hyper refuses before any request exists (431 too large,
//! 400 unparsable) get a line with their status, listener, client and
//! `error`, and null request fields and durations. Heads h2 refuses on
//! its own (an HTTP/2 header list over the limit) reach no code of ours
//! and get none.

mod body;
mod record;
mod writer;

pub(crate) use record::Trail;

use crate::metrics::Metrics;
use crate::router::ListenerKey;
use prometheus_client::metrics::counter::Counter;
use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;
use writer::Message;

/// Lines queued for the writer at most; beyond, lines are dropped.
pub const QUEUE_LINES: usize = 8192;

/// The writer's buffer.
const BUFFER_BYTES: usize = 64 * 1024;

/// Where access log lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// The process's standard output (`-`).
    Stdout,
    /// A file, created if missing and appended to.
    File(PathBuf),
}

impl AccessLogTarget {
    /// `-` is standard output, anything else a file path.
    pub fn parse(text: &str) -> Result<AccessLogTarget, String> {
        match text {
            "" => Err("expected a file path or - (standard output)".to_owned()),
            "-" => Ok(AccessLogTarget::Stdout),
            path => Ok(AccessLogTarget::File(PathBuf::from(path))),
        }
    }
}

impl fmt::Display for AccessLogTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessLogTarget::Stdout => f.write_str("standard output"),
            AccessLogTarget::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The request path's handle on the writer: queue a line, never wait.
/// Cloned into every response that logs (a queue sender and a counter).
#[derive(Debug, Clone)]
pub(crate) struct AccessLog {
    queue: SyncSender<Message>,
    dropped: Counter,
}

impl AccessLog {
    /// Opens `target` and starts the writer thread, counting into
    /// `metrics`. The thread ends once every handle is gone, after writing
    /// what was queued.
    pub(crate) fn open(target: &AccessLogTarget, metrics: &Metrics) -> io::Result<AccessLog> {
        let out: Box<dyn Write + Send> = match target {
            AccessLogTarget::Stdout => Box::new(io::stdout()),
            AccessLogTarget::File(path) => Box::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
            ),
        };
        AccessLog::start(
            out,
            writer::Settings {
                queue: QUEUE_LINES,
                buffer: BUFFER_BYTES,
                target: target.to_string(),
            },
            metrics.access_log_dropped.clone(),
            metrics.access_log_write_errors.clone(),
        )
    }

    fn start(
        out: Box<dyn Write + Send>,
        settings: writer::Settings,
        dropped: Counter,
        write_errors: Counter,
    ) -> io::Result<AccessLog> {
        let (queue, lines) = sync_channel(settings.queue);
        std::thread::Builder::new()
            .name("access-log".to_owned())
            .spawn(move || writer::run(lines, out, &settings, &write_errors))?;
        Ok(AccessLog { queue, dropped })
    }

    /// Queues one line (with its newline), or drops and counts it if the
    /// queue is full.
    pub(crate) fn send(&self, line: String) {
        if self.queue.try_send(Message::Line(line)).is_err() {
            self.dropped.inc();
        }
    }

    /// Logs a request head hyper refused itself with `status` (there is no
    /// request to trail: see the module docs).
    pub(crate) fn refused(
        &self,
        listener: &ListenerKey,
        client: Option<SocketAddr>,
        status: http::StatusCode,
        error: &dyn fmt::Display,
    ) {
        self.send(record::refused_line(listener, client, status, error));
    }

    /// Has everything queued so far written out; `false` if that did not
    /// happen `within` (the writer is stuck on its output, or gone). Waits
    /// for room in a full queue rather than drop the request.
    pub(crate) async fn flush(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let (ack, done) = oneshot::channel();
        let mut message = Message::Flush(ack);
        loop {
            match self.queue.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                    message = back;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(_) => return false,
            }
        }
        matches!(tokio::time::timeout_at(deadline, done).await, Ok(Ok(())))
    }
}

#[cfg(test)]
mod tests;
