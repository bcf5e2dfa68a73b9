//! Building a [`RouteTable`] from a configuration snapshot and the routes
//! the proxy serves.
//!
//! It owns the order of compilation: served listeners first (so a listener
//! without routes still claims its hosts), then each route's attachments
//! and rules, then per-bucket precedence sorting. Everything costly (regex
//! compilation, header parsing, backend resolution, sorting) happens here
//! once, so the request path only walks and compares; regexes are resolved
//! first, through the cache shared with earlier tables (`regexes`).

use super::attach::Gateways;
use super::backends::BackendIndex;
use super::precedence::PrecedenceKey;
use super::regexes::RegexPlan;
use super::rule::CompiledRule;
use super::table::{Candidate, PortTable};
use super::{ListenerKey, RouteTable};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use switchyard_proto::model::gateway_api::Topology;
use switchyard_proto::model::{ConfigSnapshot, HttpRoute};

/// Compiles the table; see [`RouteTable::compile`].
pub(crate) fn compile(snapshot: &ConfigSnapshot, routes: &[HttpRoute]) -> RouteTable {
    let mut notes = Vec::new();
    let topology = Topology::of_snapshot(snapshot);
    let gateways = Gateways::new(&topology, &mut notes);
    let index = BackendIndex::new(&topology);
    let regexes = RegexPlan::new(routes);

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
        let attachments = gateways.attach(route, &mut notes);
        if attachments.is_empty() {
            continue;
        }
        let name = route.meta.object_name();
        let created = route.meta.creation_timestamp_ms;
        let rules: Vec<Arc<CompiledRule>> = route
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                Arc::new(CompiledRule::compile(
                    route, i, r, &index, &regexes, &mut notes,
                ))
            })
            .collect();
        for rule in &rules {
            rule.collect_backends(&mut backends);
        }
        for a in &attachments {
            let listener_host = gateways.listeners[a.listener].hostname.as_ref();
            for key in keys_of(a.listener) {
                let table = ports.entry(key).or_default().listeners.slot(listener_host);
                for rule in &rules {
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
        ports,
        notes,
        backends,
        regex_stats: regexes.stats,
    }
}
