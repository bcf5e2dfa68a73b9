//! The proxy's router: compiles Gateways, HTTPRoutes, Services and
//! ReferenceGrants into an immutable [`RouteTable`] and decides, per request,
//! where it goes ([`Decision`]).
//!
//! It owns Gateway API HTTPRoute semantics: which Gateways and listeners are
//! served, route attachment, hostname intersection, match precedence,
//! backend validity and weights, and every filter's effect on a request.
//!
//! # Gateways share the fleet
//!
//! Every proxy serves every Gateway of ours (Envoy Gateway's
//! `mergeGateways` model): a socket for port P ([`ListenerKey`] without a
//! Gateway) carries the listeners on P of all Gateways. A request is
//! matched to the most specific listener on P whose hostname matches its
//! Host (exact over wildcard, longer wildcard first, no hostname last),
//! and only the routes attached to *that* listener, of *that* Gateway,
//! are candidates — even when none of them matches (then 404), so one
//! Gateway's routes never answer through another's listener. That needs
//! the listeners on a port to be distinct: the model's conflict rule
//! (`gateway_api::listener_conflicts`: oldest Gateway first) decides which
//! listener keeps a clashing port or hostname, and the conflicted ones are
//! not served at all. A socket for one Gateway (`NS/GATEWAY:PORT`) carries
//! only that Gateway's listeners on P, after the same conflict rule, so
//! what is served never depends on how sockets were configured.
//!
//! It deliberately does no IO: no sockets, no clocks, no randomness of its
//! own (the caller passes a random number), and no logging above `debug`.
//! Forwarding, mirroring, endpoint selection and warm-up belong to the
//! server and upstream modules, which consume [`Decision`] and
//! [`RouteTable::backends`].

mod assemble;
mod attach;
mod backends;
mod compile;
mod filters;
mod hostname;
mod matching;
mod precedence;
mod regexes;
mod reuse;
mod rule;
mod table;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;
mod tls;

use http::{HeaderName, HeaderValue, StatusCode};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use switchyard_proto::model::{BackendKey, ConfigSnapshot, HttpRoute, Kind, ObjectName};
use table::PortTable;

pub use regexes::RegexStats;
pub use reuse::CompileStats;
pub use tls::Transport;

/// Which Gateway listener port a local socket serves, from
/// `--listener [NS/GATEWAY:]PORT=ADDR`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListenerKey {
    /// The Gateway; `None` means every served Gateway with a listener on
    /// `port`, its listeners told apart by hostname.
    pub gateway: Option<ObjectName>,
    /// The Gateway listener port (not the local socket's port): redirects
    /// derive their default port from it.
    pub port: u16,
}

impl ListenerKey {
    /// The keys a listener of `gateway` on `port` is reachable through:
    /// its own Gateway's and the "every Gateway on this port" one.
    pub(crate) fn both(gateway: &ObjectName, port: u16) -> [ListenerKey; 2] {
        [
            ListenerKey {
                gateway: Some(gateway.clone()),
                port,
            },
            ListenerKey {
                gateway: None,
                port,
            },
        ]
    }
}

/// A problem found while compiling, for logs and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileNote {
    /// What `route` names: `HTTPRoute` for route notes, `Gateway` for notes
    /// about a served Gateway's listeners.
    pub kind: Kind,
    /// The route concerned (for Gateway-level notes, the Gateway's name).
    pub route: ObjectName,
    /// What is wrong and what the router does about it.
    pub message: String,
}

impl fmt::Display for CompileNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.route, self.message)
    }
}

/// The compiled routing configuration: immutable, `Send + Sync`, meant to be
/// shared in an `Arc` and swapped atomically as a whole.
#[derive(Debug, Default)]
pub struct RouteTable {
    /// Per listener key: the listeners reachable through it. Shared with
    /// the next table when no route changed.
    ports: Arc<HashMap<ListenerKey, PortTable>>,
    /// Per listener key that is not plain HTTP: TLS or refused. Shared
    /// with the next table when the Gateway side did not change.
    transports: Arc<HashMap<ListenerKey, Transport>>,
    notes: Vec<CompileNote>,
    backends: BTreeSet<BackendKey>,
    regex_stats: RegexStats,
    /// Every route as compiled, for the next table to reuse.
    routes: HashMap<ObjectName, Arc<reuse::CompiledRoute>>,
    stats: CompileStats,
    /// The snapshot it was compiled from (with
    /// [`RouteTable::compile_after`]): what the next compile compares with.
    source: Option<Arc<ConfigSnapshot>>,
}

