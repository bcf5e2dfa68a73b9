//! Route status, computed: for each parentRef of a route that names one of
//! our Gateways, the Gateway API conditions `Accepted` and `ResolvedRefs`
//! and switchyard's own `switchyard.io/Cutover`.
//!
//! Pure: a route, the served set it lives in ([`World`]) and the
//! coordinator's `RouteStatus` in, [`RouteParentStatus`]es out. No clock
//! (`lastTransitionTime` is the writer's business), no client.
//!
//! Attachment and reference checks are the model's [`Topology`], which the
//! router follows too, mapped here to conditions; it deliberately does not
//! compile rules or look at endpoints: whether backends are *ready* is what
//! the Cutover condition reports, from proxy evidence.

use switchyard_proto::model::gateway_api::Topology;
use switchyard_proto::model::{HttpRoute, ParentRef, Resource, RouteStatus};

/// switchyard's own route condition type: cutover progress, from the
/// coordinators' proxy evidence.
pub const CUTOVER_CONDITION: &str = "switchyard.io/Cutover";

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

/// The served objects, indexed for status computation: the model's
/// [`Topology`] (the Gateway API rules the router follows too), the
/// routes, and the objects themselves (for what the topology does not
/// answer, such as a Service's port names).
#[derive(Debug)]
pub struct World<'a> {
    pub(crate) topology: Topology<'a>,
    pub(crate) routes: Vec<&'a HttpRoute>,
    pub(crate) resources: &'a [Resource],
}

impl<'a> World<'a> {
    /// Indexes a served set (normally [`super::DesiredState::resources`])
    /// for `controller_name`'s GatewayClasses.
    pub fn new(resources: &'a [Resource], controller_name: &str) -> World<'a> {
        World {
            topology: Topology::of_resources(resources, controller_name),
            routes: resources
                .iter()
                .filter_map(|r| match r {
                    Resource::HttpRoute(route) => Some(route),
                    _ => None,
                })
                .collect(),
            resources,
        }
    }
}

/// The route condition type the Gateway API sets on a route served from
/// something other than its newest spec (here: its last good version).
pub const PARTIALLY_INVALID_CONDITION: &str = "PartiallyInvalid";

/// Why a route's newest version is not what is served: it could not be
/// read, and its last good version serves instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FallBack<'a> {
    /// Why the newest version was refused, naming the field.
    pub why: &'a str,
    /// The newest version's `metadata.generation`.
    pub newest_generation: Option<i64>,
}

/// The status entries of `route` for each parentRef naming one of our
/// Gateways (other parents are other controllers' to report).
///
/// `cutover` is the coordinators' row for the route, if any. With
/// `fall_back`, `route` is the last good version, still served while the
/// newest cannot be read; following the Gateway API's "fall back"
/// pattern it is `Accepted` at the good version's generation, plus
/// `PartiallyInvalid` `True` at the newest one, saying why.
pub fn route_parent_statuses(
    route: &HttpRoute,
    world: &World<'_>,
    cutover: Option<&RouteStatus>,
    fall_back: Option<FallBack<'_>>,
    controller_name: &str,
) -> Vec<RouteParentStatus> {
    use ConditionStatus::{False, True};
    let generation = route.meta.k8s_generation;
    let resolved = resolved_refs(route, world, generation);
    let progress = cutover_condition(cutover, generation);
    let partially_invalid = fall_back.map(|f| {
        Condition::new(
            PARTIALLY_INVALID_CONDITION,
            True,
            "UnsupportedValue",
            format!(
                "Fall Back: generation {} cannot be served: {}; serving generation {} (the last good one)",
                generation_text(f.newest_generation),
                f.why,
                generation_text(generation)
            ),
            f.newest_generation,
        )
    });
    let mut out: Vec<RouteParentStatus> = Vec::new();
    for parent in &route.parent_refs {
        if world.topology.our_gateway(route, parent).is_err() {
            continue;
        }
        if out.iter().any(|o| o.parent_ref == *parent) {
            continue;
        }
        let accepted = match world.topology.attach(route, parent) {
            Err(why) => {
                Condition::new("Accepted", False, why.reason(), why.to_string(), generation)
            }
            Ok(listeners) => {
                let names: Vec<&str> = listeners.iter().map(|a| a.listener.name.as_str()).collect();
                Condition::new(
                    "Accepted",
                    True,
                    "Accepted",
                    format!("attached to listener(s) {}", names.join(", ")),
                    generation,
                )
            }
        };
        let mut conditions = vec![accepted, resolved.clone(), progress.clone()];
        conditions.extend(partially_invalid.clone());
        out.push(RouteParentStatus {
            parent_ref: parent.clone(),
            controller_name: controller_name.to_string(),
            conditions,
        });
    }
    out
}

/// The status entries of a route no version of which could be read
/// (`route` carries only its metadata and parentRefs): for each parentRef
/// naming one of our Gateways, `Accepted` `False` with
/// `UnsupportedValue` and why. Nothing of it is served.
pub fn unread_route_parent_statuses(
    route: &HttpRoute,
    world: &World<'_>,
    why: &str,
    controller_name: &str,
) -> Vec<RouteParentStatus> {
    not_accepted(
        route,
        world,
        "UnsupportedValue",
        &format!("not served: {why}"),
        controller_name,
    )
}

/// The status entries of a GRPCRoute left out because an HTTPRoute has
/// its namespace and name (route records share one name space; the
/// HTTPRoute wins): for each parentRef naming one of our Gateways,
/// `Accepted` `False` with `RouteNameTaken` (the coordinators' word for
/// the same refusal) and what to do about it.
pub fn name_taken_parent_statuses(
    route: &HttpRoute,
    world: &World<'_>,
    controller_name: &str,
) -> Vec<RouteParentStatus> {
    let message = format!(
        "not served: HTTPRoute {} has the same namespace and name, and routes of both kinds share one name space; rename one of them",
        route.meta.object_name()
    );
    not_accepted(route, world, "RouteNameTaken", &message, controller_name)
}

/// `Accepted` `False` with `reason` and `message` on every parentRef of
/// `route` that names one of our Gateways (once per parentRef).
fn not_accepted(
    route: &HttpRoute,
    world: &World<'_>,
    reason: &str,
    message: &str,
    controller_name: &str,
) -> Vec<RouteParentStatus> {
    let generation = route.meta.k8s_generation;
    let mut out: Vec<RouteParentStatus> = Vec::new();
    for parent in &route.parent_refs {
        if world.topology.our_gateway(route, parent).is_err()
            || out.iter().any(|o| o.parent_ref == *parent)
        {
            continue;
        }
        out.push(RouteParentStatus {
            parent_ref: parent.clone(),
            controller_name: controller_name.to_string(),
            conditions: vec![Condition::new(
                "Accepted",
                ConditionStatus::False,
                reason,
                message.to_string(),
                generation,
            )],
        });
    }
    out
}

fn generation_text(generation: Option<i64>) -> String {
    generation.map_or_else(|| "?".to_string(), |g| g.to_string())
}

fn resolved_refs(route: &HttpRoute, world: &World<'_>, generation: Option<i64>) -> Condition {
    let problems: Vec<(&str, String)> = route
        .rules
        .iter()
        .flat_map(|r| &r.backend_refs)
        .filter_map(|b| world.topology.resolve(route, b).err())
        .map(|why| (why.reason(), why.to_string()))
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
mod tests;
