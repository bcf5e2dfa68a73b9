//! Property: `ReplicatedState::apply` is a total, deterministic function
//! whose rejections change nothing. Over arbitrary sequences of commands —
//! valid and invalid resources (bad names, port 0, duplicate keys and
//! listeners, bad regexes, huge weights, bad annotations), applies over
//! small store limits (or carrying none, as old entries do), deletes of
//! anything, registrations of odd proxies, commits and abandons of real,
//! stale and made-up generations — applied at increasing log indexes:
//!
//! - `apply` never panics. In debug builds (tests) `apply` re-checks the
//!   state's invariants after every command and panics if one broke, so
//!   this also asserts that the invariants hold after every step.
//! - A rejected command (`CommandResponse(Err(_))`) leaves the state as it
//!   was, except `last_index`, which is the command's index.
//! - Replaying the same commands on a fresh state gives the same answers
//!   and the same state (every coordinator applies the same log).
//! - The state, and every command, survive a serde_json round trip
//!   unchanged (the Raft log and snapshots are JSON).
//!
//! Why: this is the one mutator of replicated state. A panic in it stops a
//! coordinator on a log entry it will meet again at restart; a partial
//! change on a rejected command, or nondeterminism, makes coordinators
//! disagree silently.
//!
//! Value pools are small on purpose (a few names, namespaces, proxies) so
//! that commands in one sequence hit the same objects: re-applies,
//! supersedes, withdrawals, deletes of live routes, commits of the
//! generation really pending.
//!
//! Cases: 256, or `PROPTEST_CASES`. Failures are not persisted to a
//! regressions file (the shrunk sequence is printed instead, and a real bug
//! becomes a named test); every run prints a seed that `PROPTEST_RNG_SEED`
//! replays.

use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::BoxedStrategy;
use proptest::test_runner::RngSeed;
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use switchyard_coordinator::state::{
    Command, CommandResponse, DecisionBasis, LogPosition, ReplicatedState, StoreLimits,
};
use switchyard_proto::model::validate::MAX_WEIGHT;
use switchyard_proto::model::*;

/// Default cases: a few seconds in debug on two cores.
const CASES: u32 = 256;

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
         cargo test -p switchyard-coordinator --test prop_state"
    );
    config
}

// ---- value pools: mostly valid, some invalid -------------------------

fn pick(values: &'static [&'static str]) -> BoxedStrategy<String> {
    select(values).prop_map(str::to_string).boxed()
}

/// Object names: a few good ones that collide, and bad ones.
fn name() -> BoxedStrategy<String> {
    prop_oneof![
        8 => pick(&["a", "b", "web"]),
        1 => pick(&["", "Bad_Name", "-a", "a.", "a..b", "ünï", "a b"]),
        1 => Just("x".repeat(254)),
    ]
    .boxed()
}

fn namespace() -> BoxedStrategy<String> {
    prop_oneof![
        8 => pick(&["default", "demo"]),
        1 => pick(&["", "a.b", "UPPER", "-x"]),
        1 => Just("n".repeat(64)),
    ]
    .boxed()
}

fn port() -> BoxedStrategy<u16> {
    prop_oneof![4 => select(&[80u16, 8080][..]), 1 => Just(0u16), 1 => any::<u16>()].boxed()
}

fn hostname() -> BoxedStrategy<String> {
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

fn labels() -> BoxedStrategy<BTreeMap<String, String>> {
    prop::collection::btree_map(
        pick(&["app", SERVICE_NAME_LABEL, "team", ""]),
        pick(&["a", "b", "web", ""]),
        0..3,
    )
    .boxed()
}

/// Annotations, including cutover settings the validator must parse:
/// valid and invalid policies, overflowing durations, bad health paths.
fn annotations() -> BoxedStrategy<BTreeMap<String, String>> {
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

fn meta(cluster_scoped: bool) -> BoxedStrategy<ObjectMeta> {
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
                    revision,
                }
            },
        )
        .boxed()
}

// ---- routes -------------------------------------------------------------

fn path_match() -> BoxedStrategy<PathMatch> {
    let path = pick(&["/", "/a", "/a/", "a", "", "/%2e%2e/x"]);
    let regex = pick(&[
        "/v[0-9]+",
        ".*",
        "(",
        "[z-a]",
        "a{1000}",
        r"\p{Unknown}",
        "(?P<x",
    ]);
    prop_oneof![
        path.clone().prop_map(PathMatch::Exact),
        path.prop_map(PathMatch::PathPrefix),
        regex.prop_map(PathMatch::RegularExpression),
    ]
    .boxed()
}

