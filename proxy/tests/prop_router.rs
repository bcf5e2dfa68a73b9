//! Property: `RouteTable::route` decides every request `http` can
//! represent, without panicking, and its decision is always one the data
//! plane can carry out:
//!
//! - `Forward` to a backend that `table.backends()` lists (the set the
//!   proxy warms and keeps pools for), with mirrors from that set too; or
//! - `Respond` with a 3xx, 4xx or 5xx status, a 3xx carrying `Location`
//!   first.
//!
//! and the same request with the same random number gets the same
//! decision (the router has no state of its own). Generated requests are
//! checked as built and as the server routes them, after
//! `inbound::settle` (Host settled, path normalized).
//!
//! Why: `route` runs on every request with attacker-chosen method, path,
//! query, Host and headers. A panic there kills the connection task; a
//! forward to a backend outside `backends()` finds no pool.
//!
//! The table is compiled from every Gateway, HTTPRoute and ReferenceGrant
//! of the Gateway API conformance files (`tests/data/gateway-api` of the
//! repository; the test fails rather than skips without it),
//! parsed by the project's own parser, plus hand-built routes for what
//! those files lack: regex paths, headers and query parameters, query and
//! method matches, backend-level redirects, rewrites after regex matches,
//! fractional mirrors, huge and zero weights, missing Services. Requests
//! are built from the table's own hosts, paths and header names, mutated
//! (case, ports, `..`, percent-encoding, length), plus arbitrary values;
//! inputs `http::Request::builder()` rejects are skipped, since refusing
//! them is the HTTP parser's job.
//!
//! Cases: 1024, or `PROPTEST_CASES`. Failures are not persisted to a
//! regressions file (the shrunk request is printed instead, and a real bug
//! becomes a named test); every run prints a seed that `PROPTEST_RNG_SEED`
//! replays.

use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::BoxedStrategy;
use proptest::test_runner::RngSeed;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::sync::LazyLock;
use switchyard_proto::model::validate::MAX_WEIGHT;
use switchyard_proto::model::*;
use switchyard_proxy::router::{Decision, ListenerKey, RouteTable};

/// Default cases: a request costs microseconds (1024 take about a second
/// in debug), so more than the other property files.
const CASES: u32 = 1024;

/// Proptest's defaults (which read `PROPTEST_*`), with our case count
/// unless `PROPTEST_CASES` is set (`with_cases` would override the env var),
/// no failure persistence, and a printed seed (libtest shows it only when
/// the test fails).
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = CASES;
    }
    config.failure_persistence = None;
    let seed = match config.rng_seed {
        RngSeed::Fixed(seed) => seed,
        RngSeed::Random => std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish(),
    };
    config.rng_seed = RngSeed::Fixed(seed);
    eprintln!(
        "proptest seed {seed}; reproduce: PROPTEST_RNG_SEED={seed} \
         cargo test -p switchyard-proxy --test prop_router"
    );
    config
}

/// The compiled table and the vocabulary requests are built from.
struct World {
    table: RouteTable,
    backends: BTreeSet<BackendKey>,
    /// Every listener key a served Gateway has, plus keys nobody serves.
    keys: Vec<ListenerKey>,
    /// Hostnames from listeners and routes (wildcards as written).
    hosts: Vec<String>,
    /// Paths from path matches, filters and redirects.
    paths: Vec<String>,
    /// Header names from matches.
    header_names: Vec<String>,
}

static WORLD: LazyLock<World> = LazyLock::new(build_world);

const INFRA: &str = "gateway-conformance-infra";

