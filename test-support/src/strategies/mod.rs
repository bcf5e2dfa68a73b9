//! proptest strategies for the model's values (`switchyard_proto::model`),
//! shared by the property tests of every crate.
//!
//! Owns: value pools that are mostly valid with some invalid values mixed
//! in (bad names, port 0, duplicate keys and listeners, bad regexes, huge
//! weights, bad annotations), every resource kind built from them, and
//! well-formed routes over the same pools; plus [`config`], the proptest
//! configuration every property file runs with (a case count, no failure
//! persistence, a printed seed and reproduce line).
//!
//! Pools are small on purpose (a few names, namespaces) so that values
//! generated in one sequence hit the same objects: re-applies,
//! supersedes, deletes of live routes.
//!
//! Does not own: generators of one crate's own types (the coordinator's
//! commands, the proxy's requests, the YAML parser's text mutations stay
//! next to their properties), or any property.

mod kinds;
mod routes;

pub use kinds::*;
pub use routes::*;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::BoxedStrategy;
use proptest::test_runner::{Config as ProptestConfig, RngSeed};
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use switchyard_proto::model::*;

/// Proptest's defaults (which read `PROPTEST_*`), with `cases` unless
/// `PROPTEST_CASES` is set (`with_cases` would override the env var), no
/// failure persistence (the shrunk input is printed instead, and a real
/// bug becomes a named test), and a fixed seed printed with the command
/// that replays it, `PROPTEST_RNG_SEED=<seed> <reproduce>` (libtest shows
/// the print only when the test fails).
pub fn config(cases: u32, reproduce: &str) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config.failure_persistence = None;
    let seed = match config.rng_seed {
        RngSeed::Fixed(seed) => seed,
        RngSeed::Random => std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish(),
    };
    config.rng_seed = RngSeed::Fixed(seed);
    eprintln!("proptest seed {seed}; reproduce: PROPTEST_RNG_SEED={seed} {reproduce}");
    config
}

// ---- value pools: mostly valid, some invalid -------------------------

/// One of `values`, as an owned string.
pub fn pick(values: &'static [&'static str]) -> BoxedStrategy<String> {
    select(values).prop_map(str::to_string).boxed()
}

/// Object names: a few good ones that collide, and bad ones.
pub fn name() -> BoxedStrategy<String> {
    prop_oneof![
        8 => pick(&["a", "b", "web"]),
        1 => pick(&["", "Bad_Name", "-a", "a.", "a..b", "ünï", "a b"]),
        1 => Just("x".repeat(254)),
    ]
    .boxed()
}

/// Namespaces: two good ones, and bad ones.
pub fn namespace() -> BoxedStrategy<String> {
    prop_oneof![
        8 => pick(&["default", "demo"]),
        1 => pick(&["", "a.b", "UPPER", "-x"]),
        1 => Just("n".repeat(64)),
    ]
    .boxed()
}

/// Ports: mostly 80 and 8080, some 0, some anything.
pub fn port() -> BoxedStrategy<u16> {
    prop_oneof![4 => select(&[80u16, 8080][..]), 1 => Just(0u16), 1 => any::<u16>()].boxed()
}

/// Hostnames as Gateway API writes them: exact, wildcard, and bad ones.
pub fn hostname() -> BoxedStrategy<String> {
    pick(&[
        "example.com",
        "*.example.com",
        "a.example.com",
        "Bad_Host",
        "a:80",
        "*",
        "*.*.x",
        "",
        "[::1]",
    ])
}

/// Labels over a few keys (the Service-name label among them) and values.
pub fn labels() -> BoxedStrategy<BTreeMap<String, String>> {
    prop::collection::btree_map(
        pick(&["app", SERVICE_NAME_LABEL, "team", ""]),
        pick(&["a", "b", "web", ""]),
        0..3,
    )
    .boxed()
}

/// Annotations, including cutover settings the validator must parse:
/// valid and invalid policies, overflowing durations, bad health paths.
pub fn annotations() -> BoxedStrategy<BTreeMap<String, String>> {
    let pair = prop_oneof![
        (
            Just(ANNOTATION_POLICY),
            select(
                &[
                    "all",
                    "majority",
                    "2",
                    "60%",
                    "per-zone:1",
                    "0",
                    "101%",
                    "most",
                    ""
                ][..]
            )
        ),
        (
            Just(ANNOTATION_TIMEOUT),
            select(
                &[
                    "30s",
                    "0ms",
                    "5",
                    "5d",
                    "99999999999999999h",
                    "18446744073709551615ms"
                ][..]
            )
        ),
        (
            Just(ANNOTATION_ON_TIMEOUT),
            select(&["force", "keep-old", "later"][..])
        ),
        (
            Just(ANNOTATION_HEALTH_PATH),
            select(&["/healthz", "healthz", ""][..])
        ),
        (Just("note"), select(&["x", ""][..])),
    ];
    prop::collection::btree_map(
        pair.prop_map(|(k, v)| (k.to_string(), v.to_string())),
        Just(()),
        0..3,
    )
    .prop_map(|m| m.into_keys().collect())
    .boxed()
}

/// Object metadata over the pools; `cluster_scoped` mostly leaves the
/// namespace empty.
pub fn meta(cluster_scoped: bool) -> BoxedStrategy<ObjectMeta> {
    let ns = if cluster_scoped {
        prop_oneof![9 => Just(String::new()), 1 => namespace()].boxed()
    } else {
        namespace()
    };
    (
        ns,
        name(),
        labels(),
        annotations(),
        any::<Option<i64>>(),
        any::<Option<i64>>(),
        // Whatever a client sends here is overwritten by apply.
        any::<u64>(),
    )
        .prop_map(
            |(namespace, name, labels, annotations, created, k8s_generation, revision)| {
                ObjectMeta {
                    namespace,
                    name,
                    labels,
                    annotations,
                    creation_timestamp_ms: created,
                    k8s_generation,
                    origin: None,
                    revision,
                }
            },
        )
        .boxed()
}

/// Cutover settings: any quorum, zone split, timeout and on-timeout action.
pub fn settings() -> BoxedStrategy<CutoverSettings> {
    let quorum = prop_oneof![
        Just(Quorum::All),
        Just(Quorum::Majority),
        any::<u32>().prop_map(Quorum::Count),
        any::<u8>().prop_map(Quorum::Percent),
    ];
    let on_timeout = prop_oneof![Just(OnTimeout::KeepOld), Just(OnTimeout::Force)];
    (
        quorum,
        any::<bool>(),
        prop_oneof![Just(60_000u64), any::<u64>()],
        on_timeout,
    )
        .prop_map(
            |(quorum, per_zone, timeout_ms, on_timeout)| CutoverSettings {
                policy: ReadinessPolicy { quorum, per_zone },
                timeout_ms,
                on_timeout,
            },
        )
        .boxed()
}

/// A namespace/name pair over the pools.
pub fn object_name() -> BoxedStrategy<ObjectName> {
    (namespace(), name())
        .prop_map(|(ns, n)| ObjectName::new(ns, n))
        .boxed()
}

/// A Service port: a name from the pools, mostly port 80.
pub fn backend_key() -> impl Strategy<Value = BackendKey> {
    (object_name(), prop_oneof![Just(80u16), any::<u16>()])
        .prop_map(|(service, port)| BackendKey { service, port })
}