fn match_type() -> BoxedStrategy<StringMatchType> {
    prop_oneof![
        Just(StringMatchType::Exact),
        Just(StringMatchType::RegularExpression)
    ]
    .boxed()
}

fn route_match() -> BoxedStrategy<RouteMatch> {
    let header_name = pick(&["x-a", "Version", "bad name", "", "ü"]);
    let value = pick(&["one", "", "(", "a|b", "[z-a]"]);
    let header =
        (match_type(), header_name, value.clone()).prop_map(|(match_type, name, value)| {
            HeaderMatch {
                match_type,
                name,
                value,
            }
        });
    let query =
        (match_type(), pick(&["q", "", "a b"]), value).prop_map(|(match_type, name, value)| {
            QueryParamMatch {
                match_type,
                name,
                value,
            }
        });
    (
        prop::option::of(path_match()),
        prop::collection::vec(header, 0..3),
        prop::collection::vec(query, 0..2),
        prop::option::of(pick(&["GET", "POST", "get", "BREW", ""])),
    )
        .prop_map(|(path, headers, query_params, method)| RouteMatch {
            path,
            headers,
            query_params,
            method,
        })
        .boxed()
}

/// A backendRef without filters (mirrors point at these).
fn plain_backend_ref() -> BoxedStrategy<BackendRef> {
    (
        prop_oneof![4 => Just(String::new()), 1 => pick(&["core", "example.com"])],
        prop_oneof![4 => Just("Service".to_string()), 1 => pick(&["Other", ""])],
        prop::option::of(namespace()),
        name(),
        prop::option::of(port()),
        select(&[0u32, 1, 100, MAX_WEIGHT, MAX_WEIGHT + 1, u32::MAX][..]),
    )
        .prop_map(|(group, kind, namespace, name, port, weight)| BackendRef {
            group,
            kind,
            namespace,
            name,
            port,
            weight,
            filters: Vec::new(),
        })
        .boxed()
}

fn path_modifier() -> BoxedStrategy<PathModifier> {
    let p = pick(&["/", "/new", "new", ""]);
    prop_oneof![
        p.clone().prop_map(PathModifier::ReplaceFullPath),
        p.prop_map(PathModifier::ReplacePrefixMatch),
    ]
    .boxed()
}

fn filter() -> BoxedStrategy<Filter> {
    let header_value = (pick(&["x-a", "bad name", ""]), pick(&["v", "", "\n"]))
        .prop_map(|(name, value)| HeaderValue { name, value });
    let modifier = (
        prop::collection::vec(header_value.clone(), 0..2),
        prop::collection::vec(header_value, 0..2),
        prop::collection::vec(pick(&["x-b", "bad name", ""]), 0..2),
    )
        .prop_map(|(set, add, remove)| HeaderModifier { set, add, remove });
    let redirect = (
        prop::option::of(pick(&["http", "https", "ftp"])),
        prop::option::of(hostname()),
        prop::option::of(path_modifier()),
        prop::option::of(port()),
        prop::option::of(select(&[301u16, 302, 303, 307, 308, 200, 999, 0][..])),
    )
        .prop_map(
            |(scheme, hostname, path, port, status_code)| RequestRedirect {
                scheme,
                hostname,
                path,
                port,
                status_code,
            },
        );
    let rewrite = (
        prop::option::of(hostname()),
        prop::option::of(path_modifier()),
    )
        .prop_map(|(hostname, path)| UrlRewrite { hostname, path });
    let mirror = (
        plain_backend_ref(),
        prop::option::of(select(&[0u32, 50, 100, 101, u32::MAX][..])),
        prop::option::of(select(
            &[(1u32, 2u32), (0, 0), (3, 2), (u32::MAX, u32::MAX)][..],
        )),
    )
        .prop_map(|(backend_ref, percent, fraction)| RequestMirror {
            backend_ref,
            percent,
            fraction,
        });
    prop_oneof![
        modifier.clone().prop_map(Filter::RequestHeaderModifier),
        modifier.prop_map(Filter::ResponseHeaderModifier),
        redirect.prop_map(Filter::RequestRedirect),
        rewrite.prop_map(Filter::UrlRewrite),
        mirror.prop_map(Filter::RequestMirror),
    ]
    .boxed()
}