fn build_world() -> World {
    let dir = switchyard_test_support::gateway_api_cases();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "conformance data not found at {} ({e}); this test needs it and does not skip",
            dir.display()
        )
    });
    let mut paths: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();

    // Keyed by name so objects shared between files (the base Gateways)
    // appear once; the first file's copy wins.
    let mut gateways: BTreeMap<ObjectName, Gateway> = BTreeMap::new();
    let mut routes: BTreeMap<ObjectName, HttpRoute> = BTreeMap::new();
    let mut grants: BTreeMap<ObjectName, ReferenceGrant> = BTreeMap::new();
    let mut services: BTreeMap<(String, String), BTreeSet<u16>> = BTreeMap::new();
    let mut namespace_labels: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for path in &paths {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).expect("readable conformance file");
        let data: Value = yaml_serde::from_str(&text).expect("conformance file is YAML");
        let mut index = 0;
        for list in ["gateways", "routes", "reference_grants"] {
            for object in data[list].as_array().into_iter().flatten() {
                let resource = switchyard_kubeconfig::parse_object(&source, index, object.clone())
                    .unwrap_or_else(|e| panic!("{e}"));
                index += 1;
                let name = resource.meta().object_name();
                namespace_labels.entry(name.namespace.clone()).or_default();
                match resource {
                    Resource::Gateway(g) => {
                        gateways.entry(name).or_insert(g);
                    }
                    Resource::HttpRoute(r) => {
                        routes.entry(name).or_insert(r);
                    }
                    Resource::ReferenceGrant(g) => {
                        grants.entry(name).or_insert(g);
                    }
                    other => panic!("{source}: unexpected {} in {list}", other.kind()),
                }
            }
        }
        for backend in data["backends"].as_array().into_iter().flatten() {
            if !backend["exists_in_base"].as_bool().unwrap_or(false) {
                continue;
            }
            let key = backend["service"]
                .as_str()
                .and_then(BackendKey::parse)
                .expect("backends[].service is ns/name:port");
            services
                .entry((key.service.namespace, key.service.name))
                .or_default()
                .insert(key.port);
        }
        if let Some(labels) = data["namespace_labels"].as_object() {
            for (ns, pairs) in labels {
                let entry = namespace_labels.entry(ns.clone()).or_default();
                for (k, v) in pairs.as_object().into_iter().flatten() {
                    entry.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
                }
            }
        }
    }
    for (name, route) in extra_routes() {
        routes.insert(name, route);
    }
    for (ns, name, port) in [
        (INFRA, "prop-a", 80),
        (INFRA, "prop-b", 80),
        (INFRA, "prop-b", 81),
    ] {
        services
            .entry((ns.to_string(), name.to_string()))
            .or_default()
            .insert(port);
    }

    let mut snapshot = ConfigSnapshot {
        version: 1,
        ..Default::default()
    };
    let classes: BTreeSet<String> = gateways
        .values()
        .map(|g| g.gateway_class_name.clone())
        .collect();
    for class in classes {
        snapshot.gateway_classes.push(GatewayClass {
            meta: ObjectMeta::named("", class),
            controller_name: CONTROLLER_NAME.to_string(),
        });
    }
    for (ns, labels) in namespace_labels {
        let mut meta = ObjectMeta::named("", ns.clone());
        meta.labels = labels;
        meta.labels
            .insert("kubernetes.io/metadata.name".to_string(), ns);
        snapshot.namespaces.push(Namespace { meta });
    }
    snapshot.gateways = gateways.into_values().collect();
    snapshot.reference_grants = grants.into_values().collect();
    snapshot.services = services
        .into_iter()
        .map(|((ns, name), ports)| Service {
            meta: ObjectMeta::named(ns, name),
            ports: ports
                .into_iter()
                .map(|port| ServicePort {
                    name: Some("http".to_string()),
                    port,
                    target_port: None,
                })
                .collect(),
        })
        .collect();
    let routes: Vec<HttpRoute> = routes.into_values().collect();
    let table = RouteTable::compile(&snapshot, &routes);

    let mut keys = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for g in &snapshot.gateways {
        for l in &g.listeners {
            keys.insert(ListenerKey {
                gateway: Some(g.meta.object_name()),
                port: l.port,
            });
            keys.insert(ListenerKey {
                gateway: None,
                port: l.port,
            });
            hosts.extend(l.hostname.clone());
        }
    }
    // Keys no served Gateway has: the router must 404, not panic.
    keys.insert(ListenerKey {
        gateway: Some(ObjectName::new("nope", "nope")),
        port: 80,
    });
    keys.insert(ListenerKey {
        gateway: None,
        port: 0,
    });
    let mut paths = BTreeSet::new();
    let mut header_names = BTreeSet::new();
    for r in &routes {
        hosts.extend(r.hostnames.iter().cloned());
        for rule in &r.rules {
            for m in &rule.matches {
                match &m.path {
                    Some(PathMatch::Exact(p)) | Some(PathMatch::PathPrefix(p)) => {
                        paths.insert(p.clone());
                    }
                    _ => {}
                }
                header_names.extend(m.headers.iter().map(|h| h.name.clone()));
            }
        }
    }
    let backends = table.backends();
    assert!(
        backends.len() > 5,
        "the table serves too few backends: {backends:?}"
    );
    World {
        table,
        backends,
        keys: keys.into_iter().collect(),
        hosts: hosts.into_iter().collect(),
        paths: paths.into_iter().collect(),
        header_names: header_names.into_iter().collect(),
    }
}

