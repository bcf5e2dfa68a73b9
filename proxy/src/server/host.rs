//! Which host a request is for, decided once and written back as the one
//! `Host` header that routing reads and the backend receives.
//!
//! Rules (RFC 9112 §3.2, RFC 9113 §8.3.1):
//!
//! - More than one `Host` field: 400.
//! - HTTP/1.1 without `Host`: 400 (HTTP/1.0 may omit it).
//! - A `Host` that is not `host[:port]` — userinfo (`user@h.example`), a
//!   port that is not a number up to 65535 (`h.example:abc`), characters a
//!   host cannot have: 400. An empty `Host` is valid (RFC 9110 §7.2) and
//!   only matches listeners and routes without hostnames.
//! - Absolute-form targets (`GET http://other/ HTTP/1.1`): the target's
//!   authority wins over `Host`, which is replaced by it (a proxy MUST,
//!   RFC 9112 §3.2.2). Userinfo there is refused as well; so is a scheme
//!   other than `http` or `https`.
//! - HTTP/2: `:authority` is the host; a `host` field that names another
//!   host or port is a malformed request (400). The backend gets `Host`
//!   set to `:authority`.
//!
//! Not here: hostname matching (the router's `hostname` module).

use http::header::{self, HeaderValue};
use http::{Version, request};
use std::fmt;

/// Why the request's host is not acceptable; the request gets 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostError {
    /// More than one `Host` field.
    Duplicate,
    /// HTTP/1.1 without `Host`.
    Missing,
    /// Not `host[:port]`.
    Invalid,
    /// HTTP/2 `host` differs from `:authority`.
    AuthorityMismatch,
    /// An absolute-form target with a scheme other than http or https.
    Scheme,
}

impl HostError {
    /// Short kind for metrics.
    pub fn kind(self) -> &'static str {
        match self {
            HostError::Duplicate => "duplicate_host",
            HostError::Missing => "missing_host",
            HostError::Invalid => "invalid_host",
            HostError::AuthorityMismatch => "authority_mismatch",
            HostError::Scheme => "bad_scheme",
        }
    }
}

impl HostError {
    /// What is wrong, in words.
    pub fn as_str(self) -> &'static str {
        match self {
            HostError::Duplicate => "more than one Host header",
            HostError::Missing => "HTTP/1.1 request without Host",
            HostError::Invalid => "invalid Host",
            HostError::AuthorityMismatch => "Host differs from :authority",
            HostError::Scheme => "unsupported scheme in the request target",
        }
    }

    /// The reason a client gets.
    pub fn public_reason(self) -> &'static str {
        match self {
            HostError::Duplicate => "bad request: more than one Host header",
            HostError::Missing => "bad request: HTTP/1.1 request without Host",
            HostError::Invalid => "bad request: invalid Host",
            HostError::AuthorityMismatch => "bad request: Host differs from :authority",
            HostError::Scheme => "bad request: unsupported scheme in the request target",
        }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `host[:port]` split into its parts; `port` is `None` when absent or
/// empty (`h.example:` is valid syntax for "the default port").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HostPort<'a> {
    host: &'a str,
    port: Option<u16>,
}

/// Parses `uri-host [ ":" port ]` (RFC 3986 §3.2.2 and §3.2.3). IPv6
/// literals in brackets; `reg-name` characters otherwise.
fn parse_host_port(text: &str) -> Option<HostPort<'_>> {
    let (host, port) = if text.starts_with('[') {
        let end = text.find(']')?;
        let literal = &text[1..end];
        if literal.is_empty()
            || !literal
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return None;
        }
        let rest = &text[end + 1..];
        match rest.strip_prefix(':') {
            Some(port) => (&text[..=end], Some(port)),
            None if rest.is_empty() => (&text[..=end], None),
            None => return None,
        }
    } else {
        match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    // `reg-name`: unreserved, sub-delims and percent-encodings.
    let reg_name_ok = host.starts_with('[')
        || host
            .bytes()
            .all(|b| super::path::is_unreserved_or_sub_delim(b) || b == b'%');
    if !reg_name_ok || (host.is_empty() && port.is_some()) {
        return None;
    }
    let port = match port {
        None | Some("") => None,
        Some(digits) => {
            if digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(digits.parse::<u16>().ok()?)
        }
    };
    Some(HostPort { host, port })
}

fn default_port(scheme: Option<&str>) -> u16 {
    match scheme {
        Some("https") => 443,
        _ => 80,
    }
}

/// Whether two authorities name the same host and port (host compared
/// case-insensitively; an absent port is the scheme's default).
fn same_entity(a: HostPort<'_>, b: HostPort<'_>, scheme: Option<&str>) -> bool {
    let port = |p: Option<u16>| p.unwrap_or_else(|| default_port(scheme));
    a.host.eq_ignore_ascii_case(b.host) && port(a.port) == port(b.port)
}

/// Checks the request's host (see the module docs) and leaves exactly one
/// `Host` header naming it; the header is untouched when it already does.
pub fn settle_host(parts: &mut request::Parts) -> Result<(), HostError> {
    if let Some(value) = replacement_host(parts)? {
        parts.headers.insert(header::HOST, value);
    }
    Ok(())
}

