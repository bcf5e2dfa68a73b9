//! What one compile keeps for the next: each route compiled once
//! ([`CompiledRoute`]) and what it depended on, so a new snapshot
//! recompiles only the routes it changed.
//!
//! A compiled route depends on its spec, on the Gateway side of the
//! topology (GatewayClasses, Gateways, Namespaces, and the Secrets that
//! decide whether an HTTPS listener is served: attachment and
//! listeners), on the ReferenceGrants and on the Services its backendRefs
//! and mirrors name (validity and ports), and on the regexes the proxy-wide
//! budget gave it. When all of those are as they were, the previous
//! compile's rules are reused as they are (`Arc`); anything else — a
//! changed spec, a Gateway edit, a grant, one of its Services — compiles
//! it afresh. EndpointSlices are not an input: endpoint moves recompile
//! nothing (the upstream side follows them).
//!
//! Cost per snapshot: O(Services) to tell which Services changed, plus
//! O(routes) spec comparisons; rule compilation only for changed routes.

use super::CompileNote;
use super::assemble::BucketAddr;
use super::attach::Attachment;
use super::regexes::{RegexPlan, RouteRegexes};
use super::rule::CompiledRule;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use switchyard_proto::model::{ConfigSnapshot, HttpRoute, ObjectName, Service};

/// One route as compiled into a table.
#[derive(Debug)]
pub(crate) struct CompiledRoute {
    /// The spec it was compiled from.
    pub(crate) spec: HttpRoute,
    /// The listeners it attached to.
    pub(crate) attachments: Vec<Attachment>,
    /// Its compiled rules.
    pub(crate) rules: Vec<Arc<CompiledRule>>,
    /// What compiling it noted.
    pub(crate) notes: Vec<CompileNote>,
    /// The Services its backendRefs and mirrors named.
    pub(crate) services: BTreeSet<ObjectName>,
    /// The regexes it was given.
    pub(crate) regexes: RouteRegexes,
    /// The buckets its candidates went to (valid while the listener
    /// layout is the same, which is when it is reused).
    pub(crate) addrs: Vec<BucketAddr>,
}

/// How many routes a compile built and how many it took from the table
/// before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Routes compiled in this table.
    pub compiled: usize,
    /// Routes reused from the previous table.
    pub reused: usize,
}

/// Which compiled routes of a previous table the next may keep.
pub(crate) struct Reuse<'p> {
    previous: &'p HashMap<ObjectName, Arc<CompiledRoute>>,
    changed_services: HashSet<ObjectName>,
}

impl<'p> Reuse<'p> {
    /// Nothing is reused (a first compile).
    pub(crate) fn none() -> Reuse<'static> {
        static EMPTY: std::sync::LazyLock<HashMap<ObjectName, Arc<CompiledRoute>>> =
            std::sync::LazyLock::new(HashMap::new);
        Reuse {
            previous: &EMPTY,
            changed_services: HashSet::new(),
        }
    }

    /// What may be reused of `previous` routes, compiled from `before`,
    /// in a table for `now`. A change to the Gateway side or to the
    /// ReferenceGrants reuses nothing (they are few and rarely edited).
    pub(crate) fn between(
        previous: &'p HashMap<ObjectName, Arc<CompiledRoute>>,
        before: &ConfigSnapshot,
        now: &ConfigSnapshot,
    ) -> Reuse<'p> {
        let same_gateway_side = before.gateway_classes == now.gateway_classes
            && before.gateways == now.gateways
            && before.namespaces == now.namespaces
            && before.reference_grants == now.reference_grants
            && before.secrets == now.secrets;
        if !same_gateway_side {
            return Reuse {
                changed_services: HashSet::new(),
                ..Reuse::none()
            };
        }
        Reuse {
            previous,
            changed_services: changed_services(&before.services, &now.services),
        }
    }

    /// Whether anything may be reused at all: a previous table exists and
    /// the Gateway side and grants are as they were.
    pub(crate) fn is_active(&self) -> bool {
        !self.previous.is_empty()
    }

    /// The previous compile of `route` (named `name`), if nothing it
    /// depends on changed.
    pub(crate) fn get(
        &self,
        name: &ObjectName,
        route: &HttpRoute,
        regexes: &RegexPlan,
    ) -> Option<Arc<CompiledRoute>> {
        let previous = self.previous.get(name)?;
        let still = previous.spec == *route
            && previous
                .services
                .iter()
                .all(|s| !self.changed_services.contains(s))
            && regexes.same_for(route, &previous.regexes);
        still.then(|| Arc::clone(previous))
    }
}

/// Services added, removed or changed between two lists.
fn changed_services(before: &[Service], now: &[Service]) -> HashSet<ObjectName> {
    fn by_name(list: &[Service]) -> HashMap<(&str, &str), usize> {
        list.iter()
            .enumerate()
            .map(|(i, s)| ((s.meta.namespace.as_str(), s.meta.name.as_str()), i))
            .collect()
    }
    let (old, new) = (by_name(before), by_name(now));
    let mut changed = HashSet::new();
    for (&(ns, name), &i) in &new {
        if old.get(&(ns, name)).is_none_or(|&j| before[j] != now[i]) {
            changed.insert(ObjectName::new(ns, name));
        }
    }
    for &(ns, name) in old.keys() {
        if !new.contains_key(&(ns, name)) {
            changed.insert(ObjectName::new(ns, name));
        }
    }
    changed
}
