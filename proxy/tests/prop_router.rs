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

#[path = "prop_router/requests.rs"]
mod requests;
#[path = "prop_router/world.rs"]
mod world;

use proptest::prelude::*;
use proptest::sample::select;
use requests::{build, listener_key, raw_request};
use switchyard_proto::model::ObjectName;
use switchyard_proxy::router::{Decision, ListenerKey};
use switchyard_test_support::strategies;
use world::{INFRA, WORLD};

/// Default cases: a request costs microseconds (1024 take about a second
/// in debug), so more than the other property files.
const CASES: u32 = 1024;

fn config() -> ProptestConfig {
    strategies::config(CASES, "cargo test -p switchyard-proxy --test prop_router")
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
