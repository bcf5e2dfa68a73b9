//! Request path normalization: the one spelling of a path that routing
//! matches, rewrites work on, and the backend receives.
//!
//! A path is normalized once, before routing, and the normalized path is
//! what is forwarded, so no backend can read a request differently than
//! the router did. The steps (RFC 3986 §6.2.2, plus the two choices the RFC
//! leaves open, set in [`PathSettings`]):
//!
//! 1. Percent-encodings: an invalid one (`%` not followed by two hex
//!    digits) is refused. Encoded unreserved characters (`A-Z a-z 0-9 - .
//!    _ ~`) are decoded (`/%61dmin` is `/admin`, `%2e%2e` is `..`); every
//!    other encoding is kept with its hex upper-cased (`%c3%a9` is
//!    `%C3%A9`).
//! 2. Encoded `/` and `\` (`%2F`, `%5C`): refused by default, since a
//!    backend that decodes them would see separators the router did not;
//!    or kept encoded and never treated as separators
//!    ([`EncodedSlashes::Keep`]).
//! 3. A raw `\` is refused (some backends treat it as `/`). Other
//!    characters RFC 3986 does not allow in a path but the HTTP parser
//!    lets through (`"`, `{`, `|`, bytes of UTF-8) are percent-encoded, so
//!    `/café` and `/caf%C3%A9` are one path.
//! 4. Runs of `/` are merged (by default; `merge_slashes`).
//! 5. Dot segments are removed (RFC 3986 §5.2.4): `/a/./b/../c` is `/a/c`.
//!    `..` at the root stays at the root (`/../etc` is `/etc`), as the
//!    RFC's algorithm and Envoy do: the result is what was matched and
//!    what is sent, so nothing escapes a route.
//!
//! The query is left alone. Paths that do not start with `/` (`*` of
//! `OPTIONS *`) are left alone too; no route matches them.
//!
//! Cheap for the common case: one scan over the bytes decides that an
//! already normal path needs nothing, and nothing is allocated then.
//!
//! Not here: Host (see `host`), matching (the router).

use crate::settings::{EncodedSlashes, PathSettings};
use std::borrow::Cow;
use std::fmt;

/// Why a path cannot be normalized safely; the request gets 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// `%` not followed by two hex digits.
    BadPercentEncoding,
    /// `%2F` or `%5C` while [`EncodedSlashes::Reject`].
    EncodedSlash,
    /// A raw `\`.
    Backslash,
}

impl PathError {
    /// Short kind for metrics.
    pub fn kind(self) -> &'static str {
        match self {
            PathError::BadPercentEncoding => "bad_percent_encoding",
            PathError::EncodedSlash => "encoded_slash",
            PathError::Backslash => "backslash",
        }
    }
}

impl PathError {
    /// What is wrong, in words.
    pub fn as_str(self) -> &'static str {
        match self {
            PathError::BadPercentEncoding => "invalid percent-encoding in the path",
            PathError::EncodedSlash => "encoded '/' or '\\' in the path",
            PathError::Backslash => "'\\' in the path",
        }
    }

    /// The reason a client gets.
    pub fn public_reason(self) -> &'static str {
        match self {
            PathError::BadPercentEncoding => "bad request: invalid percent-encoding in the path",
            PathError::EncodedSlash => "bad request: encoded '/' or '\\' in the path",
            PathError::Backslash => "bad request: '\\' in the path",
        }
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `b` may stand in a path as itself: RFC 3986 `pchar` minus
/// `%`, plus `/`.
fn is_path_char(b: u8) -> bool {
    is_unreserved_or_sub_delim(b) || matches!(b, b':' | b'@' | b'/')
}

