//! Putting compiled routes into the lookup structure: listener key →
//! listener slot (by listener hostname) → bucket (by route hostname) of
//! candidates sorted by precedence.
//!
//! Two ways, one result. [`full`] places every route. [`incremental`]
//! starts from the previous table's structure and rebuilds only the
//! buckets that a changed, added or removed route occupied or occupies —
//! every other bucket is the previous one (`Arc`). It is used when the
//! listener layout is the previous one (the Gateway side did not change),
//! so a route's bucket addresses from its earlier compile are still valid.
//! A bucket holds the candidates of every route that places into it,
//! sorted by a total order (`precedence`), so rebuilding it from the routes
//! that did not change plus the ones that did gives what a full assembly
//! gives.
//!
//! Cost of `incremental`: a copy of the slot maps (O(buckets) reference
//! counts, no candidate copied) plus O(k log k) per touched bucket of k
//! candidates.

use super::attach::Gateways;
use super::hostname::HostPattern;
use super::precedence::PrecedenceKey;
use super::reuse::CompiledRoute;
use super::table::{Bucket, Candidate, PortTable, sorted_bucket};
use super::{ListenerKey, RouteTable};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use switchyard_proto::model::ObjectName;

/// Where a candidate goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct BucketAddr {
    key: ListenerKey,
    listener_host: Option<HostPattern>,
    route_host: Option<HostPattern>,
}

/// One candidate of a route at its address.
pub(crate) struct Placement {
    addr: BucketAddr,
    precedence: PrecedenceKey,
    candidate: Candidate,
}

/// The listener keys a served listener is reachable through.
fn keys_of(gateways: &Gateways<'_, '_>, listener: usize) -> [ListenerKey; 2] {
    let l = &gateways.listeners[listener];
    ListenerKey::both(&l.gateway, l.port)
}

/// Every candidate of `route` with its address.
pub(crate) fn placements(route: &CompiledRoute, gateways: &Gateways<'_, '_>) -> Vec<Placement> {
    let name = route.spec.meta.object_name();
    let created = route.spec.meta.creation_timestamp_ms;
    let mut out = Vec::new();
    for a in &route.attachments {
        let listener_host = gateways.listeners[a.listener].hostname.clone();
        let route_hosts: Vec<Option<HostPattern>> = if a.hostnames.is_empty() {
            vec![None]
        } else {
            a.hostnames.iter().cloned().map(Some).collect()
        };
        for key in keys_of(gateways, a.listener) {
            for rule in &route.rules {
                for (mi, m) in rule.matches.iter().enumerate() {
                    let precedence = PrecedenceKey::new(m, &name, created, rule.rule_index, mi);
                    for host in &route_hosts {
                        out.push(Placement {
                            addr: BucketAddr {
                                key: key.clone(),
                                listener_host: listener_host.clone(),
                                route_host: host.clone(),
                            },
                            precedence: precedence.clone(),
                            candidate: Candidate {
                                rule: Arc::clone(rule),
                                match_index: mi,
                            },
                        });
                    }
                }
            }
        }
    }
    out
}

/// The distinct addresses of `placements`.
pub(crate) fn addresses(placements: &[Placement]) -> Vec<BucketAddr> {
    let mut seen = HashSet::new();
    placements
        .iter()
        .filter(|p| seen.insert(&p.addr))
        .map(|p| p.addr.clone())
        .collect()
}

/// Empty slots for every served listener, under both of its keys.
fn listener_slots(gateways: &Gateways<'_, '_>) -> HashMap<ListenerKey, PortTable> {
    let mut ports: HashMap<ListenerKey, PortTable> = HashMap::new();
    for (i, l) in gateways.listeners.iter().enumerate() {
        for key in keys_of(gateways, i) {
            ports
                .entry(key)
                .or_default()
                .listeners
                .slot(l.hostname.as_ref());
        }
    }
    ports
}

/// Places every route of `routes` (in order) into fresh slots.
pub(crate) fn full<'r>(
    gateways: &Gateways<'_, '_>,
    routes: impl Iterator<Item = &'r CompiledRoute>,
) -> HashMap<ListenerKey, PortTable> {
    let mut ports = listener_slots(gateways);
    for route in routes {
        for p in placements(route, gateways) {
            ports
                .entry(p.addr.key)
                .or_default()
                .listeners
                .slot(p.addr.listener_host.as_ref())
                .add(p.addr.route_host.as_ref(), p.precedence, p.candidate);
        }
    }
    for table in ports.values_mut() {
        table.finish();
    }
    ports
}

/// The previous table's structure with the buckets of `dirty` routes
/// rebuilt: their candidates in `previous` taken out, their candidates in
/// `compiled` (if they are still there) put in.
pub(crate) fn incremental(
    previous: &RouteTable,
    compiled: &HashMap<ObjectName, Arc<CompiledRoute>>,
    dirty: &HashSet<ObjectName>,
    gateways: &Gateways<'_, '_>,
) -> HashMap<ListenerKey, PortTable> {
    let mut fresh: HashMap<BucketAddr, Vec<(PrecedenceKey, Candidate)>> = HashMap::new();
    let mut touched: HashSet<BucketAddr> = HashSet::new();
    for name in dirty {
        if let Some(old) = previous.routes.get(name) {
            touched.extend(old.addrs.iter().cloned());
        }
        if let Some(new) = compiled.get(name) {
            for p in placements(new, gateways) {
                touched.insert(p.addr.clone());
                fresh
                    .entry(p.addr)
                    .or_default()
                    .push((p.precedence, p.candidate));
            }
        }
    }
    let mut ports = (*previous.ports).clone();
    for addr in touched {
        let listeners = &mut ports.entry(addr.key.clone()).or_default().listeners;
        let table = listeners.slot(addr.listener_host.as_ref());
        let mut bucket: Vec<(PrecedenceKey, Candidate)> = table
            .routes
            .get_mut(addr.route_host.as_ref())
            .map(|b| {
                b.iter()
                    .filter(|(_, c)| !dirty.contains(&c.rule.route))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        bucket.extend(fresh.remove(&addr).unwrap_or_default());
        let bucket: Option<Arc<Bucket>> =
            (!bucket.is_empty()).then(|| Arc::new(sorted_bucket(bucket)));
        table.routes.set(addr.route_host.as_ref(), bucket);
    }
    ports
}
