//! The requests `prop_router` sends: methods, paths, queries, hosts and
//! headers built from the world's vocabulary, mutated, plus arbitrary
//! values; and the listener keys they arrive on.

use super::world::{INFRA, WORLD};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::BoxedStrategy;
use switchyard_proto::model::ObjectName;
use switchyard_proxy::router::ListenerKey;

fn from_world(values: &'static [String]) -> BoxedStrategy<String> {
    select(values).boxed()
}

fn method() -> BoxedStrategy<String> {
    prop_oneof![
        6 => select(&["GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"][..])
            .prop_map(str::to_string),
        1 => select(&["get", "BREW", "M-SEARCH", ""][..]).prop_map(str::to_string),
        1 => "[!#$%&'*+.^_`|~0-9A-Za-z-]{1,30}",
    ]
    .boxed()
}

/// Path segments that trip path handling: dot segments, encoded slashes
/// and dots, bad escapes, encoded Unicode, empties, and long runs.
fn segment() -> BoxedStrategy<String> {
    prop_oneof![
        4 => select(&[
            "", ".", "..", "%2e%2e", "%2E.", "%2F", "%2f..%2f", "%", "%zz", "%00", "%ff",
            "%C3%A9", "v1", "v12", "new", "prop", "post", "redirect", "re", "x;y", "a:b", "@",
            "~", "+", "!", "$", "'", "(", "*", ",", "=",
        ][..])
        .prop_map(str::to_string),
        2 => "[a-zA-Z0-9._~-]{0,12}",
        1 => ("[a-z]", 100usize..9000).prop_map(|(s, n)| s.repeat(n)),
        1 => "[!-~]{0,6}",
    ]
    .boxed()
}

/// A path: one from the table (so matches fire), mutated by extra
/// segments, trailing slashes, case; or built from segments alone.
fn path() -> BoxedStrategy<String> {
    let world = &*WORLD;
    prop_oneof![
        3 => (from_world(&world.paths), prop::collection::vec(segment(), 0..3), any::<(bool, bool)>())
            .prop_map(|(base, extra, (slash, upper))| {
                let mut p = base;
                for s in extra {
                    if !p.ends_with('/') {
                        p.push('/');
                    }
                    p.push_str(&s);
                }
                if slash {
                    p.push('/');
                }
                if upper {
                    p = p.to_uppercase();
                }
                p
            }),
        2 => prop::collection::vec(segment(), 0..6).prop_map(|s| format!("/{}", s.join("/"))),
        1 => select(&["*", "/", "//", "/prop/post", "/prop/empty", "/v1", "/prop/redirect"][..])
            .prop_map(str::to_string),
    ]
    .boxed()
}

fn query() -> BoxedStrategy<Option<String>> {
    let pair = prop_oneof![
        4 =>
        select(
            &[
                "animal=whale",
                "animal=dolphin",
                "q=abc",
                "q=ABC",
                "q",
                "=",
                "",
                "q=%",
                "q=%zz",
                "an%69mal=wh%61le",
                "q=%C3%A9",
                "&",
                "x==y"
            ][..]
        )
        .prop_map(str::to_string),
        3 => "[a-z]{0,5}=[a-zA-Z0-9%+./:;=@!$'()*,~?-]{0,10}",
        1 => "[a-z]{0,5}=[ -~]{0,10}",
    ];
    prop::option::of(prop::collection::vec(pair, 0..4).prop_map(|p| p.join("&"))).boxed()
}

