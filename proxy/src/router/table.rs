//! The compiled lookup structure and the per-request walk through it:
//! listener key → port table → listener chosen by hostname → route
//! candidates bucketed by hostname and sorted by precedence.
//!
//! It owns the layout and the order of the walk. Hostname precedence is the
//! bucket order (exact host, then wildcards longest first, then routes
//! without hostnames); match precedence is the order inside a bucket. It
//! does not evaluate matches or filters itself (see `matching`, `rule`).

use super::filters::RequestView;
use super::hostname::{HostPattern, request_host, wildcard_suffixes};
use super::precedence::PrecedenceKey;
use super::rule::CompiledRule;
use super::{Decision, DirectResponse, RespondKind};
use http::StatusCode;
use std::collections::HashMap;
use std::sync::Arc;

/// Values stored by hostname pattern, looked up by a request host.
#[derive(Debug)]
pub(crate) struct HostBuckets<T> {
    exact: HashMap<String, T>,
    /// Keyed by suffix (`.example.com` for `*.example.com`).
    wildcard: HashMap<String, T>,
    any: Option<T>,
}

impl<T> Default for HostBuckets<T> {
    fn default() -> Self {
        HostBuckets {
            exact: HashMap::new(),
            wildcard: HashMap::new(),
            any: None,
        }
    }
}

impl<T: Clone> Clone for HostBuckets<T> {
    fn clone(&self) -> Self {
        HostBuckets {
            exact: self.exact.clone(),
            wildcard: self.wildcard.clone(),
            any: self.any.clone(),
        }
    }
}

impl<T: Default> HostBuckets<T> {
    /// The slot for `pattern` (`None`: every host), created empty if new.
    pub(crate) fn slot(&mut self, pattern: Option<&HostPattern>) -> &mut T {
        // `entry` would clone the key on every call; most calls find it.
        fn of<'m, T: Default>(map: &'m mut HashMap<String, T>, key: &str) -> &'m mut T {
            if !map.contains_key(key) {
                map.insert(key.to_owned(), T::default());
            }
            map.get_mut(key).expect("just inserted")
        }
        match pattern {
            Some(HostPattern::Exact(h)) => of(&mut self.exact, h),
            Some(HostPattern::Wildcard(s)) => of(&mut self.wildcard, s),
            None => self.any.get_or_insert_with(T::default),
        }
    }
}

impl<T> HostBuckets<T> {
    /// The slot for `pattern`, if it exists.
    pub(crate) fn get_mut(&mut self, pattern: Option<&HostPattern>) -> Option<&mut T> {
        match pattern {
            Some(HostPattern::Exact(h)) => self.exact.get_mut(h.as_str()),
            Some(HostPattern::Wildcard(s)) => self.wildcard.get_mut(s.as_str()),
            None => self.any.as_mut(),
        }
    }

    /// Puts `value` in the slot for `pattern`, or empties the slot.
    pub(crate) fn set(&mut self, pattern: Option<&HostPattern>, value: Option<T>) {
        let map = match pattern {
            Some(HostPattern::Exact(h)) => (&mut self.exact, h),
            Some(HostPattern::Wildcard(s)) => (&mut self.wildcard, s),
            None => {
                self.any = value;
                return;
            }
        };
        match value {
            Some(v) => {
                map.0.insert(map.1.clone(), v);
            }
            None => {
                map.0.remove(map.1.as_str());
            }
        }
    }

    /// Every slot whose pattern matches `host`, most specific first: the
    /// exact host, wildcards by decreasing suffix length, then "any".
    pub(crate) fn matching<'s>(&'s self, host: &'s str) -> impl Iterator<Item = &'s T> + 's {
        let exact = self.exact.get(host);
        let wild = wildcard_suffixes(host).filter_map(|s| self.wildcard.get(s));
        exact.into_iter().chain(wild).chain(self.any.as_ref())
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.exact
            .values_mut()
            .chain(self.wildcard.values_mut())
            .chain(self.any.as_mut())
    }
}

/// One match of one rule, as a candidate for a request.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(crate) rule: Arc<CompiledRule>,
    pub(crate) match_index: usize,
}

/// Candidates with their precedence keys, while building.
pub(crate) type Pending = Vec<(PrecedenceKey, Candidate)>;

/// One route hostname's candidates on one listener, sorted by precedence.
/// Keys stay with their candidates, so a new table can take a bucket's
/// candidates out or add some and sort again without the other routes.
pub(crate) type Bucket = Vec<(PrecedenceKey, Candidate)>;

