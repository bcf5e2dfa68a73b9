//! Property: routing on a normalized path and on any equivalent spelling
//! of it picks the same route, with the same rewrites, through the entry
//! point the server uses (`inbound::settle`, then `RouteTable::route`).
//!
//! Spellings are made from a normal path by RFC 3986 equivalences (and
//! the two the proxy adds): `.` and `x/..` segments, a climb above the
//! root, doubled slashes, percent-encoded unreserved characters in either
//! hex case, lower-case hex for encodings that stay, raw UTF-8 for its
//! encoding. A second property feeds arbitrary paths: each is refused
//! (400) or settles to a fixed point of normalization with no dot
//! segments, no doubled slashes, no encoded unreserved characters and
//! upper-case hex.
//!
//! Cases: 512, or `PROPTEST_CASES`; every run prints a seed that
//! `PROPTEST_RNG_SEED` replays.

mod support;

use proptest::prelude::*;
use proptest::sample::select;
use std::borrow::Cow;
use std::sync::LazyLock;
use support::*;
use switchyard_proxy::router::{Decision, RouteTable};
use switchyard_proxy::server::{inbound, path};
use switchyard_proxy::settings::PathSettings;
use switchyard_test_support::strategies;

const NS: &str = "prop-path";

fn config() -> ProptestConfig {
    strategies::config(512, "cargo test -p switchyard-proxy --test prop_path")
}

const ROUTES: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: paths, namespace: prop-path}
spec:
  parentRefs: [{name: gw}]
  hostnames: [app.example]
  rules:
  - matches: [{path: {type: PathPrefix, value: /admin}}]
    backendRefs: [{name: admin, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /admin/x}}]
    backendRefs: [{name: admin-x, port: 8080}]
  - matches: [{path: {type: Exact, value: /exact/path}}]
    backendRefs: [{name: exact, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /~user}}]
    backendRefs: [{name: user, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: "/caf%c3%a9"}}]
    backendRefs: [{name: cafe, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /a.b}}]
    backendRefs: [{name: dotted, port: 8080}]
  - matches: [{path: {type: RegularExpression, value: "/rx/[a-z]+/[0-9]+"}}]
    backendRefs: [{name: rx, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /api/v1}}]
    filters:
    - type: URLRewrite
      urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /internal}}
    backendRefs: [{name: api, port: 8080}]
  - backendRefs: [{name: public, port: 8080}]
"#;

static TABLE: LazyLock<RouteTable> = LazyLock::new(|| {
    let mut text = simple_gateway_yaml(NS);
    text.push_str("---\n");
    text.push_str(ROUTES);
    let (mut snapshot, routes) = snapshot_of(1, parse_yaml(&text));
    snapshot.gateway_classes.push(gateway_class());
    snapshot.namespaces.push(namespace(NS, &[]));
    for name in [
        "admin", "admin-x", "exact", "user", "cafe", "dotted", "rx", "api", "public",
    ] {
        snapshot.services.push(service(NS, name, 8080, 1));
    }
    let table = RouteTable::compile(&snapshot, &routes);
    assert!(table.notes().is_empty(), "{:?}", table.notes());
    table
});

/// Segments already in normal form.
const VOCABULARY: [&str; 17] = [
    "admin",
    "x",
    "exact",
    "path",
    "~user",
    "caf%C3%A9",
    "a.b",
    "rx",
    "abc",
    "123",
    "api",
    "v1",
    "..a",
    ".b",
    "b~",
    "%20",
    "A-Z_9",
];

/// The request the server routes after settling `target`, or why not.
fn settled(target: &str) -> Result<http::request::Parts, String> {
    let (mut parts, ()) = http::Request::get(target)
        .header("host", "app.example")
        .body(())
        .map_err(|e| format!("http refused {target:?}: {e}"))?
        .into_parts();
    inbound::settle(&mut parts, &PathSettings::default()).map_err(|e| e.to_string())?;
    Ok(parts)
}

fn decide(parts: &http::request::Parts) -> Decision {
    TABLE.route(&simple_listener(NS), parts, 7)
}

/// One segment respelled by `bits`: unreserved characters percent-encoded
/// (hex in either case), kept encodings in lower case, `%C3%A9` as raw
/// UTF-8.
fn spell_segment(segment: &str, mut bits: u64) -> String {
    let mut bit = || {
        let b = bits & 1 == 1;
        bits = bits.rotate_right(1);
        b
    };
    if segment == "caf%C3%A9" && bit() {
        return "caf\u{e9}".to_owned();
    }
    let bytes = segment.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let group = &segment[i..i + 3];
            out.push_str(&if bit() {
                group.to_ascii_lowercase()
            } else {
                group.to_owned()
            });
            i += 3;
            continue;
        }
        let c = bytes[i];
        if bit() {
            let hex = format!("%{c:02X}");
            out.push_str(&if bit() { hex.to_ascii_lowercase() } else { hex });
        } else {
            out.push(c as char);
        }
        i += 1;
    }
    out
}

