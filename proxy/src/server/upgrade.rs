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
//! HTTP/2 clients ask with extended CONNECT (RFC 8441: `:method CONNECT`,
//! `:protocol websocket`, which the proxy's HTTP/2 server advertises with
//! `SETTINGS_ENABLE_CONNECT_PROTOCOL`). Backends speak HTTP/1.1 upgrades,
//! so the ask becomes one: routed and forwarded as `GET` with
//! `Upgrade: websocket`, `Connection: upgrade` and a fresh
//! `Sec-WebSocket-Key` (the HTTP/2 form has none; the accept value the
//! backend derives from it means nothing to the client and is dropped),
//! and the backend's 101 reaches the client as the `200` that opens an
//! HTTP/2 tunnel. A backend that answers 2xx without switching would look
//! like an open tunnel to an HTTP/2 client: that is a bad gateway instead.
//! Only `websocket` is translated; other `:protocol` values stay ordinary
//! CONNECT requests, which no route serves.

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
    /// Resolves to the client's connection once hyper has written the 101
    /// (or, for extended CONNECT, the 200).
    pub client: OnUpgrade,
    /// Asked with HTTP/2 extended CONNECT rather than HTTP/1.1 `Upgrade`.
    pub extended_connect: bool,
}

/// The upgrade `req` asks for, if it is one the proxy tunnels (see the
/// module docs); takes hyper's handle on the client connection out of it.
/// An extended CONNECT for `websocket` is turned into the `GET` it stands
/// for here, before routing, so method matches see what the backend will.
pub(crate) fn take(req: &mut Request<Incoming>) -> Option<Requested> {
    if let Some(requested) = take_extended_connect(req) {
        return Some(requested);
    }
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
        extended_connect: false,
    })
}

/// RFC 8441's WebSocket bootstrap, as the `GET` upgrade it stands for.
fn take_extended_connect(req: &mut Request<Incoming>) -> Option<Requested> {
    let websocket = req.version() == Version::HTTP_2
        && req.method() == Method::CONNECT
        && req
            .extensions()
            .get::<hyper::ext::Protocol>()
            .is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"));
    if !websocket {
        return None;
    }
    req.extensions_mut().remove::<hyper::ext::Protocol>();
    *req.method_mut() = Method::GET;
    Some(Requested {
        protocol: HeaderValue::from_static("websocket"),
        client: hyper::upgrade::on(req),
        extended_connect: true,
    })
}

/// A `Sec-WebSocket-Key` for a backend: 16 random bytes in base64 (RFC
/// 6455 §4.1), which an HTTP/2 client's request does not carry.
pub(crate) fn websocket_key() -> HeaderValue {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: [u8; 16] = rand::random();
    let mut out = String::with_capacity(24);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    HeaderValue::from_str(&out)
        .unwrap_or_else(|_| HeaderValue::from_static("AAAAAAAAAAAAAAAAAAAAAA=="))
}

/// The HTTP/2 client's `200` that opens its tunnel, from the backend's
/// 101: the backend's headers less hop-by-hop ones, the upgrade fields and
/// `Sec-WebSocket-Accept` (an answer to the key the proxy made up).
pub(crate) fn connect_established<B>(backend_101: &Response<B>) -> Response<ProxyBody> {
    let mut resp = Response::new(body::empty());
    let h = resp.headers_mut();
    h.clone_from(backend_101.headers());
    headers::strip_hop_by_hop(h);
    h.remove(header::CONTENT_LENGTH);
    h.remove("sec-websocket-accept");
    resp
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
    fn websocket_keys_are_16_random_bytes_in_base64() {
        let a = websocket_key();
        let b = websocket_key();
        assert_ne!(a, b);
        for key in [a, b] {
            let key = key.to_str().unwrap();
            assert_eq!(key.len(), 24, "{key}");
            assert!(key.ends_with("==") && !key[..22].contains('='), "{key}");
            assert!(
                key[..22]
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
            );
        }
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