/// What to do with one request.
// Not boxed: a decision is built once per request and consumed at once, so
// the size difference costs a move, while a box would cost an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Send it to a backend.
    Forward(ForwardPlan),
    /// Answer it directly (404, 500, redirects).
    Respond(DirectResponse),
}

/// How to forward one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardPlan {
    /// The route whose rule matched. The plan's parts are shared with the
    /// compiled rule (reference counts per request, no copies).
    pub route: Arc<ObjectName>,
    /// Index of that rule in the route's `rules`.
    pub rule_index: usize,
    /// The Service port chosen (by weight) among the rule's backendRefs.
    pub backend: Arc<BackendKey>,
    /// Request header edits: the rule's filters, then the chosen
    /// backendRef's filters, in order.
    pub request_headers: Arc<HeaderEdits>,
    /// Response header edits, in the same order.
    pub response_headers: Arc<HeaderEdits>,
    /// URLRewrite hostname: the Host header to send upstream.
    pub host: Option<String>,
    /// URLRewrite path: the new path plus the original query.
    pub path_and_query: Option<String>,
    /// Backends that get a copy of the request (percentages already
    /// decided); their answers are dropped.
    pub mirrors: Vec<Arc<BackendKey>>,
}

/// Header edits from header modifier filters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeaderEdits {
    /// Headers to overwrite.
    pub set: Vec<(HeaderName, HeaderValue)>,
    /// Headers to append to (`old,new`).
    pub add: Vec<(HeaderName, HeaderValue)>,
    /// Headers to delete.
    pub remove: Vec<HeaderName>,
}

/// Why the router answered itself; what clients and metrics may see
/// instead of [`DirectResponse::reason`], which names routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RespondKind {
    /// No served listener accepts the request's port or host (404).
    NoListener,
    /// A listener took the request but no route matched (404).
    NoRoute,
    /// A RequestRedirect filter (3xx).
    Redirect,
    /// The matched rule cannot be served: no backendRefs, an invalid one,
    /// or all weights 0 (500).
    InvalidBackend,
    /// Over TLS, the request's Host belongs to another listener than the
    /// one the connection's SNI chose (421, GEP-3567): the client must use
    /// a connection of that listener (its certificate).
    Misdirected,
}

impl RespondKind {
    /// Every kind, in declaration order.
    pub const ALL: [RespondKind; 5] = [
        RespondKind::NoListener,
        RespondKind::NoRoute,
        RespondKind::Redirect,
        RespondKind::InvalidBackend,
        RespondKind::Misdirected,
    ];

    /// Label value for metrics.
    pub fn label(self) -> &'static str {
        match self {
            RespondKind::NoListener => "no_listener",
            RespondKind::NoRoute => "no_route",
            RespondKind::Redirect => "redirect",
            RespondKind::InvalidBackend => "invalid_backend",
            RespondKind::Misdirected => "misdirected",
        }
    }

    /// The reason any client may read.
    pub fn public_reason(self) -> &'static str {
        match self {
            RespondKind::NoListener | RespondKind::NoRoute => "no matching route",
            RespondKind::Redirect => "redirect",
            RespondKind::InvalidBackend => "the matching route has no valid backend",
            RespondKind::Misdirected => "misdirected request: use a connection for this host",
        }
    }
}

/// An answer the proxy gives itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectResponse {
    /// Status code.
    pub status: StatusCode,
    /// Why, without names.
    pub kind: RespondKind,
    /// Headers to send: for redirects, `Location` followed by the `set` and
    /// `add` values of the ResponseHeaderModifier at the redirect's level.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Why, for operators: names the route and rule. Logged at debug; sent
    /// to clients only with `expose_reasons`.
    pub reason: String,
}

