//! HTTP/1.1 `Upgrade` (WebSocket and the like) through the proxy: which
//! requests ask for one, the headers that carry the ask to the backend,
//! and the 101 the client gets when the backend switches. The bytes after
//! the switch are [`super::tunnel`]'s.
//!
//! An upgrade request is HTTP/1.1, not CONNECT, without a body, with an
//! `Upgrade` field and `upgrade` among its `Connection` options (RFC 9110
//! §7.8 asks for both). Anything else is an ordinary request and loses both
//! headers as hop-by-hop, as before. Two exceptions are never tunnelled:
//! `h2c`, which would switch the connection itself to HTTP/2 and take
//! every later request on it out of the router's reach (Envoy strips it
//! too), and a request with a body, whose end the switched connection
//! would have to find on its own.
//!
//! Only `Upgrade` and `Connection: upgrade` are restored on the way up:
//! every other hop-by-hop rule (`headers`) still applies, to the request
//! and to the 101.
//!
//! Not here: HTTP/2 extended CONNECT (RFC 8441), which the proxy does not
//! offer its HTTP/2 clients.

use super::headers;
use crate::body::{self, ProxyBody};
use crate::error::BadUpgrade;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, Version};
use hyper::body::{Body, Incoming};
use hyper::upgrade::OnUpgrade;

/// An upgrade the client asked for.
#[derive(Debug)]
pub(crate) struct Requested {
    /// The client's `Upgrade` value, sent on as it is.
    pub protocol: HeaderValue,
    /// Resolves to the client's connection once hyper has written the 101.
    pub client: OnUpgrade,
}

/// The upgrade `req` asks for, if it is one the proxy tunnels (see the
/// module docs); takes hyper's handle on the client connection out of it.
pub(crate) fn take(req: &mut Request<Incoming>) -> Option<Requested> {
    if req.version() != Version::HTTP_11
        || req.method() == Method::CONNECT
        || !req.body().is_end_stream()
    {
        return None;
    }
    let protocol = asked_protocol(req.headers())?;
    Some(Requested {
        protocol,
        client: hyper::upgrade::on(req),
    })
}

/// The `Upgrade` value of a request whose headers ask for a protocol the
/// proxy tunnels.
fn asked_protocol(headers: &HeaderMap) -> Option<HeaderValue> {
    let mut upgrades = headers.get_all(header::UPGRADE).iter();
    // One field: two would have to be joined, and no client sends two.
    let (Some(protocol), None) = (upgrades.next(), upgrades.next()) else {
        return None;
    };
    let text = protocol.to_str().ok()?;
    let mut tokens = text.split(',').map(str::trim).filter(|t| !t.is_empty());
    let any = tokens.clone().next().is_some();
    if !any || tokens.any(|t| t.eq_ignore_ascii_case("h2c")) {
        return None;
    }
    has_connection_option(headers, "upgrade").then(|| protocol.clone())
}

/// Whether `Connection` lists `option`.
fn has_connection_option(headers: &HeaderMap, option: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case(option))
}

/// Puts the upgrade back into headers the hop-by-hop rules just cleaned:
/// `Upgrade: <protocol>` and `Connection: upgrade`, nothing else.
pub(crate) fn restore(headers: &mut HeaderMap, protocol: &HeaderValue) {
    headers.insert(header::UPGRADE, protocol.clone());
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
}

/// Takes the upgrade out of a copy of the shaped request (for a mirror,
/// which gets the plain request: only one backend can own the tunnel).
pub(crate) fn remove(headers: &mut HeaderMap) {
    headers.remove(header::UPGRADE);
    headers.remove(header::CONNECTION);
}

/// The client's 101, from the backend's: the backend's headers with the
/// hop-by-hop rules applied, then its `Upgrade` and `Connection: upgrade`
/// restored. A 101 that names no protocol is refused (the client could
/// not tell what it switched to).
pub(crate) fn switched_response<B>(
    backend_101: &Response<B>,
) -> Result<Response<ProxyBody>, BadUpgrade> {
    let protocol = backend_101
        .headers()
        .get(header::UPGRADE)
        .cloned()
        .ok_or(BadUpgrade::NoProtocol)?;
    let mut resp = Response::new(body::empty());
    *resp.status_mut() = backend_101.status();
    let h = resp.headers_mut();
    h.clone_from(backend_101.headers());
    headers::strip_hop_by_hop(h);
    // The switch carries no body; a length from the backend means nothing.
    h.remove(header::CONTENT_LENGTH);
    restore(h, &protocol);
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(
                header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn an_upgrade_needs_both_headers() {
        let asked = |pairs: &[(&str, &str)]| asked_protocol(&headers(pairs));
        assert_eq!(
            asked(&[("connection", "Upgrade"), ("upgrade", "websocket")]).unwrap(),
            "websocket"
        );
        assert_eq!(
            asked(&[
                ("connection", "keep-alive, upgrade"),
                ("upgrade", "websocket")
            ])
            .unwrap(),
            "websocket"
        );
        assert!(asked(&[("connection", "upgrade")]).is_none());
        assert!(asked(&[("upgrade", "websocket")]).is_none());
        assert!(asked(&[("connection", "keep-alive"), ("upgrade", "websocket")]).is_none());
        assert!(asked(&[("connection", "upgrade"), ("upgrade", " , ")]).is_none());
    }

    #[test]
    fn h2c_and_doubled_fields_are_not_tunnelled() {
        let asked = |pairs: &[(&str, &str)]| asked_protocol(&headers(pairs));
        assert!(asked(&[("connection", "upgrade"), ("upgrade", "h2c")]).is_none());
        assert!(asked(&[("connection", "upgrade"), ("upgrade", "websocket, H2C")]).is_none());
        assert!(
            asked(&[
                ("connection", "upgrade"),
                ("upgrade", "websocket"),
                ("upgrade", "foo"),
            ])
            .is_none()
        );
    }

    #[test]
    fn restoring_adds_only_the_upgrade() {
        let mut h = headers(&[
            ("connection", "upgrade, x-secret"),
            ("upgrade", "websocket"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ]);
        let protocol = asked_protocol(&h).unwrap();
        headers::strip_hop_by_hop(&mut h);
        restore(&mut h, &protocol);
        assert_eq!(h.len(), 3, "{h:?}");
        assert_eq!(h[header::CONNECTION], "upgrade");
        assert_eq!(h[header::UPGRADE], "websocket");
        assert!(h.contains_key("sec-websocket-key"));
    }

    #[test]
    fn the_client_gets_the_backends_101_minus_hop_by_hop() {
        let mut backend = Response::new(());
        *backend.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
        *backend.headers_mut() = headers(&[
            ("upgrade", "websocket"),
            ("connection", "Upgrade, x-internal"),
            ("x-internal", "1"),
            ("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            ("x-pod", "blue-0"),
        ]);
        let resp = switched_response(&backend).unwrap();
        assert_eq!(resp.status(), 101);
        let h = resp.headers();
        assert_eq!(h.len(), 4, "{h:?}");
        assert_eq!(h[header::CONNECTION], "upgrade");
        assert_eq!(h[header::UPGRADE], "websocket");
        assert_eq!(h["sec-websocket-accept"], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(h["x-pod"], "blue-0");

        backend.headers_mut().remove(header::UPGRADE);
        assert_eq!(
            switched_response(&backend).unwrap_err(),
            BadUpgrade::NoProtocol
        );
    }
}
