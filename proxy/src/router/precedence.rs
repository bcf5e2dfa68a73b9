//! The Gateway API order between matches that could take the same request,
//! across every rule of every route attached to a listener.
//!
//! It owns only the ordering key. Hostname specificity is applied before
//! this order by the table's bucket layout (see `table`), not here.
//!
//! Order, most preferred first (`apis/v1/httproute_types.go` L184-209):
//! `Exact` path; then `RegularExpression` path (implementation-specific in
//! the spec: we put an explicit pattern above any prefix so a regex is never
//! shadowed by the catch-all `/`); then `PathPrefix` by declared length;
//! then a method condition; most header conditions; most query conditions;
//! the oldest route; `namespace/name` alphabetically; rule index; match
//! index.

use super::matching::{CompiledMatch, PathCond};
use std::cmp::Reverse;
use switchyard_proto::model::ObjectName;

/// Sort key of one candidate match; smaller sorts first and wins.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PrecedenceKey {
    path_kind: u8,
    prefix_len: Reverse<usize>,
    no_method: bool,
    headers: Reverse<usize>,
    query: Reverse<usize>,
    /// Creation time; routes without one sort after every route with one.
    created: (bool, i64),
    route: ObjectName,
    rule_index: usize,
    match_index: usize,
}

impl PrecedenceKey {
    /// The key of match `match_index` of rule `rule_index` of `route`.
    pub(crate) fn new(
        m: &CompiledMatch,
        route: &ObjectName,
        created_ms: Option<i64>,
        rule_index: usize,
        match_index: usize,
    ) -> PrecedenceKey {
        let (path_kind, prefix_len) = match &m.path {
            PathCond::Exact(_) => (0, 0),
            PathCond::Regex(_) => (1, 0),
            PathCond::Prefix { declared_len, .. } => (2, *declared_len),
            PathCond::Never => (3, 0),
        };
        PrecedenceKey {
            path_kind,
            prefix_len: Reverse(prefix_len),
            no_method: m.method.is_none(),
            headers: Reverse(m.headers.len()),
            query: Reverse(m.query.len()),
            created: (created_ms.is_none(), created_ms.unwrap_or(0)),
            route: route.clone(),
            rule_index,
            match_index,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_proto::model::{HeaderMatch, PathMatch, QueryParamMatch, RouteMatch};

    fn key(m: RouteMatch, route: &str, created: Option<i64>, rule: usize) -> PrecedenceKey {
        let mut problems = Vec::new();
        let c = CompiledMatch::compile(
            &m,
            &crate::router::regexes::RegexPlan::default(),
            &mut problems,
        );
        PrecedenceKey::new(&c, &ObjectName::new("ns", route), created, rule, 0)
    }

    fn path(p: PathMatch) -> RouteMatch {
        RouteMatch {
            path: Some(p),
            ..Default::default()
        }
    }

    fn header(n: usize) -> RouteMatch {
        RouteMatch {
            headers: (0..n)
                .map(|i| HeaderMatch {
                    match_type: Default::default(),
                    name: format!("h{i}"),
                    value: "v".into(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn path_kinds_and_prefix_length_come_first() {
        let exact = key(path(PathMatch::Exact("/a".into())), "z", None, 9);
        let regex = key(
            path(PathMatch::RegularExpression("/a.*".into())),
            "a",
            Some(1),
            0,
        );
        let long = key(path(PathMatch::PathPrefix("/a/b".into())), "a", Some(1), 0);
        let short = key(header(3), "a", Some(1), 0);
        assert!(exact < regex && regex < long && long < short);
    }

    #[test]
    fn method_then_headers_then_query() {
        let method = key(
            RouteMatch {
                method: Some("GET".into()),
                ..Default::default()
            },
            "z",
            None,
            5,
        );
        let two_headers = key(header(2), "a", Some(0), 0);
        let one_header = key(header(1), "a", Some(0), 0);
        let query = key(
            RouteMatch {
                headers: header(1).headers,
                query_params: vec![QueryParamMatch {
                    match_type: Default::default(),
                    name: "q".into(),
                    value: "1".into(),
                }],
                ..Default::default()
            },
            "z",
            None,
            0,
        );
        assert!(method < two_headers);
        assert!(two_headers < query);
        assert!(query < one_header);
    }

    #[test]
    fn ties_go_to_oldest_then_name_then_rule_order() {
        let old = key(header(0), "zzz", Some(10), 3);
        let new = key(header(0), "aaa", Some(20), 0);
        let unknown = key(header(0), "aaa", None, 0);
        assert!(old < new && new < unknown);
        let a = key(header(0), "a", Some(10), 1);
        let b = key(header(0), "b", Some(10), 0);
        assert!(a < b);
        let first_rule = key(header(0), "a", Some(10), 0);
        assert!(first_rule < a);
    }
}
