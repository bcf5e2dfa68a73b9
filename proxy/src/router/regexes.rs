//! Route regexes: compiled once per pattern and shared by every table that
//! uses it, and held to the proxy's budget.
//!
//! Why a cache: every snapshot compiles a new [`super::RouteTable`], and
//! most snapshots change one object, not the routes' regexes. Compiling
//! every regex again made each unrelated change cost seconds of CPU and a
//! fresh copy of every compiled regex. Patterns are looked up in a
//! process-wide map of weak references: a pattern some live table still
//! uses is shared (the compiled program is reference-counted; only the
//! per-thread search caches are per table), a pattern no table uses any
//! more is dropped with its last table. The map holds no regex alive and
//! forgets dead entries on every compile, so it never outgrows what the
//! tables themselves hold. The key is the pattern alone: the compile
//! settings are constants ([`compile_route_regex`]), so a route that
//! changes but keeps its patterns recompiles nothing either.
//!
//! Budget: each pattern is already bounded per match and per route at
//! apply time (`switchyard_proto::model::validate`); here the distinct
//! patterns of every served route together are held to
//! [`MAX_REGEX_BYTES_PER_PROXY`], charged oldest route first (the Gateway
//! API's tie-break), so a new route cannot take the room of routes already
//! served. A pattern past the budget never matches and gets a compile note.
//!
//! Not here: what a regex match means (`matching`).

use regex_automata::meta::Regex;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};
use switchyard_proto::model::validate::{MAX_REGEX_BYTES_PER_PROXY, compile_route_regex};
use switchyard_proto::model::{HttpRoute, PathMatch, StringMatchType};

/// Compiled regexes by pattern, as long as some table holds them.
static CACHE: LazyLock<Mutex<HashMap<String, Weak<Regex>>>> = LazyLock::new(Mutex::default);

/// What compiling a table did with its regexes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegexStats {
    /// Distinct patterns compiled by this table.
    pub compiled: usize,
    /// Distinct patterns shared with a table compiled before.
    pub reused: usize,
    /// Compiled heap of the distinct patterns this table uses.
    pub bytes: usize,
    /// Patterns left out: over the proxy budget, or invalid.
    pub refused: usize,
}

/// Every regex a table needs, resolved before its rules compile.
#[derive(Debug, Default)]
pub(crate) struct RegexPlan {
    by_pattern: HashMap<String, Result<Arc<Regex>, String>>,
    pub(crate) stats: RegexStats,
}

impl RegexPlan {
    /// Resolves the regexes of `routes`, charging the oldest route first.
    pub(crate) fn new(routes: &[HttpRoute]) -> RegexPlan {
        // Only routes with regexes take part in the budget's order.
        let mut order: Vec<&HttpRoute> = routes
            .iter()
            .filter(|r| patterns(r).next().is_some())
            .collect();
        order.sort_by(|a, b| {
            (
                a.meta.creation_timestamp_ms,
                &a.meta.namespace,
                &a.meta.name,
            )
                .cmp(&(
                    b.meta.creation_timestamp_ms,
                    &b.meta.namespace,
                    &b.meta.name,
                ))
        });
        let mut plan = RegexPlan::default();
        let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
        cache.retain(|_, regex| regex.strong_count() > 0);
        for pattern in order.into_iter().flat_map(patterns) {
            if plan.by_pattern.contains_key(pattern) {
                continue;
            }
            let (found, fresh) = match cache.get(pattern).and_then(Weak::upgrade) {
                Some(regex) => (Ok(regex), false),
                None => (compile_route_regex(pattern).map(Arc::new), true),
            };
            let entry = match found {
                Ok(regex) => {
                    let size = regex.memory_usage();
                    if fresh {
                        cache.insert(pattern.to_owned(), Arc::downgrade(&regex));
                    }
                    if plan.stats.bytes + size > MAX_REGEX_BYTES_PER_PROXY {
                        plan.stats.refused += 1;
                        Err(format!(
                            "regular expression {pattern:?} left out: the routes' regular \
                             expressions would compile to more than {} MiB on this proxy",
                            MAX_REGEX_BYTES_PER_PROXY >> 20
                        ))
                    } else {
                        plan.stats.bytes += size;
                        if fresh {
                            plan.stats.compiled += 1;
                        } else {
                            plan.stats.reused += 1;
                        }
                        Ok(regex)
                    }
                }
                Err(why) => {
                    plan.stats.refused += 1;
                    Err(why)
                }
            };
            plan.by_pattern.insert(pattern.to_owned(), entry);
        }
        plan
    }

    /// The compiled regex for `pattern`, or why there is none.
    pub(crate) fn get(&self, pattern: &str) -> Result<Arc<Regex>, String> {
        match self.by_pattern.get(pattern) {
            Some(found) => found.clone(),
            // Only for patterns of routes not given to `new`; compile them
            // without the cache (tests of single matches do).
            None => compile_route_regex(pattern).map(Arc::new),
        }
    }
}

/// The regexes one route was given, by pattern, as a compile saw them.
pub(crate) type RouteRegexes = Vec<(String, Result<Arc<Regex>, String>)>;

impl RegexPlan {
    /// What this plan gives `route`'s patterns.
    pub(crate) fn for_route(&self, route: &HttpRoute) -> RouteRegexes {
        patterns(route)
            .map(|p| (p.to_owned(), self.get(p)))
            .collect()
    }

    /// Whether this plan gives `route` the very regexes (or refusals) it
    /// was given before: a route compiled earlier is only reused then,
    /// because the proxy-wide budget can move when other routes change.
    pub(crate) fn same_for(&self, route: &HttpRoute, before: &RouteRegexes) -> bool {
        let mut now = patterns(route);
        let same = before.iter().all(|(pattern, was)| {
            now.next().is_some_and(|p| {
                p == pattern
                    && match (self.by_pattern.get(p), was) {
                        (Some(Ok(a)), Ok(b)) => Arc::ptr_eq(a, b),
                        (Some(Err(a)), Err(b)) => a == b,
                        _ => false,
                    }
            })
        });
        same && now.next().is_none()
    }
}

/// The regex patterns of one route: path, header and query matches.
fn patterns(route: &HttpRoute) -> impl Iterator<Item = &str> {
    route
        .rules
        .iter()
        .flat_map(|rule| &rule.matches)
        .flat_map(|m| {
            let path = match &m.path {
                Some(PathMatch::RegularExpression(p)) => Some(p.as_str()),
                _ => None,
            };
            let headers = m
                .headers
                .iter()
                .filter(|h| h.match_type == StringMatchType::RegularExpression)
                .map(|h| h.value.as_str());
            let query = m
                .query_params
                .iter()
                .filter(|q| q.match_type == StringMatchType::RegularExpression)
                .map(|q| q.value.as_str());
            path.into_iter().chain(headers).chain(query)
        })
}
