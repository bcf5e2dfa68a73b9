//! The proxy's own answers to gRPC calls, in gRPC's terms.
//!
//! A gRPC client reads its status from `grpc-status`, not from the HTTP
//! status: a plain `404` with a text body is, to it, a broken stream
//! (`INTERNAL: invalid compression flag`). So when a gRPC call
//! (`content-type: application/grpc…`, not gRPC-Web, whose framing
//! differs) gets one of the proxy's own error answers — no route, no ready
//! endpoint, backend timeout, … (those carrying `x-switchyard-reason`) —
//! it becomes a *trailers-only* gRPC response: HTTP 200, `grpc-status`
//! from the HTTP status as gRPC's own mapping table has it
//! (`doc/http-grpc-status-mapping.md`: 404 → `UNIMPLEMENTED`, 502/503/504
//! → `UNAVAILABLE`, …), `grpc-message` the reason, no body. Backends'
//! answers pass untouched.

use super::headers::REASON_HEADER;
use crate::body::{self, ProxyBody};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

/// Whether a request is a gRPC call (not gRPC-Web).
pub(super) fn is_grpc(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).is_some_and(|t| {
        let t = t.as_bytes();
        t.strip_prefix(b"application/grpc")
            .is_some_and(|rest| rest.is_empty() || rest[0] == b'+' || rest[0] == b';')
    })
}

/// `resp` as a gRPC client can read it: the proxy's own error answers
/// become trailers-only gRPC statuses; everything else is returned as is.
pub(super) fn for_grpc_client(resp: Response<ProxyBody>) -> Response<ProxyBody> {
    let status = resp.status();
    if status.as_u16() < 400 || !resp.headers().contains_key(REASON_HEADER) {
        return resp;
    }
    let (mut parts, _text) = resp.into_parts();
    parts.status = StatusCode::OK;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    parts
        .headers
        .insert("grpc-status", HeaderValue::from(grpc_code(status)));
    if let Some(reason) = parts.headers.get(REASON_HEADER).cloned() {
        // The reason header is already a valid, plain value; gRPC wants
        // its message percent-encoded, which plain ASCII without `%` is.
        let message = reason.to_str().ok().filter(|r| !r.contains('%'));
        if let Some(Ok(m)) = message.map(HeaderValue::from_str) {
            parts.headers.insert("grpc-message", m);
        }
    }
    Response::from_parts(parts, body::empty())
}

/// gRPC's HTTP-to-gRPC status mapping.
fn grpc_code(status: StatusCode) -> u32 {
    match status.as_u16() {
        400 => 13,                   // INTERNAL
        401 => 16,                   // UNAUTHENTICATED
        403 => 7,                    // PERMISSION_DENIED
        404 => 12,                   // UNIMPLEMENTED
        429 | 502 | 503 | 504 => 14, // UNAVAILABLE
        _ => 2,                      // UNKNOWN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(content_type: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).unwrap(),
        );
        h
    }

    #[test]
    fn grpc_calls_are_told_from_grpc_web_and_others() {
        assert!(is_grpc(&headers("application/grpc")));
        assert!(is_grpc(&headers("application/grpc+proto")));
        assert!(is_grpc(&headers("application/grpc;charset=utf-8")));
        assert!(!is_grpc(&headers("application/grpc-web")));
        assert!(!is_grpc(&headers("application/json")));
        assert!(!is_grpc(&HeaderMap::new()));
    }

    fn ours(status: StatusCode, reason: &str) -> Response<ProxyBody> {
        let mut resp = Response::new(body::full(format!("{reason}\n")));
        *resp.status_mut() = status;
        resp.headers_mut()
            .insert(REASON_HEADER, HeaderValue::from_str(reason).unwrap());
        resp
    }

    #[test]
    fn the_proxys_errors_become_trailers_only_statuses() {
        let resp = for_grpc_client(ours(StatusCode::NOT_FOUND, "no matching route"));
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()["grpc-status"], "12");
        assert_eq!(resp.headers()["grpc-message"], "no matching route");
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/grpc");
        assert!(hyper::body::Body::is_end_stream(resp.body()));
        let unavailable = for_grpc_client(ours(StatusCode::SERVICE_UNAVAILABLE, "x"));
        assert_eq!(unavailable.headers()["grpc-status"], "14");
        assert_eq!(grpc_code(StatusCode::GATEWAY_TIMEOUT), 14);
        assert_eq!(grpc_code(StatusCode::MISDIRECTED_REQUEST), 2);
    }

    #[test]
    fn backend_answers_and_redirects_pass_untouched() {
        // A backend's 404 carries no reason header of ours.
        let mut backend = Response::new(body::empty());
        *backend.status_mut() = StatusCode::NOT_FOUND;
        assert_eq!(for_grpc_client(backend).status(), StatusCode::NOT_FOUND);
        let redirect = for_grpc_client(ours(StatusCode::FOUND, "redirect"));
        assert_eq!(redirect.status(), StatusCode::FOUND);
    }
}
