//! The per-request stack: what happens between hyper handing us a request
//! and us handing back a response.
//!
//! Layers, outermost first, and why each sits where it does:
//!
//! 0. **Access log** (only with one open, [`crate::access_log`]) — a
//!    [`Trail`] begun as the request arrives, told by the layers below
//!    what they decided (settled Host and path, route and backend, the
//!    endpoint, the error or the router's reason, a tunnel), and finished
//!    on the response the client gets, whose body sends the line when it
//!    ends. Outermost so that it times everything and logs the answer as
//!    sent. Without an access log the trail is empty and costs nothing.
//! 1. **Drain marking** — once the proxy drains, every HTTP/1 response
//!    carries `Connection: close`, whoever produced it, so clients move to
//!    the replacement between requests instead of having a connection cut
//!    under them. Outermost so that no answer escapes it. A 408 (the
//!    client's upload paused) closes too: the rest of its body is unread.
//!    A 101 is left alone: its connection becomes a tunnel, which the
//!    drain deadline closes (`tunnel`).
//! 2. **Accounting** — counts the answer by route, backend and status
//!    class. Outside everything that can produce an answer, inside drain
//!    marking (which never changes the status).
//! 3. **Request hygiene** — [`inbound::settle`]: one valid Host (the
//!    absolute-form target's or HTTP/2 `:authority` when there is one), the
//!    path normalized; 400 otherwise. Before routing, so that routing,
//!    rewrites and the backend see one and the same request.
//! 4. **Configuration gate** — before the first [`crate::ServingConfig`],
//!    503 with a reason. Before routing because there is nothing to route
//!    by.
//! 5. **Routing** — the router's [`Decision`]: a direct answer (404, 500,
//!    redirects) or a forward plan.
//! 6. **Request shaping** — hop-by-hop headers out (an upgrade request,
//!    [`upgrade::take`], gets its `Upgrade` and `Connection: upgrade`
//!    back, nothing else), forwarding headers
//!    (`X-Forwarded-For`, `Forwarded`, `X-Forwarded-Proto`) set, then the
//!    route's header edits (after, so a filter can override and nothing
//!    strips what a filter set), URLRewrite host and path, origin-form
//!    URI, HTTP/1.1 upstream. Before mirroring so mirrors see what the
//!    backend sees. While the proxy drains, an upgrade is refused here
//!    (503) rather than opened and cut at the drain deadline.
//! 7. **Mirrors** — fire-and-forget copies; after shaping, before the
//!    upstream call so that they never wait on the main response. A
//!    mirror gets an upgrade request without its upgrade: one backend
//!    owns the tunnel.
//! 8. **Upstream** — [`forward_timed`]: endpoint choice, pooling, the
//!    backend timed from the end of the client's body (watched for pauses
//!    by `upload`), safe retries. Innermost: the only layer that does
//!    network IO.
//! 9. **Response shaping** — hop-by-hop headers out, the route's response
//!    header edits; errors become statuses with `x-switchyard-reason`. A
//!    backend's 101 to an upgrade request becomes the client's 101
//!    ([`upgrade::switched_response`]) and leaves a [`Tunnel`] with the
//!    connection, which runs it once hyper has written the 101; any other
//!    answer to an upgrade request is passed on as usual (the backend
//!    refused; no tunnel), and a 101 nobody asked for is a 502.
//!
//! Reasons: clients get a generic reason (header and body) that names no
//! route, Service or endpoint; the detailed one goes to the debug log and
//! the kind to metrics. `expose_reasons` sends the detailed one instead.

use super::forwarded::{self, Peer, Scheme};
use super::grpc_answers;
use super::headers::{self, REASON_HEADER};
use super::inbound;
use super::tunnel::Tunnel;
use super::upgrade::{self, Requested};
use super::upload::TimedBody;
use crate::access_log::Trail;
use crate::body::{self, ProxyBody};
use crate::dataplane::{DataPlane, Served};
use crate::error::{BadUpgrade, ProxyError};
use crate::metrics::{ErrorLabels, UpgradeOutcome, backend_labels};
use crate::router::{Decision, DirectResponse, ForwardPlan, ListenerKey};
use crate::upstream::Backend;
use crate::upstream::forward::{Answer, Switched, Upload, forward_timed};
use crate::upstream::mirror::{self, ClientBody};
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version, request};
use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use switchyard_proto::model::{BackendKey, ObjectName};
use tracing::debug;

