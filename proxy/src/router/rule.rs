//! One HTTPRoute rule compiled: its matches, its rule-level filters and its
//! backendRefs, each ref already resolved and carrying the combined effect
//! of rule and ref filters; and the decision a rule makes for a request it
//! took (forward, redirect, or 500).
//!
//! It owns the per-rule outcome. It does not choose between rules (see
//! `table` and `precedence`).

use super::backends::{BackendIndex, pick_weighted};
use super::filters::{FilterSet, Redirect, RequestView, mirror_taken, new_path};
use super::matching::CompiledMatch;
use super::regexes::RegexPlan;
use super::{CompileNote, Decision, DirectResponse, ForwardPlan, HeaderEdits, RespondKind};
use http::{HeaderValue, StatusCode};
use std::collections::BTreeSet;
use std::sync::Arc;
use switchyard_proto::model::{BackendKey, HttpRoute, ObjectName, PathModifier, RouteRule};

/// A mirror whose backendRef resolved.
#[derive(Debug, Clone)]
pub(crate) struct Mirror {
    backend: Arc<BackendKey>,
    threshold: u64,
}

/// One backendRef of a rule, with rule and ref filters folded together.
#[derive(Debug)]
pub(crate) struct CompiledBackend {
    weight: u32,
    /// The Service port, or why the ref is invalid (its share answers 500).
    /// Shared (like the edits below) with every request's [`ForwardPlan`]:
    /// a plan costs reference counts, not copies.
    target: Result<Arc<BackendKey>, String>,
    /// A RequestRedirect on the ref itself.
    redirect: Option<Redirect>,
    request: Arc<HeaderEdits>,
    response: Arc<HeaderEdits>,
    host: Option<String>,
    path: Option<PathModifier>,
    mirrors: Vec<Mirror>,
}

/// A compiled rule.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    /// The route it belongs to.
    pub(crate) route: Arc<ObjectName>,
    /// Its index in the route's `rules`.
    pub(crate) rule_index: usize,
    /// Its matches (one catch-all when the route listed none).
    pub(crate) matches: Vec<CompiledMatch>,
    /// A rule-level RequestRedirect: answered before any backend choice.
    redirect: Option<Redirect>,
    /// Rule-level response edits, for redirects answered by the rule.
    response: HeaderEdits,
    backends: Vec<CompiledBackend>,
}

impl CompiledRule {
    /// Compiles rule `rule_index` of `route`; problems become notes.
    pub(crate) fn compile(
        route: &HttpRoute,
        rule_index: usize,
        rule: &RouteRule,
        index: &BackendIndex<'_, '_>,
        regexes: &RegexPlan,
        notes: &mut Vec<CompileNote>,
    ) -> CompiledRule {
        let name = route.meta.object_name();
        let mut problems = Vec::new();
        let matches = if rule.matches.is_empty() {
            vec![CompiledMatch::catch_all()]
        } else {
            rule.matches
                .iter()
                .map(|m| CompiledMatch::compile(m, regexes, &mut problems))
                .collect()
        };
        let filters = FilterSet::compile(&rule.filters, &mut problems);
        let rule_mirrors = resolve_mirrors(&filters, route, index, &mut problems);
        let mut backends = Vec::with_capacity(rule.backend_refs.len());
        for (j, r) in rule.backend_refs.iter().enumerate() {
            let own = FilterSet::compile(&r.filters, &mut problems);
            let target = index.resolve(route, r).map(Arc::new);
            if let Err(why) = &target {
                problems.push(format!("backendRef {j}: {why}; its share answers 500"));
            }
            if own.needs_prefix() && matches.iter().any(|m| m.replaceable_prefix().is_none()) {
                problems.push(format!(
                    "backendRef {j}: ReplacePrefixMatch with a regex path match keeps the path"
                ));
            }
            let mut request = filters.request.clone();
            request.extend(&own.request);
            let mut response = filters.response.clone();
            response.extend(&own.response);
            let mut mirrors = rule_mirrors.clone();
            mirrors.extend(resolve_mirrors(&own, route, index, &mut problems));
            backends.push(CompiledBackend {
                weight: r.weight,
                target,
                redirect: own.redirect,
                request: Arc::new(request),
                response: Arc::new(response),
                host: own.rewrite_host.or_else(|| filters.rewrite_host.clone()),
                path: own.rewrite_path.or_else(|| filters.rewrite_path.clone()),
                mirrors,
            });
        }
        if filters.needs_prefix() && matches.iter().any(|m| m.replaceable_prefix().is_none()) {
            problems.push("ReplacePrefixMatch with a regex path match keeps the path".into());
        }
        if rule.backend_refs.is_empty() && filters.redirect.is_none() {
            problems.push("has no backendRefs; requests it takes answer 500".into());
        }
        for p in problems {
            notes.push(CompileNote::route(&name, format!("rule {rule_index}: {p}")));
        }
        CompiledRule {
            route: Arc::new(name),
            rule_index,
            matches,
            redirect: filters.redirect,
            response: filters.response,
            backends,
        }
    }

