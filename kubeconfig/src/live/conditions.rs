//! Route status, computed: for each parentRef of a route that names one of
//! our Gateways, the Gateway API conditions `Accepted` and `ResolvedRefs`
//! and switchyard's own `switchyard.io/Cutover`.
//!
//! Pure: a route, the served set it lives in ([`World`]) and the
//! coordinator's `RouteStatus` in, [`RouteParentStatus`]es out. No clock
//! (`lastTransitionTime` is the writer's business), no client.
//!
//! Attachment follows the Gateway API rules the router also implements
//! (sectionName/port, `allowedRoutes` namespaces and kinds, hostname
//! intersection); it deliberately does not compile rules or look at
//! endpoints: whether backends are *ready* is what the Cutover condition
//! reports, from proxy evidence.

use super::merge::is_gateway_ref;
use std::collections::BTreeMap;
use switchyard_proto::model::{
    BackendRef, Gateway, GatewayClass, HttpRoute, Listener, ListenerProtocol, ObjectName,
    ParentRef, ReferenceGrant, Resource, RouteNamespaces, RouteStatus, Service,
};

use super::kinds::GATEWAY_GROUP;

/// switchyard's own route condition type: cutover progress, from the
/// coordinators' proxy evidence.
pub const CUTOVER_CONDITION: &str = "switchyard.io/Cutover";

/// The label Kubernetes sets on every Namespace with its own name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// `status` of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl ConditionStatus {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// A condition without its `lastTransitionTime`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `type`, e.g. `Accepted`.
    pub type_: String,
    /// `status`.
    pub status: ConditionStatus,
    /// `reason`, CamelCase.
    pub reason: String,
    /// `message`, for people.
    pub message: String,
    /// `observedGeneration`: the object's `metadata.generation` this was
    /// computed from.
    pub observed_generation: Option<i64>,
}

impl Condition {
    fn new(
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: impl Into<String>,
        generation: Option<i64>,
    ) -> Condition {
        Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message: message.into(),
            observed_generation: generation,
        }
    }
}

/// The `parentRef` of a status entry (the model's, defaults filled in).
pub type ParentReference = ParentRef;

/// One entry of an HTTPRoute's `status.parents`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteParentStatus {
    /// The parentRef, as in the spec.
    pub parent_ref: ParentReference,
    /// Our controller name: the entries we own.
    pub controller_name: String,
    /// `Accepted`, `ResolvedRefs`, `switchyard.io/Cutover`.
    pub conditions: Vec<Condition>,
}

/// The served objects, indexed for status computation.
#[derive(Debug, Default)]
pub struct World<'a> {
    classes: BTreeMap<&'a str, &'a GatewayClass>,
    pub(crate) gateways: BTreeMap<ObjectName, &'a Gateway>,
    namespaces: BTreeMap<&'a str, &'a BTreeMap<String, String>>,
    services: BTreeMap<ObjectName, &'a Service>,
    grants: Vec<&'a ReferenceGrant>,
    pub(crate) routes: Vec<&'a HttpRoute>,
}

impl<'a> World<'a> {
    /// Indexes a served set (normally [`super::DesiredState::resources`]).
    pub fn new(resources: &'a [Resource]) -> World<'a> {
        let mut w = World::default();
        for r in resources {
            match r {
                Resource::GatewayClass(c) => {
                    w.classes.insert(c.meta.name.as_str(), c);
                }
                Resource::Gateway(g) => {
                    w.gateways.insert(g.meta.object_name(), g);
                }
                Resource::Namespace(n) => {
                    w.namespaces.insert(n.meta.name.as_str(), &n.meta.labels);
                }
                Resource::Service(s) => {
                    w.services.insert(s.meta.object_name(), s);
                }
                Resource::ReferenceGrant(g) => w.grants.push(g),
                Resource::HttpRoute(route) => w.routes.push(route),
                Resource::EndpointSlice(_) => {}
            }
        }
        w
    }

    /// The Gateway a parentRef names, if it is one of ours.
    pub(crate) fn our_gateway(
        &self,
        route: &HttpRoute,
        parent: &ParentRef,
        controller_name: &str,
    ) -> Option<&'a Gateway> {
        if !is_gateway_ref(&parent.group, &parent.kind) {
            return None;
        }
        let ns = parent.namespace.as_deref().unwrap_or(&route.meta.namespace);
        let gateway = *self
            .gateways
            .get(&ObjectName::new(ns, parent.name.clone()))?;
        let class = self.classes.get(gateway.gateway_class_name.as_str())?;
        (class.controller_name == controller_name).then_some(gateway)
    }