/// What the request stack knows about the connection a request came on.
#[derive(Debug)]
pub(crate) struct ConnShared {
    /// The client's address as forwarding headers write it; `None` if the
    /// socket could not say.
    pub peer: Option<Peer>,
    /// `https` when the connection terminated TLS, else `http`.
    pub scheme: Scheme,
    /// Over TLS: the server name the client asked for (SNI), which
    /// picked the certificate; a request whose Host belongs to another
    /// listener is misdirected (421).
    pub sni: Option<Box<str>>,
    /// The client's address as the socket gave it (for the access log).
    pub client: Option<SocketAddr>,
    /// The Gateway listener this socket serves.
    pub listener: Arc<ListenerKey>,
    /// Set when the proxy starts draining.
    pub draining: Arc<AtomicBool>,
    /// The connection speaks HTTP/2 (drained with GOAWAY).
    pub saw_h2: AtomicBool,
    /// At least one request arrived (ends the first-request watchdog).
    pub saw_request: AtomicBool,
    /// A tunnel waiting for hyper to write its 101 and hand the connection
    /// over; the connection's task runs it then. HTTP/1 serves one request
    /// at a time and a 101 ends HTTP on the connection, so there is at
    /// most one.
    pub tunnel: Mutex<Option<Tunnel>>,
}