fn rule() -> BoxedStrategy<RouteRule> {
    let backend = (plain_backend_ref(), prop::collection::vec(filter(), 0..2)).prop_map(
        |(mut b, filters)| {
            b.filters = filters;
            b
        },
    );
    (
        prop::option::of(pick(&["r", ""])),
        prop::collection::vec(route_match(), 0..3),
        prop::collection::vec(filter(), 0..3),
        prop::collection::vec(backend, 0..3),
    )
        .prop_map(|(name, matches, filters, backend_refs)| RouteRule {
            name,
            matches,
            filters,
            backend_refs,
        })
        .boxed()
}

fn parent_ref() -> BoxedStrategy<ParentRef> {
    (
        prop::option::of(namespace()),
        name(),
        prop::option::of(pick(&["http", "nope"])),
        prop::option::of(port()),
    )
        .prop_map(|(namespace, name, section_name, port)| ParentRef {
            group: "gateway.networking.k8s.io".into(),
            kind: "Gateway".into(),
            namespace,
            name,
            section_name,
            port,
        })
        .boxed()
}

fn http_route() -> BoxedStrategy<HttpRoute> {
    (
        meta(false),
        prop::collection::vec(parent_ref(), 0..2),
        prop::collection::vec(hostname(), 0..2),
        prop::collection::vec(rule(), 0..3),
    )
        .prop_map(|(meta, parent_refs, hostnames, rules)| HttpRoute {
            meta,
            parent_refs,
            hostnames,
            rules,
        })
        .boxed()
}

// ---- the other kinds ------------------------------------------------------

fn gateway() -> BoxedStrategy<Gateway> {
    let expression = (
        pick(&["team", ""]),
        pick(&["In", "NotIn", "Exists", "DoesNotExist", "Bogus"]),
        prop::collection::vec(pick(&["a", ""]), 0..2),
    )
        .prop_map(|(key, operator, values)| LabelExpression {
            key,
            operator,
            values,
        });
    let selector = (labels(), prop::collection::vec(expression, 0..2)).prop_map(
        |(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        },
    );
    let namespaces = prop_oneof![
        Just(RouteNamespaces::Same),
        Just(RouteNamespaces::All),
        selector.prop_map(RouteNamespaces::Selector),
    ];
    let protocol = prop_oneof![
        Just(ListenerProtocol::Http),
        Just(ListenerProtocol::Https),
        pick(&["TCP", ""]).prop_map(ListenerProtocol::Other),
    ];
    let listener = (
        pick(&["http", "https", "Bad", ""]),
        port(),
        protocol,
        prop::option::of(hostname()),
        namespaces,
    )
        .prop_map(|(name, port, protocol, hostname, namespaces)| Listener {
            name,
            port,
            protocol,
            hostname,
            allowed_routes: AllowedRoutes {
                namespaces,
                kinds: Vec::new(),
            },
        });
    (
        meta(false),
        pick(&["switchyard", "other", ""]),
        prop::collection::vec(listener, 0..3),
    )
        .prop_map(|(meta, gateway_class_name, listeners)| Gateway {
            meta,
            gateway_class_name,
            listeners,
        })
        .boxed()
}

fn service() -> BoxedStrategy<Service> {
    let service_port = (
        prop::option::of(pick(&["http", ""])),
        port(),
        prop::option::of(port()),
    )
        .prop_map(|(name, port, target_port)| ServicePort {
            name,
            port,
            target_port,
        });
    (meta(false), prop::collection::vec(service_port, 0..3))
        .prop_map(|(meta, ports)| Service { meta, ports })
        .boxed()
}

