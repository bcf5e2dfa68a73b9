//! What one access log line says: the [`Trail`] the request stack fills as
//! a request goes through it, and the JSON line it becomes.
//!
//! Not here: when a line is sent (the response body wrapper, `body`), how
//! it is written (`writer`).

use super::AccessLog;
use super::body::{CountedBody, LoggedBody};
use crate::body::ProxyBody;
use crate::error::ProxyError;
use crate::router::{DirectResponse, ForwardPlan, ListenerKey};
use http::{Method, Request, Response, StatusCode, Version, header, request};
use http_body_util::BodyExt;
use serde::Serialize;
use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};
use switchyard_proto::model::{BackendKey, ObjectName};

/// One request's facts for the access log, gathered by the request stack.
/// Without an access log it is empty and every method returns at once.
pub(crate) struct Trail(Option<Box<Facts>>);

/// What is known of a request so far.
struct Facts {
    log: AccessLog,
    /// When the head arrived, for the line's timestamp.
    at: SystemTime,
    /// The same instant, for durations.
    started: Instant,
    listener: Arc<ListenerKey>,
    client: Option<SocketAddr>,
    method: Method,
    version: Version,
    host: Option<String>,
    path: String,
    route: Option<Arc<ObjectName>>,
    rule: Option<usize>,
    backend: Option<Arc<BackendKey>>,
    endpoint: Option<SocketAddr>,
    direct: Option<Direct>,
    error: Option<Failure>,
    upgrade: bool,
    /// Request body bytes passed on upstream (shared with the body).
    received: Arc<AtomicU64>,
}

/// The line's `direct` object.
#[derive(Debug, Serialize)]
struct Direct {
    kind: &'static str,
    detail: String,
}

/// The line's `error` object.
#[derive(Debug, Serialize)]
struct Failure {
    kind: &'static str,
    blame: &'static str,
    detail: String,
}

impl Trail {
    /// Begins the trail of `req`, which just arrived on a connection to
    /// `listener` from `client`; empty when `log` is `None`.
    pub(crate) fn begin<B>(
        log: Option<&AccessLog>,
        listener: &Arc<ListenerKey>,
        client: Option<SocketAddr>,
        req: &Request<B>,
    ) -> Trail {
        Trail(log.map(|log| {
            Box::new(Facts {
                log: log.clone(),
                at: SystemTime::now(),
                started: Instant::now(),
                listener: Arc::clone(listener),
                client,
                method: req.method().clone(),
                version: req.version(),
                host: None,
                path: String::new(),
                route: None,
                rule: None,
                backend: None,
                endpoint: None,
                direct: None,
                error: None,
                upgrade: false,
                received: Arc::default(),
            })
        }))
    }

    /// The request as it will be routed (Host settled, path normalized),
    /// or as received when it could not be settled.
    pub(crate) fn request(&mut self, parts: &request::Parts) {
        if let Some(f) = &mut self.0 {
            f.host = parts
                .headers
                .get(header::HOST)
                .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
                .or_else(|| parts.uri.authority().map(|a| a.to_string()));
            f.path = parts.uri.path().to_owned();
        }
    }

    /// A route took the request.
    pub(crate) fn routed(&mut self, plan: &ForwardPlan) {
        if let Some(f) = &mut self.0 {
            f.route = Some(plan.route.clone());
            f.rule = Some(plan.rule_index);
            f.backend = Some(plan.backend.clone());
        }
    }

    /// The upstream endpoint that answered.
    pub(crate) fn endpoint(&mut self, endpoint: SocketAddr) {
        if let Some(f) = &mut self.0 {
            f.endpoint = Some(endpoint);
        }
    }

    /// The router answered itself.
    pub(crate) fn direct(&mut self, direct: &DirectResponse) {
        if let Some(f) = &mut self.0 {
            f.direct = Some(Direct {
                kind: direct.kind.label(),
                detail: direct.reason.clone(),
            });
        }
    }

    /// The proxy failed the request with `error`.
    pub(crate) fn failed(&mut self, error: &ProxyError) {
        if let Some(f) = &mut self.0 {
            if let Some(endpoint) = error.endpoint() {
                f.endpoint = Some(endpoint);
            }
            f.error = Some(Failure {
                kind: error.kind(),
                blame: error.blame().as_str(),
                detail: error.to_string(),
            });
        }
    }

    /// The request became a tunnel (101).
    pub(crate) fn upgraded(&mut self) {
        if let Some(f) = &mut self.0 {
            f.upgrade = true;
        }
    }