/// RFC 3986 `unreserved / sub-delims`: what a path segment and a
/// host's `reg-name` both allow as themselves.
pub(super) fn is_unreserved_or_sub_delim(b: u8) -> bool {
    is_unreserved(b)
        || matches!(
            b,
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
        )
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// The value of an upper-case hex digit.
fn upper_hex(b: Option<&u8>) -> Option<u8> {
    match b.copied()? {
        b @ b'0'..=b'9' => Some(b - b'0'),
        b @ b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Whether `path` is already in normal form. One pass, no allocation.
fn is_normal(path: &[u8], settings: &PathSettings) -> bool {
    let mut prev = 0u8;
    let mut i = 0;
    while i < path.len() {
        let b = path[i];
        if b == b'%' {
            // Normal: upper-case hex of a byte that stays encoded.
            let (Some(h), Some(l)) = (upper_hex(path.get(i + 1)), upper_hex(path.get(i + 2)))
            else {
                return false;
            };
            let decoded = h * 16 + l;
            let slash = matches!(decoded, b'/' | b'\\');
            if is_unreserved(decoded)
                || (slash && settings.encoded_slashes == EncodedSlashes::Reject)
            {
                return false;
            }
            prev = b'%';
            i += 3;
            continue;
        }
        if !is_path_char(b) {
            return false;
        }
        if b == b'/' && prev == b'/' && settings.merge_slashes {
            return false;
        }
        // A segment of `.` or `..`: starts after a `/`, ends at `/` or
        // the end.
        if b == b'.' && prev == b'/' {
            let rest = &path[i + 1..];
            let dots = matches!(rest, [] | [b'/', ..] | [b'.'] | [b'.', b'/', ..]);
            if dots {
                return false;
            }
        }
        prev = b;
        i += 1;
    }
    true
}

/// Step 1 to 3: percent-encodings and characters, into `out`.
fn canonical_chars(path: &[u8], settings: &PathSettings) -> Result<Vec<u8>, PathError> {
    let mut out = Vec::with_capacity(path.len() + 8);
    let mut i = 0;
    while i < path.len() {
        let b = path[i];
        if b == b'%' {
            let (Some(h), Some(l)) = (
                path.get(i + 1).copied().and_then(hex_value),
                path.get(i + 2).copied().and_then(hex_value),
            ) else {
                return Err(PathError::BadPercentEncoding);
            };
            let decoded = h * 16 + l;
            if is_unreserved(decoded) {
                out.push(decoded);
            } else if matches!(decoded, b'/' | b'\\')
                && settings.encoded_slashes == EncodedSlashes::Reject
            {
                return Err(PathError::EncodedSlash);
            } else {
                out.extend_from_slice(&[
                    b'%',
                    HEX_UPPER[usize::from(h)],
                    HEX_UPPER[usize::from(l)],
                ]);
            }
            i += 3;
            continue;
        }
        if b == b'\\' {
            return Err(PathError::Backslash);
        }
        if is_path_char(b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[
                b'%',
                HEX_UPPER[usize::from(b >> 4)],
                HEX_UPPER[usize::from(b & 15)],
            ]);
        }
        i += 1;
    }
    Ok(out)
}

/// Steps 4 and 5 on a path that starts with `/`.
fn resolve_segments(path: &[u8], merge_slashes: bool) -> Vec<u8> {
    // Each kept segment, as a range of `path`; the output is `/` + each
    // segment joined by `/`, plus a trailing `/` when the input's last
    // segment was a dot segment or empty.
    let mut kept: Vec<&[u8]> = Vec::new();
    let mut trailing_slash = false;
    let mut segments = path[1..].split(|&b| b == b'/').peekable();
    while let Some(seg) = segments.next() {
        let last = segments.peek().is_none();
        match seg {
            b"." => trailing_slash = last,
            b".." => {
                kept.pop();
                trailing_slash = last;
            }
            b"" if merge_slashes => trailing_slash = last,
            _ => {
                kept.push(seg);
                trailing_slash = false;
            }
        }
    }
    let mut out = Vec::with_capacity(path.len());
    for seg in &kept {
        out.push(b'/');
        out.extend_from_slice(seg);
    }
    if out.is_empty() || trailing_slash {
        out.push(b'/');
    }
    out
}

/// The normal form of `path` (see the module docs); borrowed when `path`
/// already is normal.
pub fn normalize<'a>(path: &'a str, settings: &PathSettings) -> Result<Cow<'a, str>, PathError> {
    let bytes = path.as_bytes();
    if !bytes.starts_with(b"/") || is_normal(bytes, settings) {
        return Ok(Cow::Borrowed(path));
    }
    let chars = canonical_chars(bytes, settings)?;
    let resolved = resolve_segments(&chars, settings.merge_slashes);
    // Every byte is ASCII: non-path characters were percent-encoded.
    match String::from_utf8(resolved) {
        Ok(text) => Ok(Cow::Owned(text)),
        Err(_) => Err(PathError::BadPercentEncoding),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(path: &str) -> Result<String, PathError> {
        normalize(path, &PathSettings::default()).map(Cow::into_owned)
    }

    fn keep(path: &str) -> Result<String, PathError> {
        let settings = PathSettings {
            encoded_slashes: EncodedSlashes::Keep,
            ..PathSettings::default()
        };
        normalize(path, &settings).map(Cow::into_owned)
    }

    #[test]
    fn normal_paths_are_borrowed() {
        for p in [
            "/",
            "/a",
            "/a/b/",
            "/a.b/c..d/.e/f.",
            "/x:y@z!$&'()*+,;=-_~",
            "*",
            "",
        ] {
            assert!(
                matches!(normalize(p, &PathSettings::default()), Ok(Cow::Borrowed(_))),
                "{p}"
            );
        }
    }

    #[test]
    fn the_issue_spellings_of_admin_all_become_admin() {
        for p in [
            "/foo/../admin",
            "/./admin",
            "/%61dmin",
            "//admin",
            "/%2E%2e/admin",
            "/a/b/../../admin",
        ] {
            assert_eq!(n(p).unwrap(), "/admin", "{p}");
        }
        assert_eq!(n("/admin/../public").unwrap(), "/public");
        assert_eq!(n("/admin/%2e%2e/x").unwrap(), "/x");
        assert_eq!(n("/rw/../../etc/passwd").unwrap(), "/etc/passwd");
    }

    #[test]
    fn dot_segments_follow_rfc_3986() {
        let table = [
            ("/a/b/c/./../../g", "/a/g"),
            ("/mid/content=5/../6", "/mid/6"),
            ("/a/.", "/a/"),
            ("/a/..", "/"),
            ("/a/b/..", "/a/"),
            ("/..", "/"),
            ("/../..", "/"),
            ("/.", "/"),
            ("/a/.b", "/a/.b"),
            ("/a/..b/c", "/a/..b/c"),
            ("/a//b", "/a/b"),
            ("///", "/"),
            ("/a/", "/a/"),
            ("/a//", "/a/"),
        ];
        for (input, want) in table {
            assert_eq!(n(input).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn slashes_are_kept_when_merging_is_off() {
        let settings = PathSettings {
            merge_slashes: false,
            ..PathSettings::default()
        };
        assert!(matches!(
            normalize("//a", &settings),
            Ok(Cow::Borrowed("//a"))
        ));
        assert_eq!(normalize("//a/./b", &settings).unwrap(), "//a/b");
    }

    #[test]
    fn encodings_are_decoded_or_uppercased() {
        assert_eq!(n("/caf%c3%a9").unwrap(), "/caf%C3%A9");
        assert_eq!(n("/caf\u{e9}").unwrap(), "/caf%C3%A9");
        assert_eq!(n("/a%7eb%2D%5F").unwrap(), "/a~b-_");
        assert_eq!(n("/a%20b").unwrap(), "/a%20b");
        assert_eq!(n("/a\"b{c}").unwrap(), "/a%22b%7Bc%7D");
        assert_eq!(n("/100%25").unwrap(), "/100%25");
    }

    #[test]
    fn unsafe_paths_are_refused() {
        assert_eq!(n("/a%zz"), Err(PathError::BadPercentEncoding));
        assert_eq!(n("/a%4"), Err(PathError::BadPercentEncoding));
        assert_eq!(n("/a%"), Err(PathError::BadPercentEncoding));
        assert_eq!(n("/x/..%2fadmin"), Err(PathError::EncodedSlash));
        assert_eq!(n("/x%5c..%5cadmin"), Err(PathError::EncodedSlash));
        assert_eq!(n("/x\\admin"), Err(PathError::Backslash));
    }

    #[test]
    fn kept_encoded_slashes_are_never_separators() {
        assert_eq!(keep("/x/..%2fadmin").unwrap(), "/x/..%2Fadmin");
        assert_eq!(keep("/a%2F..%2F/b").unwrap(), "/a%2F..%2F/b");
        assert_eq!(keep("/x\\a"), Err(PathError::Backslash));
    }

    #[test]
    fn normalizing_twice_changes_nothing() {
        for p in [
            "/a/../b//c/%7e",
            "/x/%2e/y/..",
            "/caf\u{e9}/",
            "/%41%42/../%43",
        ] {
            let once = n(p).unwrap();
            assert_eq!(n(&once).unwrap(), once, "{p}");
            assert!(matches!(
                normalize(&once, &PathSettings::default()),
                Ok(Cow::Borrowed(_))
            ));
        }
    }
}