fn endpoint_slice() -> BoxedStrategy<EndpointSlice> {
    let endpoint = (
        prop::collection::vec(pick(&["10.0.0.1", "::1", "not-an-ip", ""]), 0..2),
        any::<(bool, bool, bool)>(),
        prop::option::of(pick(&["zone-a", ""])),
    )
        .prop_map(
            |(addresses, (ready, serving, terminating), zone)| Endpoint {
                addresses,
                ready,
                serving,
                terminating,
                zone,
            },
        );
    let endpoint_port = (prop::option::of(pick(&["http"])), port())
        .prop_map(|(name, port)| EndpointPort { name, port });
    (
        meta(false),
        pick(&["IPv4", "IPv6", "FQDN", "ipv4"]),
        prop::collection::vec(endpoint_port, 0..2),
        prop::collection::vec(endpoint, 0..3),
        prop::option::of(pick(&["east", ""])),
    )
        .prop_map(
            |(meta, address_type, ports, endpoints, cluster)| EndpointSlice {
                meta,
                address_type,
                ports,
                endpoints,
                cluster,
            },
        )
        .boxed()
}

fn reference_grant() -> BoxedStrategy<ReferenceGrant> {
    let from = (namespace(), pick(&["HTTPRoute", ""])).prop_map(|(namespace, kind)| GrantFrom {
        group: "gateway.networking.k8s.io".into(),
        kind,
        namespace,
    });
    let to = prop::option::of(name()).prop_map(|name| GrantTo {
        group: String::new(),
        kind: "Service".into(),
        name,
    });
    (
        meta(false),
        prop::collection::vec(from, 0..2),
        prop::collection::vec(to, 0..2),
    )
        .prop_map(|(meta, from, to)| ReferenceGrant { meta, from, to })
        .boxed()
}