impl ConnShared {
    /// The tunnel a 101 left, if any.
    pub fn take_tunnel(&self) -> Option<Tunnel> {
        self.tunnel
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn set_tunnel(&self, tunnel: Tunnel) {
        *self.tunnel.lock().unwrap_or_else(PoisonError::into_inner) = Some(tunnel);
    }
}

/// Serves one request.
pub(crate) async fn handle(
    dp: Arc<DataPlane>,
    conn: Arc<ConnShared>,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    conn.saw_request.store(true, Ordering::Relaxed);
    let version = req.version();
    if version == Version::HTTP_2 {
        conn.saw_h2.store(true, Ordering::Relaxed);
    }
    // Layer 0: the access log's trail, when there is an access log.
    let mut trail = Trail::begin(dp.access_log(), &conn.listener, conn.client, &req);
    // Layers 2..9.
    let mut resp = account(&dp, &conn, req, &mut trail).await;
    // Layer 1: drain marking.
    if version < Version::HTTP_2
        && resp.status() != StatusCode::SWITCHING_PROTOCOLS
        && (conn.draining.load(Ordering::Relaxed) || resp.status() == StatusCode::REQUEST_TIMEOUT)
    {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    trail.finish(resp)
}

/// Layer 2: accounting around everything that can answer.
async fn account(
    dp: &Arc<DataPlane>,
    conn: &ConnShared,
    req: Request<Incoming>,
    trail: &mut Trail,
) -> Response<ProxyBody> {
    let grpc = grpc_answers::is_grpc(req.headers());
    let (resp, accounting) = gate_and_route(dp, conn, req, trail).await;
    let metrics = dp.metrics();
    match accounting {
        Accounting::Unrouted => metrics.record_unrouted(resp.status()),
        Accounting::Forwarded {
            route,
            handle: Some(backend),
            ..
        } => metrics.record_forwarded(
            backend.request_counters(),
            &route,
            backend.labels(),
            resp.status(),
        ),
        Accounting::Forwarded {
            route,
            backend,
            handle: None,
        } => metrics.record_request(&route.to_string(), &backend.to_string(), resp.status()),
    }
    // Counted by the HTTP status the proxy chose; told in gRPC's terms.
    if grpc {
        grpc_answers::for_grpc_client(resp)
    } else {
        resp
    }
}

/// What layer 2 counts a request by.
enum Accounting {
    /// No route took it: empty route and backend labels.
    Unrouted,
    /// A route sent it to a backend.
    Forwarded {
        route: Arc<ObjectName>,
        backend: Arc<BackendKey>,
        /// The tracked backend, whose counters are cached; `None` when the
        /// backend is unknown.
        handle: Option<Arc<Backend>>,
    },
}

/// Layers 3 to 5. Returns the response plus what to count it by.
async fn gate_and_route(
    dp: &Arc<DataPlane>,
    conn: &ConnShared,
    mut req: Request<Incoming>,
    trail: &mut Trail,
) -> (Response<ProxyBody>, Accounting) {
    let upgrade = upgrade::take(&mut req);
    let (mut parts, body) = req.into_parts();
    let settled = inbound::settle(&mut parts, &dp.settings().paths);
    trail.request(&parts);
    if let Err(why) = settled {
        return (
            error_response(dp, trail, &ProxyError::BadRequest(why)),
            Accounting::Unrouted,
        );
    }
    let Some(served) = dp.served() else {
        return (
            error_response(dp, trail, &ProxyError::NoConfig),
            Accounting::Unrouted,
        );
    };
    let decision = if conn.scheme == "https" {
        served
            .table
            .route_over_tls(&conn.listener, conn.sni.as_deref(), &parts, rand::random())
    } else {
        served.table.route(&conn.listener, &parts, rand::random())
    };
    match decision {
        Decision::Respond(direct) => (direct_response(dp, trail, direct), Accounting::Unrouted),
        Decision::Forward(plan) => {
            trail.routed(&plan);
            let handle = served.backends.get(plan.backend.as_ref()).cloned();
            let request = Inbound {
                parts,
                body,
                upgrade,
            };
            let resp =
                forward_plan(dp, conn, &served, &plan, handle.as_ref(), request, trail).await;
            let ForwardPlan { route, backend, .. } = plan;
            (
                resp,
                Accounting::Forwarded {
                    route,
                    backend,
                    handle,
                },
            )
        }
    }
}

/// A routed client request, settled and split.
struct Inbound {
    parts: request::Parts,
    body: Incoming,
    /// The upgrade it asks for, if the proxy tunnels it.
    upgrade: Option<Requested>,
}

/// Layers 6..9 for one forward plan; `backend` is the plan's backend if
/// tracked.
async fn forward_plan(
    dp: &Arc<DataPlane>,
    conn: &ConnShared,
    served: &Served,
    plan: &ForwardPlan,
    backend: Option<&Arc<Backend>>,
    request: Inbound,
    trail: &mut Trail,
) -> Response<ProxyBody> {
    let Inbound {
        mut parts,
        body,
        upgrade,
    } = request;
    let Some(backend) = backend else {
        if upgrade.is_some() {
            dp.metrics()
                .record_upgrade(&backend_labels(&plan.backend), UpgradeOutcome::Failed);
        }
        let error = ProxyError::BackendUnknown {
            backend: BackendKey::clone(&plan.backend),
        };
        return error_response(dp, trail, &error);
    };
    if upgrade.is_some() && conn.draining.load(Ordering::Relaxed) {
        dp.metrics()
            .record_upgrade(backend.labels(), UpgradeOutcome::Failed);
        let error = ProxyError::Draining {
            backend: backend.key().clone(),
        };
        return error_response(dp, trail, &error);
    }
    // Layer 6: request shaping.
    shape_request(
        &mut parts,
        plan,
        conn.peer.as_ref(),
        conn.scheme,
        dp.settings().trusted_hops,
        upgrade.as_ref().map(|u| &u.protocol),
    );
    if upgrade.as_ref().is_some_and(|u| u.extended_connect) {
        parts
            .headers
            .insert("sec-websocket-key", upgrade::websocket_key());
    }
    // Layer 7: mirrors.
    let mirrors: Vec<_> = plan
        .mirrors
        .iter()
        .filter_map(|key| {
            let found = served.backends.get(key.as_ref());
            if found.is_none() {
                debug!(mirror = %key, "mirror backend not tracked; copy skipped");
            }
            found
        })
        .collect();
    // An ended body (most requests: no body at all) is sent as an empty
    // one: nothing to tee, to watch or to fail, and nothing allocated.
    let no_failure = AtomicBool::new(false);
    let (body, client_failed, mirror_bodies, upload) = if body.is_end_stream() {
        let empties = mirrors.iter().map(|_| body::empty()).collect();
        (body::empty(), None, empties, None)
    } else {
        let (client_body, failed, mirror_bodies) = ClientBody::new(body, mirrors.len());
        // The upload is watched only while there is one to wait for.
        let upload = Upload::new();
        let idle = dp.settings().request_body_idle_timeout;
        let timed = TimedBody::new(client_body, Arc::clone(&upload), idle);
        (
            timed.boxed_unsync(),
            Some(failed),
            mirror_bodies,
            Some(upload),
        )
    };
    let client_failed: &AtomicBool = client_failed.as_deref().unwrap_or(&no_failure);
    for (mirror_backend, mirror_body) in mirrors.into_iter().zip(mirror_bodies) {
        if let Some(mut copy) = copy_request(&parts, mirror_body) {
            if upgrade.is_some() {
                upgrade::remove(copy.headers_mut());
            }
            mirror::spawn(dp.mirror_limiter(), Arc::clone(mirror_backend), copy);
        }
    }
    let req = Request::from_parts(parts, trail.count_upload(body));
    // Layer 8: upstream.
    let answer = forward_timed(backend, req, client_failed, upload.as_ref()).await;
    // Layer 9: response shaping.
    let outcome = |outcome| {
        if upgrade.is_some() {
            dp.metrics().record_upgrade(backend.labels(), outcome);
        }
    };
    match answer {
        Ok(Answer::Response { response, endpoint }) => {
            if upgrade.as_ref().is_some_and(|u| u.extended_connect)
                && response.status().is_success()
            {
                outcome(UpgradeOutcome::Failed);
                let error = ProxyError::BadUpgrade {
                    backend: backend.key().clone(),
                    endpoint,
                    why: BadUpgrade::NotSwitched,
                };
                return error_response(dp, trail, &error);
            }
            outcome(UpgradeOutcome::Refused);
            trail.endpoint(endpoint);
            let (mut rparts, rbody) = response.into_parts();
            headers::strip_hop_by_hop(&mut rparts.headers);
            plan.response_headers.apply(&mut rparts.headers);
            Response::from_parts(rparts, rbody)
        }
        Ok(Answer::Switched(switched)) => match upgrade {
            Some(requested) => switch(dp, conn, plan, backend, requested, switched, trail),
            None => {
                let error = ProxyError::BadUpgrade {
                    backend: backend.key().clone(),
                    endpoint: switched.endpoint,
                    why: BadUpgrade::Unrequested,
                };
                error_response(dp, trail, &error)
            }
        },
        Err(error) => {
            outcome(UpgradeOutcome::Failed);
            error_response(dp, trail, &error)
        }
    }
}

/// Layer 9 for a backend's 101 to an upgrade request: the client's 101,
/// and the tunnel left with the connection to run once hyper has written
/// it. The upgrade is counted by the tunnel from here.
fn switch(
    dp: &Arc<DataPlane>,
    conn: &ConnShared,
    plan: &ForwardPlan,
    backend: &Arc<Backend>,
    requested: Requested,
    switched: Switched,
    trail: &mut Trail,
) -> Response<ProxyBody> {
    let client_answer = if requested.extended_connect {
        Ok(upgrade::connect_established(&switched.response))
    } else {
        upgrade::switched_response(&switched.response)
    };
    match client_answer {
        Ok(mut resp) => {
            trail.endpoint(switched.endpoint);
            trail.upgraded();
            plan.response_headers.apply(resp.headers_mut());
            let tunnel = Tunnel::new(
                requested.client,
                switched,
                backend.labels().clone(),
                Arc::clone(dp.metrics_arc()),
            );
            if requested.extended_connect {
                // One stream of an HTTP/2 connection that goes on serving
                // others: the tunnel runs beside it, and ends when its
                // stream does — at the latest when the connection task
                // drops the connection at the drain deadline.
                tokio::spawn(tunnel.run());
            } else {
                conn.set_tunnel(tunnel);
            }
            resp
        }
        Err(why) => {
            dp.metrics()
                .record_upgrade(backend.labels(), UpgradeOutcome::Failed);
            let error = ProxyError::BadUpgrade {
                backend: backend.key().clone(),
                endpoint: switched.endpoint,
                why,
            };
            error_response(dp, trail, &error)
        }
    }
}

/// Layer 6: the request as the backend must see it.
fn shape_request(
    parts: &mut request::Parts,
    plan: &ForwardPlan,
    peer: Option<&Peer>,
    scheme: Scheme,
    trusted_hops: usize,
    upgrade: Option<&HeaderValue>,
) {
    let from_h2 = parts.version == Version::HTTP_2;
    headers::strip_hop_by_hop(&mut parts.headers);
    if let Some(protocol) = upgrade {
        upgrade::restore(&mut parts.headers, protocol);
    }
    if from_h2 {
        headers::join_cookies(&mut parts.headers);
    }
    forwarded::set_forwarding_headers(&mut parts.headers, peer, scheme, trusted_hops);
    plan.request_headers.apply(&mut parts.headers);
    if let Some(host) = &plan.host
        && let Ok(value) = HeaderValue::from_str(host)
    {
        parts.headers.insert(header::HOST, value);
    }
    // Origin form for the upstream HTTP/1.1 request line. An HTTP/1.1
    // client's target already is one, and stays as it is unless a filter
    // rewrote the path (no copy, no re-parse per request).
    let origin_form = parts.uri.scheme().is_none() && parts.uri.authority().is_none();
    if plan.path_and_query.is_some() || !origin_form {
        let path_and_query = plan
            .path_and_query
            .clone()
            .or_else(|| parts.uri.path_and_query().map(|pq| pq.as_str().to_owned()))
            .unwrap_or_else(|| "/".to_owned());
        parts.uri = Uri::try_from(path_and_query).unwrap_or_else(|_| Uri::from_static("/"));
    }
    parts.version = Version::HTTP_11;
}

/// A copy of the shaped request head with `body`, for a mirror.
fn copy_request(parts: &request::Parts, body: ProxyBody) -> Option<Request<ProxyBody>> {
    let mut builder = Request::builder()
        .method(parts.method.clone())
        .uri(parts.uri.clone())
        .version(parts.version);
    if let Some(h) = builder.headers_mut() {
        *h = parts.headers.clone();
    }
    builder.body(body).ok()
}

/// The router's own answer, with its reason header.
fn direct_response(
    dp: &DataPlane,
    trail: &mut Trail,
    direct: DirectResponse,
) -> Response<ProxyBody> {
    dp.metrics().record_direct(direct.kind);
    trail.direct(&direct);
    debug!(status = direct.status.as_u16(), kind = direct.kind.label(), reason = %direct.reason, "answered by the router");
    let reason = if dp.settings().expose_reasons {
        direct.reason
    } else {
        direct.kind.public_reason().to_owned()
    };
    let mut resp = reason_response(direct.status, &reason);
    let h = resp.headers_mut();
    for (name, value) in direct.headers {
        h.append(name, value);
    }
    resp
}

/// The one place a [`ProxyError`] becomes a response.
fn error_response(dp: &DataPlane, trail: &mut Trail, error: &ProxyError) -> Response<ProxyBody> {
    debug!(%error, blame = error.blame().as_str(), kind = error.kind(), "request failed");
    trail.failed(error);
    dp.metrics()
        .errors
        .get_or_create(&ErrorLabels {
            blame: error.blame().as_str().to_owned(),
            kind: error.kind().to_owned(),
        })
        .inc();
    if dp.settings().expose_reasons {
        reason_response(error.status(), &error.reason())
    } else {
        reason_response(error.status(), error.public_reason())
    }
}

/// A plain-text answer saying `reason`, in the body and in
/// `x-switchyard-reason`.
fn reason_response(status: StatusCode, reason: &str) -> Response<ProxyBody> {
    let mut resp = Response::new(body::full(format!("{reason}\n")));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(REASON_HEADER, headers::reason_value(reason));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