/// Routes covering what the conformance files do not: regexes, query and
/// method matches, backend redirects, rewrites after regex matches,
/// fractional mirrors, extreme weights, missing Services and ports.
fn extra_routes() -> Vec<(ObjectName, HttpRoute)> {
    let svc = |name: &str, port: u16, weight: u32| BackendRef {
        weight,
        ..BackendRef::service(name, port)
    };
    let m = |path: Option<PathMatch>| RouteMatch {
        path,
        ..Default::default()
    };
    let regex = |p: &str| Some(PathMatch::RegularExpression(p.to_string()));
    let rules = vec![
        RouteRule {
            matches: vec![
                m(regex("/v[0-9]+(/.*)?")),
                m(regex("/(")), // bad regex: never matches, noted
                RouteMatch {
                    headers: vec![HeaderMatch {
                        match_type: StringMatchType::RegularExpression,
                        name: "x-version".into(),
                        value: "v[12]|.*beta.*".into(),
                    }],
                    query_params: vec![QueryParamMatch {
                        match_type: StringMatchType::RegularExpression,
                        name: "q".into(),
                        value: "[a-z]*".into(),
                    }],
                    ..m(Some(PathMatch::PathPrefix("/prop".into())))
                },
            ],
            filters: vec![Filter::UrlRewrite(UrlRewrite {
                hostname: Some("rewritten.example".into()),
                path: Some(PathModifier::ReplacePrefixMatch("/new/".into())),
            })],
            backend_refs: vec![svc("prop-a", 80, MAX_WEIGHT), svc("prop-b", 81, 1)],
            ..Default::default()
        },
        RouteRule {
            matches: vec![RouteMatch {
                method: Some("POST".into()),
                query_params: vec![QueryParamMatch {
                    match_type: StringMatchType::Exact,
                    name: "animal".into(),
                    value: "whale".into(),
                }],
                ..m(Some(PathMatch::Exact("/prop/post".into())))
            }],
            filters: vec![Filter::RequestMirror(RequestMirror {
                backend_ref: svc("prop-b", 80, 1),
                percent: None,
                fraction: Some((1, 3)),
            })],
            backend_refs: vec![
                svc("prop-a", 80, 0),
                svc("missing", 80, u32::MAX / 4),
                svc("prop-b", 99, 1),
                BackendRef {
                    filters: vec![Filter::RequestRedirect(RequestRedirect {
                        scheme: Some("https".into()),
                        hostname: None,
                        path: Some(PathModifier::ReplaceFullPath("/moved".into())),
                        port: Some(8443),
                        status_code: Some(301),
                    })],
                    ..svc("prop-a", 80, u32::MAX / 4)
                },
                BackendRef {
                    filters: vec![Filter::RequestMirror(RequestMirror {
                        backend_ref: svc("missing", 80, 1),
                        percent: Some(50),
                        fraction: None,
                    })],
                    ..svc("prop-b", 80, 3)
                },
            ],
            ..Default::default()
        },
        RouteRule {
            matches: vec![m(Some(PathMatch::PathPrefix("/prop/redirect/".into())))],
            filters: vec![
                Filter::RequestRedirect(RequestRedirect {
                    path: Some(PathModifier::ReplacePrefixMatch("/".into())),
                    ..Default::default()
                }),
                Filter::ResponseHeaderModifier(HeaderModifier {
                    set: vec![HeaderValue {
                        name: "x-set".into(),
                        value: "1".into(),
                    }],
                    ..Default::default()
                }),
            ],
            ..Default::default()
        },
        RouteRule {
            // Regex match plus ReplacePrefixMatch: the path is kept.
            matches: vec![m(regex("/prop/re/.*"))],
            filters: vec![Filter::UrlRewrite(UrlRewrite {
                hostname: None,
                path: Some(PathModifier::ReplacePrefixMatch("/x".into())),
            })],
            backend_refs: vec![svc("prop-a", 80, 1)],
            ..Default::default()
        },
        RouteRule {
            // No backends: 500.
            matches: vec![m(Some(PathMatch::Exact("/prop/empty".into())))],
            ..Default::default()
        },
    ];
    let parent = ParentRef {
        group: "gateway.networking.k8s.io".into(),
        kind: "Gateway".into(),
        namespace: None,
        name: "same-namespace".into(),
        section_name: None,
        port: None,
    };
    let with_hosts = HttpRoute {
        meta: ObjectMeta::named(INFRA, "prop-hosts"),
        parent_refs: vec![parent.clone()],
        hostnames: vec!["*.prop.example".into(), "prop.example".into()],
        rules: rules.clone(),
    };
    let any_host = HttpRoute {
        meta: ObjectMeta::named(INFRA, "prop-any"),
        parent_refs: vec![parent],
        hostnames: Vec::new(),
        rules,
    };
    [with_hosts, any_host]
        .into_iter()
        .map(|r| (r.meta.object_name(), r))
        .collect()
}