    /// `body`, counting the bytes the client sends through it.
    pub(crate) fn count_upload(&self, body: ProxyBody) -> ProxyBody {
        match &self.0 {
            Some(f) => CountedBody::new(body, Arc::clone(&f.received)).boxed_unsync(),
            None => body,
        }
    }

    /// `resp` as it goes to the client, carrying the trail: its line is
    /// sent when its body ends or is dropped.
    pub(crate) fn finish(self, resp: Response<ProxyBody>) -> Response<ProxyBody> {
        let Some(facts) = self.0 else {
            return resp;
        };
        let pending = Pending {
            status: resp.status(),
            headers_after: facts.started.elapsed(),
            facts,
        };
        let (parts, body) = resp.into_parts();
        Response::from_parts(parts, LoggedBody::new(body, pending).boxed_unsync())
    }
}

/// A request whose response head has gone out; its body is on its way.
pub(super) struct Pending {
    facts: Box<Facts>,
    status: StatusCode,
    headers_after: Duration,
}

impl Pending {
    /// Sends the line: `sent` body bytes went to the client, `complete`
    /// if the body reached its end.
    pub(super) fn send(self, sent: u64, complete: bool) {
        let f = &self.facts;
        let line = Line {
            timestamp: rfc3339(f.at),
            listener: listener_name(&f.listener),
            client: f.client,
            method: Some(f.method.as_str()),
            host: f.host.as_deref(),
            path: Some(&f.path),
            version: Some(version_name(f.version)),
            route: f.route.as_ref().map(ToString::to_string),
            rule: f.rule,
            backend: f.backend.as_ref().map(ToString::to_string),
            endpoint: f.endpoint,
            status: self.status.as_u16(),
            upgrade: f.upgrade,
            bytes_received: f.received.load(Ordering::Relaxed),
            bytes_sent: sent,
            duration_headers_ms: Some(millis(self.headers_after)),
            duration_ms: Some(millis(f.started.elapsed())),
            complete: Some(complete),
            direct: f.direct.as_ref(),
            error: f.error.as_ref(),
        };
        f.log.send(line.to_json());
    }
}

/// The line for a head hyper refused with `status` (no request exists).
pub(super) fn refused_line(
    listener: &ListenerKey,
    client: Option<SocketAddr>,
    status: StatusCode,
    error: &dyn fmt::Display,
) -> String {
    let failure = Failure {
        kind: if status == StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE {
            "head_too_large"
        } else {
            "bad_head"
        },
        blame: "downstream",
        detail: error.to_string(),
    };
    Line {
        timestamp: rfc3339(SystemTime::now()),
        listener: listener_name(listener),
        client,
        method: None,
        host: None,
        path: None,
        version: None,
        route: None,
        rule: None,
        backend: None,
        endpoint: None,
        status: status.as_u16(),
        upgrade: false,
        bytes_received: 0,
        bytes_sent: 0,
        duration_headers_ms: None,
        duration_ms: None,
        complete: None,
        direct: None,
        error: Some(&failure),
    }
    .to_json()
}

/// One line, fields in this order (see the module docs).
#[derive(Serialize)]
struct Line<'a> {
    timestamp: String,
    listener: String,
    client: Option<SocketAddr>,
    method: Option<&'a str>,
    host: Option<&'a str>,
    path: Option<&'a str>,
    version: Option<&'static str>,
    route: Option<String>,
    rule: Option<usize>,
    backend: Option<String>,
    endpoint: Option<SocketAddr>,
    status: u16,
    upgrade: bool,
    bytes_received: u64,
    bytes_sent: u64,
    duration_headers_ms: Option<f64>,
    duration_ms: Option<f64>,
    complete: Option<bool>,
    direct: Option<&'a Direct>,
    error: Option<&'a Failure>,
}

impl Line<'_> {
    fn to_json(&self) -> String {
        // Strings, numbers, booleans and nulls only: serializing cannot
        // fail.
        let mut text = serde_json::to_string(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// `NAMESPACE/GATEWAY:PORT`, or `PORT` for a socket serving every Gateway
/// on the port (the `--listener` syntax).
fn listener_name(key: &ListenerKey) -> String {
    match &key.gateway {
        Some(gateway) => format!("{gateway}:{}", key.port),
        None => key.port.to_string(),
    }
}

fn version_name(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_11 => "HTTP/1.1",
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_3 => "HTTP/3",
        _ => "unknown",
    }
}

/// Milliseconds, to the microsecond.
fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

/// `2025-06-01T12:00:00.123456Z`.
pub(super) fn rfc3339(at: SystemTime) -> String {
    let t = time::OffsetDateTime::from(at);
    let mut text = String::with_capacity(27);
    let _ = write!(
        text,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    );
    text
}