/// Sorts candidates by precedence and drops duplicates (attachment already
/// lists each listener once per route; this keeps a bucket from ever
/// holding one candidate twice).
pub(crate) fn sorted_bucket(mut v: Pending) -> Bucket {
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v.dedup_by(|a, b| a.0 == b.0);
    v
}

/// The routes of one listener (conflicts leave one listener per port and
/// hostname), by route hostname. Buckets are shared (`Arc`) with the
/// tables before and after that did not change them.
#[derive(Debug, Default, Clone)]
pub(crate) struct ListenerTable {
    pub(crate) routes: HostBuckets<Arc<Bucket>>,
    pending: HostBuckets<Pending>,
}

impl ListenerTable {
    /// Adds a candidate under a route hostname (`None`: every host).
    pub(crate) fn add(&mut self, host: Option<&HostPattern>, key: PrecedenceKey, c: Candidate) {
        self.pending.slot(host).push((key, c));
    }

    /// Sorts every bucket by precedence ([`sorted_bucket`]).
    pub(crate) fn finish(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        let sorted = |v: Pending| Arc::new(sorted_bucket(v));
        self.routes = HostBuckets {
            exact: pending
                .exact
                .into_iter()
                .map(|(k, v)| (k, sorted(v)))
                .collect(),
            wildcard: pending
                .wildcard
                .into_iter()
                .map(|(k, v)| (k, sorted(v)))
                .collect(),
            any: pending.any.map(sorted),
        };
    }
}

/// Every listener reachable through one [`super::ListenerKey`], by listener
/// hostname.
#[derive(Debug, Default, Clone)]
pub(crate) struct PortTable {
    pub(crate) listeners: HostBuckets<ListenerTable>,
}

impl PortTable {
    /// Finishes every listener table.
    pub(crate) fn finish(&mut self) {
        self.listeners.values_mut().for_each(ListenerTable::finish);
    }

    /// 421 when `sni` (lower-case; none: the client sent no name) picks another
    /// listener than the request's Host; `None` when they agree or the
    /// Host picks none (see [`super::RouteTable::route_over_tls`]).
    pub(crate) fn misdirected(
        &self,
        sni: Option<&str>,
        req: &http::request::Parts,
    ) -> Option<DirectResponse> {
        let host = request_host(req);
        let by_host = self.listeners.matching(&host).next()?;
        let by_sni = self.listeners.matching(sni.unwrap_or_default()).next();
        if by_sni.is_some_and(|l| std::ptr::eq(l, by_host)) {
            return None;
        }
        Some(DirectResponse {
            status: StatusCode::MISDIRECTED_REQUEST,
            kind: RespondKind::Misdirected,
            headers: Vec::new(),
            reason: format!(
                "Host {host:?} belongs to another listener than the TLS connection's server name {sni:?}"
            ),
        })
    }

    /// Routes one request that arrived through this port table.
    pub(crate) fn route(
        &self,
        listener_port: u16,
        scheme: &'static str,
        req: &http::request::Parts,
        random: u64,
    ) -> Decision {
        let host = request_host(req);
        // Listener choice is strict: the most specific listener hostname
        // takes the request even if none of its routes matches.
        let Some(listener) = self.listeners.matching(&host).next() else {
            return not_found(
                RespondKind::NoListener,
                format!("no listener on port {listener_port} accepts host {host:?}"),
            );
        };
        for bucket in listener.routes.matching(&host) {
            for (_, c) in bucket.iter() {
                if c.rule
                    .matches
                    .get(c.match_index)
                    .is_some_and(|m| m.matches(req))
                {
                    let view = RequestView {
                        host: &host,
                        path: req.uri.path(),
                        query: req.uri.query(),
                        prefix: None,
                        listener_port,
                        scheme,
                    };
                    tracing::debug!(route = %c.rule.route, rule = c.rule.rule_index, "route matched");
                    return c.rule.decide(c.match_index, &view, random);
                }
            }
        }
        not_found(
            RespondKind::NoRoute,
            format!("no route matched host {host:?} path {:?}", req.uri.path()),
        )
    }
}

/// A 404 with a reason.
pub(crate) fn not_found(kind: RespondKind, reason: String) -> Decision {
    Decision::Respond(DirectResponse {
        status: StatusCode::NOT_FOUND,
        kind,
        headers: Vec::new(),
        reason,
    })
}