    /// The listeners of `gateway` the route attaches to through `parent`,
    /// or the Gateway API reason and a message why none.
    pub(crate) fn attach(
        &self,
        route: &HttpRoute,
        parent: &ParentRef,
        gateway: &'a Gateway,
    ) -> Result<Vec<&'a Listener>, (&'static str, String)> {
        let candidates: Vec<&Listener> = gateway
            .listeners
            .iter()
            .filter(|l| parent.section_name.as_ref().is_none_or(|s| *s == l.name))
            .filter(|l| parent.port.is_none_or(|p| p == l.port))
            .collect();
        if candidates.is_empty() {
            return Err((
                "NoMatchingParent",
                format!(
                    "Gateway {} has no listener matching sectionName {:?} and port {:?}",
                    gateway.meta.object_name(),
                    parent.section_name,
                    parent.port
                ),
            ));
        }
        let mut attached = Vec::new();
        let mut hostname_only = true;
        let mut why = Vec::new();
        for l in candidates {
            if l.protocol != ListenerProtocol::Http {
                hostname_only = false;
                why.push(format!(
                    "listener {}: protocol {:?} is not served",
                    l.name, l.protocol
                ));
            } else if let Err(e) = self.allowed(gateway, l, route) {
                hostname_only = false;
                why.push(format!("listener {}: {e}", l.name));
            } else if !hostnames_intersect(l.hostname.as_deref(), &route.hostnames) {
                why.push(format!(
                    "listener {}: no route hostname matches {:?}",
                    l.name, l.hostname
                ));
            } else {
                attached.push(l);
            }
        }
        if attached.is_empty() {
            let reason = if hostname_only {
                "NoMatchingListenerHostname"
            } else {
                "NotAllowedByListeners"
            };
            return Err((reason, why.join("; ")));
        }
        Ok(attached)
    }

    fn allowed(&self, gateway: &Gateway, l: &Listener, route: &HttpRoute) -> Result<(), String> {
        let route_ns = route.meta.namespace.as_str();
        let ns_ok = match &l.allowed_routes.namespaces {
            RouteNamespaces::Same => route_ns == gateway.meta.namespace,
            RouteNamespaces::All => true,
            RouteNamespaces::Selector(selector) => {
                let mut labels = self
                    .namespaces
                    .get(route_ns)
                    .map(|l| (*l).clone())
                    .unwrap_or_default();
                labels
                    .entry(NAMESPACE_NAME_LABEL.to_string())
                    .or_insert_with(|| route_ns.to_string());
                selector.matches(&labels)
            }
        };
        if !ns_ok {
            return Err(format!("routes from namespace {route_ns} are not allowed"));
        }
        if !listener_allows_http_routes(l) {
            return Err("kind HTTPRoute is not allowed".into());
        }
        Ok(())
    }

    /// Why a backendRef of `route` does not resolve, as (reason, message).
    fn unresolved(&self, route: &HttpRoute, b: &BackendRef) -> Option<(&'static str, String)> {
        let ns = b.namespace.as_deref().unwrap_or(&route.meta.namespace);
        let label = format!("{ns}/{}", b.name);
        if !b.is_service() {
            let group = if b.group.is_empty() { "core" } else { &b.group };
            return Some((
                "InvalidKind",
                format!(
                    "backendRef {label}: kind {group}/{} is not supported",
                    b.kind
                ),
            ));
        }
        if ns != route.meta.namespace
            && !self.grants.iter().any(|g| {
                g.meta.namespace == ns
                    && g.permits(
                        GATEWAY_GROUP,
                        "HTTPRoute",
                        &route.meta.namespace,
                        "",
                        "Service",
                        &b.name,
                    )
            })
        {
            return Some((
                "RefNotPermitted",
                format!("backendRef {label}: no ReferenceGrant in {ns} allows it"),
            ));
        }
        let Some(service) = self.services.get(&ObjectName::new(ns, b.name.clone())) else {
            return Some((
                "BackendNotFound",
                format!("backendRef {label}: Service not found"),
            ));
        };
        match b.port {
            None => Some((
                "BackendNotFound",
                format!("backendRef {label}: port is required"),
            )),
            Some(p) if !service.ports.iter().any(|sp| sp.port == p) => Some((
                "BackendNotFound",
                format!("backendRef {label}: Service has no port {p}"),
            )),
            Some(_) => None,
        }
    }
}

/// Whether a listener's `allowedRoutes.kinds` admits HTTPRoute (empty
/// means the protocol default, HTTPRoute for HTTP).
pub(crate) fn listener_allows_http_routes(l: &Listener) -> bool {
    l.allowed_routes.kinds.is_empty()
        || l.allowed_routes
            .kinds
            .iter()
            .any(|k| (k.group.is_empty() || k.group == GATEWAY_GROUP) && k.kind == "HTTPRoute")
}