/// The checks of [`settle_host`]; `Some` is the `Host` to write instead of
/// the one the request has.
fn replacement_host(parts: &request::Parts) -> Result<Option<HeaderValue>, HostError> {
    let mut hosts = parts.headers.get_all(header::HOST).iter();
    let first = hosts.next();
    if hosts.next().is_some() {
        return Err(HostError::Duplicate);
    }
    let host_field = match first {
        Some(value) => {
            let text = value.to_str().map_err(|_| HostError::Invalid)?;
            if !text.is_empty() {
                parse_host_port(text).ok_or(HostError::Invalid)?;
            }
            Some(text)
        }
        None => None,
    };
    let Some(authority) = parts.uri.authority() else {
        // Origin form (or `*`): the Host header is the host.
        if host_field.is_none() && parts.version == Version::HTTP_11 {
            return Err(HostError::Missing);
        }
        return Ok(None);
    };
    let authority_text = authority.as_str();
    if authority_text.contains('@') {
        return Err(HostError::Invalid);
    }
    let target = parse_host_port(authority_text).ok_or(HostError::Invalid)?;
    let scheme = parts.uri.scheme_str();
    if parts.version == Version::HTTP_2 {
        if let Some(text) = host_field
            && let Some(field) = parse_host_port(text)
            && !text.is_empty()
            && !same_entity(field, target, scheme)
        {
            return Err(HostError::AuthorityMismatch);
        }
    } else {
        if !matches!(scheme, Some("http") | Some("https")) {
            return Err(HostError::Scheme);
        }
        if host_field.is_none() && parts.version == Version::HTTP_11 {
            return Err(HostError::Missing);
        }
    }
    if host_field == Some(authority_text) {
        return Ok(None);
    }
    HeaderValue::from_str(authority_text)
        .map(Some)
        .map_err(|_| HostError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(version: Version, uri: &str, hosts: &[&str]) -> request::Parts {
        let mut b = http::Request::builder().version(version).uri(uri);
        for h in hosts {
            b = b.header(header::HOST, *h);
        }
        b.body(()).unwrap().into_parts().0
    }

    fn settle(version: Version, uri: &str, hosts: &[&str]) -> Result<String, HostError> {
        let mut p = parts(version, uri, hosts);
        settle_host(&mut p)?;
        let all: Vec<_> = p.headers.get_all(header::HOST).iter().collect();
        assert!(all.len() <= 1);
        Ok(all
            .first()
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default())
    }

    const H1: Version = Version::HTTP_11;
    const H2: Version = Version::HTTP_2;

    #[test]
    fn valid_hosts_pass_unchanged() {
        for h in [
            "h.example",
            "H.Example:8080",
            "[::1]:80",
            "[::1]",
            "10.0.0.1:1",
            "h.example:",
            "",
        ] {
            assert_eq!(settle(H1, "/", &[h]).unwrap(), h, "{h}");
        }
        assert_eq!(settle(Version::HTTP_10, "/", &[]).unwrap(), "");
    }

    #[test]
    fn rfc_9112_cases_are_refused() {
        assert_eq!(settle(H1, "/", &["a", "b"]), Err(HostError::Duplicate));
        assert_eq!(settle(H1, "/", &["a", "a"]), Err(HostError::Duplicate));
        assert_eq!(settle(H1, "/", &[]), Err(HostError::Missing));
        for bad in [
            "user@h.example",
            "h.example:abc",
            "h.example:99999",
            "h.example:123456",
            "[zz]:80",
            "[::1]x",
            ":80",
            "a/b",
            "h example",
        ] {
            assert!(settle(H1, "/", &[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn absolute_form_target_wins_over_host() {
        assert_eq!(
            settle(H1, "http://other/x", &["h.example"]).unwrap(),
            "other"
        );
        assert_eq!(
            settle(H1, "http://other:81/x", &["other:81"]).unwrap(),
            "other:81"
        );
        assert_eq!(
            settle(Version::HTTP_10, "http://other/x", &[]).unwrap(),
            "other"
        );
        assert_eq!(settle(H1, "http://other/x", &[]), Err(HostError::Missing));
        assert_eq!(
            settle(H1, "http://u@other/x", &["other"]),
            Err(HostError::Invalid)
        );
        assert_eq!(
            settle(H1, "ftp://other/x", &["other"]),
            Err(HostError::Scheme)
        );
    }

    #[test]
    fn http2_authority_and_host_must_agree() {
        assert_eq!(settle(H2, "http://h.example/", &[]).unwrap(), "h.example");
        assert_eq!(
            settle(H2, "http://h.example/", &["H.example:80"]).unwrap(),
            "h.example"
        );
        assert_eq!(
            settle(H2, "https://h.example/", &["h.example:443"]).unwrap(),
            "h.example"
        );
        assert_eq!(
            settle(H2, "http://h.example/", &["other.example"]),
            Err(HostError::AuthorityMismatch)
        );
        assert_eq!(
            settle(H2, "http://h.example/", &["h.example:81"]),
            Err(HostError::AuthorityMismatch)
        );
        assert_eq!(
            settle(H2, "http://h.example/", &["a", "b"]),
            Err(HostError::Duplicate)
        );
        // No :authority: the host field is the host.
        assert_eq!(settle(H2, "/", &["h.example"]).unwrap(), "h.example");
    }
}