/// A Host: a table hostname (wildcards made concrete or left raw), varied
/// by case, port and trailing dot; or IPv6, empty, or garbage.
fn host() -> BoxedStrategy<Option<String>> {
    let world = &*WORLD;
    let known = (
        from_world(&world.hosts),
        any::<bool>(),
        prop::option::of(select(&[":80", ":8080", ":0", ":99999", ":", ":abc"][..])),
        any::<bool>(),
        select(&["", "x.", "a.b."][..]),
    )
        .prop_map(|(h, upper, port, dot, fill)| {
            let mut h = match h.strip_prefix("*.") {
                // Half the time leave the `*` in, as an attacker might.
                Some(rest) if !fill.is_empty() => format!("{fill}{rest}"),
                _ => h,
            };
            if upper {
                h = h.to_uppercase();
            }
            if dot {
                h.push('.');
            }
            h.push_str(port.unwrap_or(""));
            h
        });
    prop::option::of(prop_oneof![
        6 => known,
        1 => select(&["[::1]", "[::1]:80", "[::1", "[]", "::1", "1.2.3.4:80", "", ":80", "user@host",
            "a..b", ".", "*", "*.bar.com"][..])
            .prop_map(str::to_string),
        1 => "[ -~]{0,30}",
    ])
    .boxed()
}

fn headers() -> BoxedStrategy<Vec<(String, Vec<u8>)>> {
    let world = &*WORLD;
    let name = prop_oneof![
        3 => from_world(&world.header_names),
        1 => select(&["x-version", "Version", "HOST", "host", "content-length", "te"][..])
            .prop_map(str::to_string),
        1 => "[!#$%&'*+.^_`|~0-9A-Za-z-]{1,20}",
    ];
    // Mostly bytes `http` accepts in a value (visible ASCII, space, tab,
    // obs-text), which still are not all valid UTF-8; rarely any byte.
    let value_byte = prop_oneof![8 => 0x20u8..0x7f, 2 => 0x80u8..=0xff, 1 => Just(b'\t')];
    let value = prop_oneof![
        6 => select(&["one", "two", "v1", "v2", "beta-1", "", " x ", "ünï"][..])
            .prop_map(|v| v.as_bytes().to_vec()),
        3 => prop::collection::vec(value_byte, 0..40),
        1 => (0usize..20_000).prop_map(|n| vec![b'a'; n]),
        1 => prop::collection::vec(any::<u8>(), 0..10),
    ];
    prop::collection::vec((name, value), 0..6).boxed()
}

/// One generated request, before `http` gets to accept or refuse it.
#[derive(Debug, Clone)]
pub struct RawRequest {
    method: String,
    /// Absolute-form (`http://authority/path`) instead of origin-form.
    absolute: bool,
    path: String,
    query: Option<String>,
    host: Option<String>,
    headers: Vec<(String, Vec<u8>)>,
}

pub fn raw_request() -> impl Strategy<Value = RawRequest> {
    (
        method(),
        prop::bool::weighted(0.2),
        path(),
        query(),
        host(),
        headers(),
    )
        .prop_map(
            |(method, absolute, path, query, host, headers)| RawRequest {
                method,
                absolute,
                path,
                query,
                host,
                headers,
            },
        )
}

/// The request as `http::request::Parts`, or `None` where `http` refuses
/// it (bad method token, URI or header bytes).
pub fn build(raw: &RawRequest) -> Option<http::request::Parts> {
    let mut uri = raw.path.clone();
    if let Some(q) = &raw.query {
        uri.push('?');
        uri.push_str(q);
    }
    if raw.absolute {
        let authority = raw.host.as_deref().unwrap_or("example.org");
        let sep = if uri.starts_with('/') { "" } else { "/" };
        uri = format!("http://{authority}{sep}{uri}");
    }
    let mut builder = http::Request::builder()
        .method(raw.method.as_str())
        .uri(uri);
    if let Some(h) = &raw.host {
        builder = builder.header(http::header::HOST, h.as_str());
    }
    for (name, value) in &raw.headers {
        builder = builder.header(name.as_str(), value.as_slice());
    }
    builder.body(()).ok().map(|r| r.into_parts().0)
}

/// Mostly the keys of the Gateway the hand-built routes attach to (most
/// conformance routes attach there too), sometimes any key at all.
pub fn listener_key() -> BoxedStrategy<ListenerKey> {
    let main = [Some(ObjectName::new(INFRA, "same-namespace")), None]
        .map(|gateway| ListenerKey { gateway, port: 80 });
    prop_oneof![
        3 => select(main.to_vec()),
        1 => select(&WORLD.keys[..]),
    ]
    .boxed()
}