/// Gateway API hostname intersection: no listener hostname or no route
/// hostnames matches everything; `*.example.com` covers any deeper name.
pub(crate) fn hostnames_intersect(listener: Option<&str>, route: &[String]) -> bool {
    let Some(listener) = listener else {
        return true;
    };
    route.is_empty()
        || route
            .iter()
            .any(|h| host_match(listener, h) || host_match(h, listener))
}

fn host_match(pattern: &str, host: &str) -> bool {
    if pattern.eq_ignore_ascii_case(host) {
        return true;
    }
    match pattern.strip_prefix('*') {
        Some(suffix) => {
            host.len() > suffix.len()
                && host
                    .to_ascii_lowercase()
                    .ends_with(&suffix.to_ascii_lowercase())
        }
        None => false,
    }
}

/// The status entries of `route` for each parentRef naming one of our
/// Gateways (other parents are other controllers' to report).
///
/// `cutover` is the coordinators' row for the route, if any; `rejected` is
/// why the route's newest version could not be read (it is then
/// `Accepted: False`, `UnsupportedValue`, while its last good version, if
/// any, keeps serving).
pub fn route_parent_statuses(
    route: &HttpRoute,
    world: &World<'_>,
    cutover: Option<&RouteStatus>,
    rejected: Option<&str>,
    controller_name: &str,
) -> Vec<RouteParentStatus> {
    use ConditionStatus::{False, True};
    let generation = route.meta.k8s_generation;
    let resolved = resolved_refs(route, world, generation);
    let progress = cutover_condition(cutover, generation);
    let mut out: Vec<RouteParentStatus> = Vec::new();
    for parent in &route.parent_refs {
        let Some(gateway) = world.our_gateway(route, parent, controller_name) else {
            continue;
        };
        if out.iter().any(|o| o.parent_ref == *parent) {
            continue;
        }
        let accepted = match (rejected, world.attach(route, parent, gateway)) {
            (Some(why), _) => {
                Condition::new("Accepted", False, "UnsupportedValue", why, generation)
            }
            (None, Err((reason, message))) => {
                Condition::new("Accepted", False, reason, message, generation)
            }
            (None, Ok(listeners)) => {
                let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
                Condition::new(
                    "Accepted",
                    True,
                    "Accepted",
                    format!("attached to listener(s) {}", names.join(", ")),
                    generation,
                )
            }
        };
        out.push(RouteParentStatus {
            parent_ref: parent.clone(),
            controller_name: controller_name.to_string(),
            conditions: vec![accepted, resolved.clone(), progress.clone()],
        });
    }
    out
}

fn resolved_refs(route: &HttpRoute, world: &World<'_>, generation: Option<i64>) -> Condition {
    let problems: Vec<(&str, String)> = route
        .rules
        .iter()
        .flat_map(|r| &r.backend_refs)
        .filter_map(|b| world.unresolved(route, b))
        .collect();
    match problems.first() {
        None => Condition::new(
            "ResolvedRefs",
            ConditionStatus::True,
            "ResolvedRefs",
            "all backendRefs resolved",
            generation,
        ),
        Some((reason, _)) => Condition::new(
            "ResolvedRefs",
            ConditionStatus::False,
            reason,
            problems
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            generation,
        ),
    }
}

fn cutover_condition(status: Option<&RouteStatus>, generation: Option<i64>) -> Condition {
    use ConditionStatus::{False, True, Unknown};
    let c = |status, reason, message: String| {
        Condition::new(CUTOVER_CONDITION, status, reason, message, generation)
    };
    let Some(s) = status else {
        return c(
            Unknown,
            "Pending",
            "not yet stored by the coordinators".to_string(),
        );
    };
    let active = s
        .active_generation
        .map_or_else(|| "none".to_string(), |g| g.to_string());
    if let Some(pending) = s.pending_generation {
        let policy = s.policy.as_deref().unwrap_or("default");
        let evidence = s.evidence.as_deref().unwrap_or("no readiness evidence yet");
        return c(
            Unknown,
            "Pending",
            format!(
                "generation {pending} waiting for readiness (policy {policy}): {evidence}; active generation {active}"
            ),
        );
    }
    let applied = s
        .applied
        .clone()
        .unwrap_or_else(|| format!("active generation {active}"));
    match &s.last_failure {
        Some(f) if f.contains("forced") => c(True, "Forced", format!("{f}; {applied}")),
        Some(f) => {
            let reason = if f.contains("time") {
                "TimedOut"
            } else {
                "Abandoned"
            };
            c(False, reason, format!("{f}; active generation {active}"))
        }
        None if s.ready => c(True, "Ready", applied),
        None => c(Unknown, "Applying", applied),
    }
}

#[cfg(test)]
#[path = "conditions_tests.rs"]
mod tests;