/// An equivalent spelling of the path made of `segments`.
fn spell(segments: &[&str], trailing: bool, noise: &[u64], climb: bool) -> String {
    let mut out = String::new();
    if climb {
        out.push_str("/..");
    }
    for (segment, &bits) in segments.iter().zip(noise) {
        if bits & 1 != 0 {
            out.push_str("/.");
        }
        if bits & 2 != 0 {
            out.push_str("/junk/..");
        }
        if bits & 4 != 0 {
            out.push('/');
        }
        out.push('/');
        out.push_str(&spell_segment(segment, bits >> 3));
    }
    if trailing && !segments.is_empty() {
        out.push('/');
        match noise.last().copied().unwrap_or(0) >> 60 {
            1 => out.push('.'),
            2 => out.push_str("junk/.."),
            _ => {}
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

fn canonical(segments: &[&str], trailing: bool) -> String {
    let mut out = String::new();
    for segment in segments {
        out.push('/');
        out.push_str(segment);
    }
    if trailing || out.is_empty() {
        out.push('/');
    }
    out
}

/// Whether `p` has any of what normalization removes.
fn normal_form_violation(p: &str) -> Option<&'static str> {
    if !p.starts_with('/') {
        return Some("does not start with /");
    }
    if p.contains("//") {
        return Some("doubled slash");
    }
    for segment in p[1..].split('/') {
        if segment == "." || segment == ".." {
            return Some("dot segment");
        }
    }
    let bytes = p.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'%' {
            let hex = &p[i + 1..i + 3];
            if hex.bytes().any(|h| h.is_ascii_lowercase()) {
                return Some("lower-case hex");
            }
            let decoded = u8::from_str_radix(hex, 16).unwrap_or(0);
            if decoded.is_ascii_alphanumeric() || b"-._~/\\".contains(&decoded) {
                return Some("encoded unreserved or slash");
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn equivalent_spellings_route_alike(
        segments in prop::collection::vec(select(&VOCABULARY[..]), 0..6),
        trailing in any::<bool>(),
        noise in prop::collection::vec(any::<u64>(), 6),
        climb in any::<bool>(),
        query in select(&["", "?q=1", "?x=/../admin"][..]),
    ) {
        let normal = canonical(&segments, trailing);
        let spelled = spell(&segments, trailing, &noise, climb);
        let want = settled(&format!("{normal}{query}")).map_err(TestCaseError::fail)?;
        prop_assert_eq!(want.uri.path(), normal.as_str(), "the canonical path changed");
        let got = settled(&format!("{spelled}{query}")).map_err(TestCaseError::fail)?;
        prop_assert_eq!(got.uri.path(), normal.as_str(), "spelling {}", spelled);
        prop_assert_eq!(got.uri.query(), want.uri.query());
        prop_assert_eq!(decide(&got), decide(&want), "spelling {}", spelled);
    }

    #[test]
    fn any_path_is_refused_or_settles_to_normal_form(
        raw in prop_oneof![
            4 => "(/|//|/\\.|/\\.\\.|%2[eEfF]|%5[cC]|%[0-9a-fA-F]{2}|%|[a-zA-Z0-9._~-]){0,12}",
            1 => "/[ -~]{0,20}",
            1 => "/[a\u{e9}\u{4e2d}/%.]{0,10}",
        ],
    ) {
        let target = if raw.starts_with('/') { raw.clone() } else { format!("/{raw}") };
        // Refused by `http` itself: the parser's job.
        let Ok(req) = http::Request::get(target.as_str()).header("host", "app.example").body(()) else {
            return Ok(());
        };
        let (mut parts, ()) = req.into_parts();
        match inbound::settle(&mut parts, &PathSettings::default()) {
            Err(_) => prop_assert!(
                target.contains('%') || target.contains('\\'),
                "{} refused without an encoding or a backslash", target
            ),
            Ok(()) => {
                let p = parts.uri.path();
                prop_assert_eq!(normal_form_violation(p), None, "{} settled to {}", target, p);
                prop_assert!(
                    matches!(path::normalize(p, &PathSettings::default()), Ok(Cow::Borrowed(_))),
                    "{} settled to {}, which is not a fixed point", target, p
                );
                let _ = decide(&parts);
            }
        }
    }
}
