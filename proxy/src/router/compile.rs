//! Building a [`RouteTable`] from a configuration snapshot and the routes
//! the proxy serves.
//!
//! It owns the order of compilation: served listeners first (so a listener
//! without routes still claims its hosts), then each route's attachments
//! and rules, then per-bucket precedence sorting. Everything costly (regex
//! compilation, header parsing, backend resolution, sorting) happens here
//! once, so the request path only walks and compares; regexes are resolved
//! first, through the cache shared with earlier tables (`regexes`). Routes
//! whose inputs did not change since the previous table are taken from it
//! as compiled (`reuse`); only the lookup structure is assembled again,
//! and not even that when no route changed.

use super::attach::Gateways;
use super::backends::BackendIndex;
use super::precedence::PrecedenceKey;
use super::regexes::RegexPlan;
use super::reuse::{CompileStats, CompiledRoute, Reuse};
use super::rule::CompiledRule;
use super::table::{Candidate, PortTable};
use super::{ListenerKey, RouteTable};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use switchyard_proto::model::gateway_api::Topology;
use switchyard_proto::model::{ConfigSnapshot, HttpRoute, ObjectName};

/// Compiles the table; see [`RouteTable::compile`]. Routes `reuse` vouches
/// for are taken as they are; only the others compile.
pub(crate) fn compile(
    snapshot: &ConfigSnapshot,
    routes: &[HttpRoute],
    reuse: &Reuse<'_>,
    previous: Option<&RouteTable>,
) -> RouteTable {
    let mut notes = Vec::new();
    let topology = Topology::of_snapshot(snapshot);
    let gateways = Gateways::new(&topology, &mut notes);
    let index = BackendIndex::new(&topology);
    let regexes = RegexPlan::new(routes);

    let mut stats = CompileStats::default();
    let mut compiled: HashMap<ObjectName, Arc<CompiledRoute>> =
        HashMap::with_capacity(routes.len());
    for route in routes {
        let entry = match reuse.get(route, &regexes) {
            Some(kept) => {
                stats.reused += 1;
                kept
            }
            None => {
                stats.compiled += 1;
                Arc::new(compile_route(route, &gateways, &index, &regexes))
            }
        };
        compiled.insert(route.meta.object_name(), entry);
    }
    // Nothing compiled, the same routes, and the Gateway side as before:
    // the previous lookup structure is this one. An endpoint move ends
    // here without touching a bucket.
    if let Some(previous) = previous
        && reuse.is_active()
        && stats.compiled == 0
        && compiled.len() == previous.routes.len()
    {
        return RouteTable {
            ports: Arc::clone(&previous.ports),
            notes: previous.notes.clone(),
            backends: previous.backends.clone(),
            regex_stats: regexes.stats,
            routes: compiled,
            stats,
            source: None,
        };
    }

    // Each served listener is reachable through its own Gateway's key and
    // through the "every Gateway on this port" key.
    let mut ports: HashMap<ListenerKey, PortTable> = HashMap::new();
    let keys_of = |i: usize| {
        let l = &gateways.listeners[i];
        [
            ListenerKey {
                gateway: Some(l.gateway.clone()),
                port: l.port,
            },
            ListenerKey {
                gateway: None,
                port: l.port,
            },
        ]
    };
    for (i, l) in gateways.listeners.iter().enumerate() {
        for key in keys_of(i) {
            ports
                .entry(key)
                .or_default()
                .listeners
                .slot(l.hostname.as_ref());
        }
    }

    let mut backends = BTreeSet::new();
    for route in routes {
        let Some(entry) = compiled.get(&route.meta.object_name()) else {
            continue;
        };
        notes.extend(entry.notes.iter().cloned());
        if entry.attachments.is_empty() {
            continue;
        }
        let name = route.meta.object_name();
        let created = route.meta.creation_timestamp_ms;
        for rule in &entry.rules {
            rule.collect_backends(&mut backends);
        }
        for a in &entry.attachments {
            let listener_host = gateways.listeners[a.listener].hostname.as_ref();
            for key in keys_of(a.listener) {
                let table = ports.entry(key).or_default().listeners.slot(listener_host);
                for rule in &entry.rules {
                    for (mi, m) in rule.matches.iter().enumerate() {
                        let pkey = PrecedenceKey::new(m, &name, created, rule.rule_index, mi);
                        let cand = || Candidate {
                            rule: Arc::clone(rule),
                            match_index: mi,
                        };
                        if a.hostnames.is_empty() {
                            table.add(None, pkey, cand());
                        } else {
                            for h in &a.hostnames {
                                table.add(Some(h), pkey.clone(), cand());
                            }
                        }
                    }
                }
            }
        }
    }
    for table in ports.values_mut() {
        table.finish();
    }
    RouteTable {
        ports: Arc::new(ports),
        notes,
        backends,
        regex_stats: regexes.stats,
        routes: compiled,
        stats,
        source: None,
    }
}

/// Compiles one route: where it attaches, its rules, what it noted and
/// what it depends on.
fn compile_route(
    route: &HttpRoute,
    gateways: &Gateways<'_, '_>,
    index: &BackendIndex<'_, '_>,
    regexes: &RegexPlan,
) -> CompiledRoute {
    let mut notes = Vec::new();
    let attachments = gateways.attach(route, &mut notes);
    // A route attached nowhere serves nothing: its rules are not compiled
    // (as before), so it depends on no Service either.
    let rules: Vec<Arc<CompiledRule>> = if attachments.is_empty() {
        Vec::new()
    } else {
        route
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                Arc::new(CompiledRule::compile(
                    route, i, r, index, regexes, &mut notes,
                ))
            })
            .collect()
    };
    CompiledRoute {
        spec: route.clone(),
        attachments,
        rules,
        notes,
        services: index.take_asked(),
        regexes: regexes.for_route(route),
    }
}