/// A well-formed route over the shared name pool, with few enough
/// variations that sequences both re-apply identical specs and change
/// them. Hostile resources alone are nearly always rejected, and then
/// transitions, supersedes and withdrawals would go untested.
fn valid_route() -> BoxedStrategy<Resource> {
    let backend = (pick(&["blue", "green"]), 0u32..3).prop_map(|(name, weight)| BackendRef {
        weight,
        ..BackendRef::service(name, 80)
    });
    let rule = (
        prop::option::of(pick(&["/", "/a"])),
        prop::collection::vec(backend, 0..3),
    )
        .prop_map(|(prefix, backend_refs)| RouteRule {
            matches: prefix
                .map(|p| RouteMatch {
                    path: Some(PathMatch::PathPrefix(p)),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            backend_refs,
            ..Default::default()
        });
    (
        pick(&["default", "demo"]),
        pick(&["a", "b", "web"]),
        prop::option::of(pick(&["all", "majority", "per-zone:1"])),
        prop::collection::vec(rule, 1..3),
    )
        .prop_map(|(ns, name, policy, rules)| {
            let mut meta = ObjectMeta::named(ns, name);
            if let Some(p) = policy {
                meta.annotations.insert(ANNOTATION_POLICY.into(), p);
            }
            Resource::HttpRoute(HttpRoute {
                meta,
                parent_refs: Vec::new(),
                hostnames: Vec::new(),
                rules,
            })
        })
        .boxed()
}

fn resource() -> BoxedStrategy<Resource> {
    prop_oneof![
        6 => valid_route(),
        3 => http_route().prop_map(Resource::HttpRoute),
        1 => gateway().prop_map(Resource::Gateway),
        1 => service().prop_map(Resource::Service),
        1 => endpoint_slice().prop_map(Resource::EndpointSlice),
        1 => reference_grant().prop_map(Resource::ReferenceGrant),
        1 => (meta(true), pick(&[CONTROLLER_NAME, "other", ""]))
            .prop_map(|(meta, controller_name)| Resource::GatewayClass(GatewayClass {
                meta,
                controller_name,
            })),
        1 => meta(true).prop_map(|meta| Resource::Namespace(Namespace { meta })),
    ]
    .boxed()
}

fn settings() -> BoxedStrategy<CutoverSettings> {
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

fn object_name() -> BoxedStrategy<ObjectName> {
    (namespace(), name())
        .prop_map(|(ns, n)| ObjectName::new(ns, n))
        .boxed()
}

// ---- commands ---------------------------------------------------------------

/// One step of a sequence. `CommitPending`/`AbandonPending` name the route
/// only; the generation is read from the state when the step runs, so
/// sequences commit what is really pending (raw `Command`s with random
/// generations almost never would). Steps are resolved to plain
/// `Command`s once, and the replay uses those.
#[derive(Debug, Clone)]
enum Step {
    Raw(Command),
    CommitPending {
        route: ObjectName,
        forced: bool,
    },
    AbandonPending {
        route: ObjectName,
    },
    /// Commit (or abandon) one generation below what is pending: stale.
    CommitStale {
        route: ObjectName,
        abandon: bool,
    },
}

/// No limits (entries from before limits existed), or limits small
/// enough for the value pools to reach, so applies get refused for them.
fn store_limits() -> BoxedStrategy<Option<StoreLimits>> {
    prop_oneof![
        1 => Just(None),
        2 => (0usize..4, 0usize..6, prop::option::of(0usize..3000), prop::option::of(0usize..20_000))
            .prop_map(|(max_routes, max_endpoints, max_object_bytes, max_config_bytes)| {
                Some(StoreLimits {
                    max_routes,
                    max_endpoints,
                    max_object_bytes,
                    max_config_bytes,
                })
            }),
    ]
    .boxed()
}

/// The term of every entry [`run`] writes: decisions of other terms must
/// be refused.
const TERM: u64 = 2;

/// A decision's basis: mostly this term's, sometimes another's.
fn basis() -> impl Strategy<Value = DecisionBasis> {
    (
        prop_oneof![3 => Just(TERM), 1 => 0u64..5],
        prop::collection::vec((backend_key(), 0u64..50), 0..2),
    )
        .prop_map(|(term, endpoints)| DecisionBasis { term, endpoints })
}

fn backend_key() -> impl Strategy<Value = BackendKey> {
    (object_name(), prop_oneof![Just(80u16), any::<u16>()])
        .prop_map(|(service, port)| BackendKey { service, port })
}

fn raw_command() -> BoxedStrategy<Command> {
    let generation = prop_oneof![3 => 0u64..4, 1 => any::<u64>()];
    let proxy_field = prop_oneof![
        6 => pick(&["p1", "p2", "zone-a"]),
        1 => pick(&["", "has space", "tab\t", "ünï", "\u{0}"]),
        1 => Just("p".repeat(254)),
    ];
    let key =
        (select(&Kind::ALL[..]), object_name()).prop_map(|(kind, name)| ResourceKey { kind, name });
    prop_oneof![
        6 => (
            prop_oneof![1 => Just(Vec::new()), 9 => prop::collection::vec(resource(), 1..4)],
            settings(),
            store_limits(),
            prop::option::of(0u32..3),
        )
            .prop_map(|(resources, defaults, limits, validation)| Command::Apply {
                resources,
                defaults,
                limits,
                validation,
            }),
        2 => prop::collection::vec(key, 0..3).prop_map(|keys| Command::Delete { keys }),
        1 => (proxy_field.clone(), proxy_field.clone(), ".*").prop_map(|(id, zone, admin_address)| {
            Command::RegisterProxy {
                id,
                zone,
                admin_address,
            }
        }),
        1 => (proxy_field.clone(), ".{0,10}", prop::option::of(generation.clone())).prop_map(
            |(id, reason, registration)| Command::RemoveProxy { id, reason, registration }
        ),
        1 => (proxy_field, generation.clone(), basis()).prop_map(|(id, registration, basis)| {
            Command::ExpireProxy { id, registration, basis }
        }),
        1 => (object_name(), generation.clone(), any::<bool>(), prop::option::of(basis())).prop_map(
            |(route, generation, forced, basis)| Command::CommitTransition {
                route,
                generation,
                forced,
                basis,
            },
        ),
        1 => (object_name(), generation, ".{0,10}", prop::option::of(basis())).prop_map(
            |(route, generation, reason, basis)| Command::AbandonTransition {
                route,
                generation,
                reason,
                basis,
            }
        ),
    ]
    .boxed()
}

fn step() -> BoxedStrategy<Step> {
    prop_oneof![
        6 => raw_command().prop_map(Step::Raw),
        2 => (object_name(), any::<bool>())
            .prop_map(|(route, forced)| Step::CommitPending { route, forced }),
        1 => object_name().prop_map(|route| Step::AbandonPending { route }),
        1 => (object_name(), any::<bool>())
            .prop_map(|(route, abandon)| Step::CommitStale { route, abandon }),
    ]
    .boxed()
}

/// A step as a concrete command against the current state.
fn resolve(step: &Step, state: &ReplicatedState) -> Command {
    let pending = |route: &ObjectName| {
        state
            .routes
            .get(route)
            .and_then(|r| r.pending.as_ref())
            .map_or(1, |p| p.target.generation)
    };
    // What the leader would decide on: this term, the current endpoints.
    let basis = |route: &ObjectName| DecisionBasis {
        term: TERM,
        endpoints: state
            .routes
            .get(route)
            .and_then(|r| r.pending.as_ref())
            .map(|p| {
                state
                    .required_backends(&p.target.spec)
                    .into_iter()
                    .filter_map(|(b, g)| g.map(|g| (b, g)))
                    .collect()
            })
            .unwrap_or_default(),
    };
    match step {
        Step::Raw(command) => command.clone(),
        Step::CommitPending { route, forced } => Command::CommitTransition {
            route: route.clone(),
            generation: pending(route),
            forced: *forced,
            basis: Some(basis(route)),
        },
        Step::AbandonPending { route } => Command::AbandonTransition {
            route: route.clone(),
            generation: pending(route),
            reason: "timed out".into(),
            basis: Some(basis(route)),
        },
        Step::CommitStale { route, abandon } => {
            let generation = pending(route).saturating_sub(1);
            if *abandon {
                Command::AbandonTransition {
                    route: route.clone(),
                    generation,
                    reason: "stale".into(),
                    basis: Some(basis(route)),
                }
            } else {
                Command::CommitTransition {
                    route: route.clone(),
                    generation,
                    forced: false,
                    basis: Some(basis(route)),
                }
            }
        }
    }
}

/// The concrete log a run applied: index, command, answer.
type Log = Vec<(u64, Command, CommandResponse)>;

/// Applies the steps from a fresh state at increasing indexes (gaps are
/// allowed: membership entries take indexes too), checking the
/// no-change-on-rejection property at each one. Returns the concrete log.
fn run(steps: &[(Step, u64)]) -> Result<(ReplicatedState, Log), TestCaseError> {
    let mut state = ReplicatedState::default();
    let mut log = Vec::new();
    let mut index = 0u64;
    for (step, gap) in steps {
        index += gap;
        let command = resolve(step, &state);
        let before = state.clone();
        // Panics here (including the debug-build invariant check) fail the
        // case, and proptest shrinks the sequence.
        let response = state.apply(LogPosition::new(index, TERM), &command);
        prop_assert_eq!(state.last_index, index);
        if let Err(e) = &response.0 {
            let mut expected = before;
            expected.last_index = index;
            expected.last_term = TERM;
            prop_assert!(
                state == expected,
                "rejected command changed the state: {:?} -> {}",
                command,
                e
            );
        }
        log.push((index, command, response));
    }
    Ok((state, log))
}

fn steps() -> impl Strategy<Value = Vec<(Step, u64)>> {
    prop::collection::vec(
        (step(), prop_oneof![9 => Just(1u64), 1 => 2u64..1000]),
        1..40,
    )
}

proptest! {
    #![proptest_config(config())]

    /// Never panics (invariants hold after every step, checked by `apply`
    /// itself in debug builds), and rejections change nothing but
    /// `last_index`.
    #[test]
    fn apply_is_total_and_rejections_change_nothing(steps in steps()) {
        run(&steps)?;
    }

    /// The same log gives the same answers and the same state.
    #[test]
    fn replay_is_deterministic(steps in steps()) {
        let (first, log) = run(&steps)?;
        let mut replayed = ReplicatedState::default();
        for (index, command, response) in &log {
            prop_assert_eq!(&replayed.apply(LogPosition::new(*index, TERM), command), response);
        }
        prop_assert_eq!(replayed, first);
    }

    /// Snapshots and log entries are JSON: both round-trip exactly.
    #[test]
    fn state_and_commands_round_trip_through_json(steps in steps()) {
        let (state, log) = run(&steps)?;
        let json = serde_json::to_string(&state).expect("state serializes");
        let back: ReplicatedState = serde_json::from_str(&json).expect("state deserializes");
        prop_assert_eq!(back, state);
        for (_, command, response) in &log {
            let json = serde_json::to_string(command).expect("command serializes");
            let back: Command = serde_json::from_str(&json).expect("command deserializes");
            prop_assert_eq!(&back, command);
            let json = serde_json::to_string(response).expect("response serializes");
            let back: CommandResponse = serde_json::from_str(&json).expect("response deserializes");
            prop_assert_eq!(&back, response);
        }
    }
}