// ---- requests ---------------------------------------------------------------

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
struct RawRequest {
    method: String,
    /// Absolute-form (`http://authority/path`) instead of origin-form.
    absolute: bool,
    path: String,
    query: Option<String>,
    host: Option<String>,
    headers: Vec<(String, Vec<u8>)>,
}

fn raw_request() -> impl Strategy<Value = RawRequest> {
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
fn build(raw: &RawRequest) -> Option<http::request::Parts> {
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
fn listener_key() -> BoxedStrategy<ListenerKey> {
    let main = [Some(ObjectName::new(INFRA, "same-namespace")), None]
        .map(|gateway| ListenerKey { gateway, port: 80 });
    prop_oneof![
        3 => select(main.to_vec()),
        1 => select(&WORLD.keys[..]),
    ]
    .boxed()
}

/// The property, for one request on one listener key.
fn check(
    key: &ListenerKey,
    parts: &http::request::Parts,
    random: u64,
) -> Result<(), TestCaseError> {
    let world = &*WORLD;
    let decision = world.table.route(key, parts, random);
    match &decision {
        Decision::Forward(plan) => {
            prop_assert!(
                world.backends.contains(&plan.backend),
                "forward to {} which backends() does not list",
                plan.backend
            );
            // The data plane applies the edits to the request's own
            // headers and to the upstream answer's: neither may panic.
            let mut headers = parts.headers.clone();
            plan.request_headers.apply(&mut headers);
            plan.response_headers.apply(&mut headers);
            for mirror in &plan.mirrors {
                prop_assert!(
                    world.backends.contains(mirror),
                    "mirror to {} which backends() does not list",
                    mirror
                );
            }
        }
        Decision::Respond(r) => {
            let status = r.status.as_u16();
            prop_assert!(
                (300..600).contains(&status),
                "direct answer {} ({}) is not 3xx/4xx/5xx",
                status,
                r.reason
            );
            if r.status.is_redirection() {
                prop_assert!(
                    r.headers
                        .first()
                        .is_some_and(|(n, _)| n == http::header::LOCATION),
                    "redirect without Location first: {:?}",
                    r.headers
                );
            }
        }
    }
    // No hidden state: the same inputs decide the same way.
    prop_assert_eq!(world.table.route(key, parts, random), decision);
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// Generated requests on every listener key, with any random number.
    #[test]
    fn route_decides_every_request(
        key in listener_key(),
        raw in raw_request(),
        random in any::<u64>(),
    ) {
        // Refused by `http`: the HTTP parser's job, not the router's.
        let Some(parts) = build(&raw) else { return Ok(()) };
        check(&key, &parts, random)?;
        // And as the server routes it: Host settled, path normalized (or
        // refused with 400, which never reaches the router).
        let mut settled = parts.clone();
        if switchyard_proxy::server::inbound::settle(&mut settled, &Default::default()).is_ok() {
            check(&key, &settled, random)?;
        }
    }

    /// Requests that hit the hand-built routes (the host and path prefixes
    /// they match) far more often than random generation would, with
    /// weights probed at their edges through `random`.
    #[test]
    fn route_decides_requests_aimed_at_filters(
        gateway in prop::option::of(Just(ObjectName::new(INFRA, "same-namespace"))),
        host in select(&["prop.example", "a.prop.example", "PROP.EXAMPLE:80", "example.org"][..]),
        path in select(&["/v1", "/v12/x", "/prop", "/prop/", "/prop/post", "/prop/redirect/a/b",
            "/prop/redirect", "/prop/re/x", "/prop/empty", "/prop/%2e%2e/x"][..]),
        query in select(&["", "?animal=whale", "?q=abc", "?q=abc&animal=whale", "?q=%zz"][..]),
        method in select(&["GET", "POST"][..]),
        version in select(&["v1", "v3", "x-beta-y", ""][..]),
        random in prop_oneof![any::<u64>(), Just(0u64), Just(u64::MAX), (0u64..4).prop_map(|n| u64::MAX - n)],
    ) {
        let parts = http::Request::builder()
            .method(method)
            .uri(format!("{path}{query}"))
            .header("host", host)
            .header("x-version", version)
            .body(())
            .expect("valid request")
            .into_parts()
            .0;
        check(&ListenerKey { gateway, port: 80 }, &parts, random)?;
    }
}
