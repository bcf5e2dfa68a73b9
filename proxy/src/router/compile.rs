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
//! as compiled (`reuse`), and only the buckets of routes that changed are
//! assembled again (`assemble`) — none when no route changed.

use super::RouteTable;
use super::assemble;
use super::attach::Gateways;
use super::backends::BackendIndex;
use super::regexes::RegexPlan;
use super::reuse::{CompileStats, CompiledRoute, Reuse};
use super::rule::CompiledRule;
use super::tls;
use std::collections::{BTreeSet, HashMap, HashSet};
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
    // Routes whose candidates differ from the previous table's: compiled
    // afresh here, or gone.
    let mut dirty: HashSet<ObjectName> = HashSet::new();
    let names: Vec<ObjectName> = routes.iter().map(|r| r.meta.object_name()).collect();
    for (route, name) in routes.iter().zip(&names) {
        let entry = match reuse.get(name, route, &regexes) {
            Some(kept) => {
                stats.reused += 1;
                kept
            }
            None => {
                stats.compiled += 1;
                let mut fresh = compile_route(route, &gateways, &index, &regexes);
                fresh.addrs = assemble::addresses(&assemble::placements(&fresh, &gateways));
                dirty.insert(name.clone());
                Arc::new(fresh)
            }
        };
        compiled.insert(name.clone(), entry);
    }
    let ports = match previous.filter(|_| reuse.is_active()) {
        // The listener layout is the previous one: rebuild only the buckets
        // of routes that changed, came or went — none for an endpoint move.
        Some(previous) => {
            dirty.extend(
                previous
                    .routes
                    .keys()
                    .filter(|name| !compiled.contains_key(*name))
                    .cloned(),
            );
            if dirty.is_empty() {
                Arc::clone(&previous.ports)
            } else {
                Arc::new(assemble::incremental(
                    previous, &compiled, &dirty, &gateways,
                ))
            }
        }
        None => Arc::new(assemble::full(
            &gateways,
            names.iter().filter_map(|n| compiled.get(n).map(|c| &**c)),
        )),
    };

    let transports = match previous.filter(|_| reuse.is_active()) {
        Some(previous) => Arc::clone(&previous.transports),
        None => Arc::new(tls::transports(&gateways)),
    };

    let mut backends = BTreeSet::new();
    for name in &names {
        let Some(entry) = compiled.get(name) else {
            continue;
        };
        notes.extend(entry.notes.iter().cloned());
        for rule in &entry.rules {
            rule.collect_backends(&mut backends);
        }
    }
    RouteTable {
        ports,
        transports,
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
        addrs: Vec::new(),
    }
}