    /// Adds every backend this rule can send traffic or mirrors to: valid
    /// refs with a non-zero weight that are not redirected, and their
    /// mirrors. A redirecting rule sends nothing anywhere.
    pub(crate) fn collect_backends(&self, out: &mut BTreeSet<BackendKey>) {
        if self.redirect.is_some() {
            return;
        }
        for b in &self.backends {
            if b.weight == 0 || b.redirect.is_some() {
                continue;
            }
            if let Ok(key) = &b.target {
                out.insert(BackendKey::clone(key));
                out.extend(b.mirrors.iter().map(|m| BackendKey::clone(&m.backend)));
            }
        }
    }

    /// What this rule does with a request its match `match_index` took.
    pub(crate) fn decide(
        &self,
        match_index: usize,
        req: &RequestView<'_>,
        random: u64,
    ) -> Decision {
        let prefix = self
            .matches
            .get(match_index)
            .and_then(CompiledMatch::replaceable_prefix);
        let view = RequestView { prefix, ..*req };
        if let Some(r) = &self.redirect {
            return redirect_response(r, &self.response, &view, self.what());
        }
        if self.backends.is_empty() {
            return error_500(format!("{} has no backendRefs", self.what()));
        }
        let Some(chosen) = pick_weighted(self.backends.iter().map(|b| b.weight), random) else {
            return error_500(format!("every backendRef of {} has weight 0", self.what()));
        };
        let b = &self.backends[chosen];
        if let Some(r) = &b.redirect {
            return redirect_response(r, &b.response, &view, self.what());
        }
        let backend = match &b.target {
            Ok(key) => Arc::clone(key),
            Err(why) => return error_500(format!("{}: {why}", self.what())),
        };
        let path_and_query = b.path.as_ref().map(|m| {
            let mut p = new_path(Some(m), view.path, view.prefix);
            if let Some(q) = view.query {
                p.push('?');
                p.push_str(q);
            }
            p
        });
        Decision::Forward(ForwardPlan {
            route: Arc::clone(&self.route),
            rule_index: self.rule_index,
            backend,
            request_headers: Arc::clone(&b.request),
            response_headers: Arc::clone(&b.response),
            host: b.host.clone(),
            path_and_query,
            mirrors: b
                .mirrors
                .iter()
                .filter(|m| mirror_taken(m.threshold, random))
                .map(|m| Arc::clone(&m.backend))
                .collect(),
        })
    }

    fn what(&self) -> String {
        format!("route {} rule {}", self.route, self.rule_index)
    }
}

fn resolve_mirrors(
    set: &FilterSet,
    route: &HttpRoute,
    index: &BackendIndex<'_, '_>,
    problems: &mut Vec<String>,
) -> Vec<Mirror> {
    set.mirrors
        .iter()
        .filter_map(|m| match index.resolve(route, &m.backend_ref) {
            Ok(backend) => Some(Mirror {
                backend: Arc::new(backend),
                threshold: m.threshold,
            }),
            Err(why) => {
                problems.push(format!("RequestMirror not applied: {why}"));
                None
            }
        })
        .collect()
}

/// A redirect answer; the level's response header edits apply to it too
/// (`set` and `add`; there is nothing to remove from a fresh response).
fn redirect_response(
    r: &Redirect,
    response: &HeaderEdits,
    view: &RequestView<'_>,
    what: String,
) -> Decision {
    let location = r.location(view);
    let mut headers = Vec::with_capacity(1 + response.set.len() + response.add.len());
    match HeaderValue::try_from(location) {
        Ok(v) => headers.push((http::header::LOCATION, v)),
        Err(_) => {
            return error_500(format!(
                "{what}: redirect Location is not a valid header value"
            ));
        }
    }
    headers.extend(response.set.iter().cloned());
    headers.extend(response.add.iter().cloned());
    Decision::Respond(DirectResponse {
        status: r.status,
        kind: RespondKind::Redirect,
        headers,
        reason: format!("redirect by {what}"),
    })
}

fn error_500(reason: String) -> Decision {
    Decision::Respond(DirectResponse {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        kind: RespondKind::InvalidBackend,
        headers: Vec::new(),
        reason,
    })
}