impl RouteTable {
    /// A table that serves nothing: every request gets 404.
    pub fn empty() -> RouteTable {
        RouteTable::default()
    }

    /// Compiles the table from the routes the proxy serves (one generation
    /// each, chosen by the caller) and the rest of `snapshot`
    /// (`snapshot.routes` is ignored).
    pub fn compile(snapshot: &ConfigSnapshot, routes: &[HttpRoute]) -> RouteTable {
        compile::compile(snapshot, routes, &reuse::Reuse::none(), None)
    }

    /// Compiles the table as [`RouteTable::compile`] does, reusing from
    /// `previous` every route whose inputs did not change (its spec, the
    /// Gateways, grants and the Services it names): a change to one route
    /// compiles one route, and a change to endpoints alone compiles none
    /// and keeps the whole lookup structure. Same result as a fresh
    /// compile, by construction of what counts as an input.
    pub fn compile_after(
        previous: Option<&RouteTable>,
        snapshot: &Arc<ConfigSnapshot>,
        routes: &[HttpRoute],
    ) -> RouteTable {
        let reuse = match previous.and_then(|p| p.source.as_deref().map(|s| (p, s))) {
            Some((p, before)) => reuse::Reuse::between(&p.routes, before, snapshot),
            None => reuse::Reuse::none(),
        };
        let mut table = compile::compile(snapshot, routes, &reuse, previous);
        table.source = Some(Arc::clone(snapshot));
        table
    }

    /// How many routes this table compiled and how many it reused.
    pub fn compile_stats(&self) -> CompileStats {
        self.stats
    }

    /// Decides what to do with one request arriving on `listener`. `random`
    /// is a uniformly random number used for weighted backend choice and
    /// mirror percentages.
    ///
    /// The weighted choice takes `random % total_weight`; mirror shares
    /// compare the high 32 bits of `random` with the share, so the two
    /// decisions are independent.
    pub fn route(
        &self,
        listener: &ListenerKey,
        req: &http::request::Parts,
        random: u64,
    ) -> Decision {
        match self.ports.get(listener) {
            Some(table) => {
                let scheme = match self.transports.get(listener) {
                    Some(Transport::Tls(_)) => "https",
                    _ => "http",
                };
                table.route(listener.port, scheme, req, random)
            }
            None => table::not_found(
                RespondKind::NoListener,
                match &listener.gateway {
                    Some(g) => format!(
                        "Gateway {g} has no served HTTP listener on port {}",
                        listener.port
                    ),
                    None => format!(
                        "no served Gateway has an HTTP listener on port {}",
                        listener.port
                    ),
                },
            ),
        }
    }

    /// How connections on `listener` are carried (see [`Transport`]).
    pub fn transport(&self, listener: &ListenerKey) -> Transport {
        self.transports.get(listener).cloned().unwrap_or_default()
    }

    /// [`RouteTable::route`] for a request on a TLS connection whose client
    /// named `sni` (lower-case): when its Host picks another listener of the port than
    /// SNI did, 421 Misdirected Request instead (GEP-3567: the listeners
    /// may have different certificates, so the client must not reuse a
    /// connection made for one to reach the other). A Host no listener
    /// takes is routed as usual (404).
    pub fn route_over_tls(
        &self,
        listener: &ListenerKey,
        sni: Option<&str>,
        req: &http::request::Parts,
        random: u64,
    ) -> Decision {
        if let Some(table) = self.ports.get(listener)
            && let Some(misdirected) = table.misdirected(sni, req)
        {
            return Decision::Respond(misdirected);
        }
        self.route(listener, req, random)
    }

    /// Every backend a served rule can send traffic or mirrors to: valid
    /// refs with a non-zero weight, not redirected, of attached routes, plus
    /// their valid mirrors.
    pub fn backends(&self) -> BTreeSet<BackendKey> {
        self.backends.clone()
    }

    /// Problems found while compiling.
    pub fn notes(&self) -> &[CompileNote] {
        &self.notes
    }

    /// What compiling this table did with its regexes: how many it
    /// compiled, how many it shared with tables compiled before, and
    /// their compiled size.
    pub fn regex_stats(&self) -> RegexStats {
        self.regex_stats
    }
}
