//! Kubernetes Events on an HTTPRoute for its cutovers: started,
//! committed, timed out, abandoned — what `kubectl describe httproute`
//! and `kubectl get events` show next to the `switchyard.io/Cutover`
//! condition.
//!
//! **Which transitions.** [`transitions`] compares the coordinators' row
//! for a route before and after (pure); the publisher keeps the previous
//! rows of its term in memory. A transition that happened while no
//! coordinator was leading (during a failover) is not seen and gets no
//! Event: Events are a best-effort log, the condition is the truth.
//!
//! **Once, even across leaders.** An Event's name is derived from the
//! route, the generation and the transition (`app.cutover-7-committed`),
//! so a second create of the same transition — a new leader seeing it
//! again — gets `409 AlreadyExists` and is taken as done.
//!
//! **GEP-1867.** Events are the only objects switchyard creates in a
//! cluster (the proxies are one static fleet shared by every Gateway,
//! deployed from `deploy/`; no per-Gateway Deployment or Service exists).
//! So the labels and annotations of `spec.infrastructure` of the Gateways
//! a route is attached to are put on the Events switchyard creates about
//! it; the publisher reads them.
//!
//! It deliberately writes no status and decides no cutover.

use super::ClusterSource;
use super::conditions::World;
use super::error::LiveError;
use super::kinds::api_resource;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use kube::core::DynamicObject;
use serde_json::Value;
use std::collections::BTreeMap;
use switchyard_proto::model::{HttpRoute, Kind, ObjectName, RouteStatus};

/// One cutover transition of a route, at a generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CutoverEvent {
    /// A new generation started waiting for readiness.
    Started {
        /// The pending generation.
        generation: u64,
    },
    /// The pending generation became the active one.
    Committed {
        /// It.
        generation: u64,
        /// True when it was forced after its timeout.
        forced: bool,
    },
    /// The pending generation's cutover timed out.
    TimedOut {
        /// It.
        generation: u64,
        /// The coordinators' reason.
        why: String,
    },
    /// The pending generation was given up (replaced, or failed).
    Abandoned {
        /// It.
        generation: u64,
        /// The coordinators' reason, or what replaced it.
        why: String,
    },
}

impl CutoverEvent {
    /// `reason` of the Event (CamelCase).
    pub fn reason(&self) -> &'static str {
        match self {
            CutoverEvent::Started { .. } => "CutoverStarted",
            CutoverEvent::Committed { .. } => "CutoverCommitted",
            CutoverEvent::TimedOut { .. } => "CutoverTimedOut",
            CutoverEvent::Abandoned { .. } => "CutoverAbandoned",
        }
    }

    fn generation(&self) -> u64 {
        match self {
            CutoverEvent::Started { generation }
            | CutoverEvent::Committed { generation, .. }
            | CutoverEvent::TimedOut { generation, .. }
            | CutoverEvent::Abandoned { generation, .. } => *generation,
        }
    }

    /// `Normal`, or `Warning` for a cutover that did not commit.
    pub fn type_(&self) -> &'static str {
        match self {
            CutoverEvent::Started { .. } | CutoverEvent::Committed { .. } => "Normal",
            CutoverEvent::TimedOut { .. } | CutoverEvent::Abandoned { .. } => "Warning",
        }
    }

    /// The Event's `note`, for people.
    pub fn note(&self) -> String {
        match self {
            CutoverEvent::Started { generation } => {
                format!("generation {generation} is waiting for readiness on the proxies")
            }
            CutoverEvent::Committed { generation, forced } => {
                let how = if *forced {
                    " (forced after its timeout)"
                } else {
                    ""
                };
                format!("generation {generation} is now served by every live proxy{how}")
            }
            CutoverEvent::TimedOut { generation, why } => {
                format!("generation {generation} timed out: {why}")
            }
            CutoverEvent::Abandoned { generation, why } => {
                format!("generation {generation} abandoned: {why}")
            }
        }
    }

    /// The Event's name for `route`: one per route, generation and
    /// transition.
    pub fn event_name(&self, route: &str) -> String {
        let what = match self {
            CutoverEvent::Started { .. } => "started",
            CutoverEvent::Committed { .. } => "committed",
            CutoverEvent::TimedOut { .. } => "timed-out",
            CutoverEvent::Abandoned { .. } => "abandoned",
        };
        format!("{route}.cutover-{}-{what}", self.generation())
    }
}

/// The cutover transitions from `before` to `after` (one route's rows);
/// none without a `before` (nothing was seen to change). A generation
/// that became active without being seen pending — committed by its
/// apply's own entry (the fleet was already ready for it), or pending and
/// committed between two looks — is a commit too.
pub fn transitions(before: Option<&RouteStatus>, after: &RouteStatus) -> Vec<CutoverEvent> {
    let Some(before) = before else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(g) = before.pending_generation
        && after.pending_generation != Some(g)
    {
        let why = after.last_failure.clone().unwrap_or_default();
        out.push(if after.active_generation == Some(g) {
            CutoverEvent::Committed {
                generation: g,
                forced: after.forced,
            }
        } else if why.contains("time") {
            CutoverEvent::TimedOut { generation: g, why }
        } else {
            // A newer generation pending, or already active (committed
            // by its apply's own entry), replaced it.
            let newer = after
                .pending_generation
                .or(after.active_generation.filter(|a| *a > g));
            let why = match newer {
                Some(next) if why.is_empty() => format!("replaced by generation {next}"),
                _ if why.is_empty() => "given up before it was served".to_string(),
                _ => why,
            };
            CutoverEvent::Abandoned { generation: g, why }
        });
    }
    if let Some(g) = after.active_generation
        && before.active_generation != Some(g)
        && before.pending_generation != Some(g)
    {
        out.push(CutoverEvent::Committed {
            generation: g,
            forced: after.forced,
        });
    }
    if let Some(g) = after.pending_generation
        && before.pending_generation != Some(g)
    {
        out.push(CutoverEvent::Started { generation: g });
    }
    out
}

/// Creates `event` on route `route` of `kind` (uid `uid`) in `cluster`, with
/// `labels` and `annotations` (the route's Gateways' infrastructure).
/// An Event of that name already there counts as created.
#[allow(clippy::too_many_arguments)] // each is one field of the Event
pub(crate) async fn create_cutover_event(
    client: &kube::Client,
    cluster: &str,
    kind: Kind,
    route: &ObjectName,
    uid: Option<String>,
    event: &CutoverEvent,
    controller_name: &str,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
) -> Result<(), LiveError> {
    let api: Api<Event> = Api::namespaced(client.clone(), &route.namespace);
    let now = k8s_openapi::jiff::Timestamp::now();
    let object = Event {
        metadata: ObjectMeta {
            name: Some(event.event_name(&route.name)),
            namespace: Some(route.namespace.clone()),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some("Cutover".to_string()),
        reason: Some(event.reason().to_string()),
        note: Some(event.note()),
        type_: Some(event.type_().to_string()),
        reporting_controller: Some(controller_name.to_string()),
        reporting_instance: Some(format!("{controller_name}/coordinator")),
        regarding: Some(ObjectReference {
            api_version: Some("gateway.networking.k8s.io/v1".to_string()),
            kind: Some(kind.as_str().to_string()),
            name: Some(route.name.clone()),
            namespace: Some(route.namespace.clone()),
            uid,
            ..ObjectReference::default()
        }),
        ..Event::default()
    };
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(LiveError::Status {
            cluster: cluster.to_string(),
            kind: "Event",
            object: format!("{}/{}", route.namespace, event.event_name(&route.name)),
            cause: Box::new(e),
        }),
    }
}

/// Emits `event` on the route (`kind`: HTTPRoute or GRPCRoute) `name` in
/// `source`, reading the route's uid
/// (so `kubectl describe` finds the Event) and the `spec.infrastructure`
/// labels and annotations of its parent Gateways that are ours (`route`
/// is its served version, `None` when not served). A route gone is no
/// error.
pub(crate) async fn emit(
    source: &ClusterSource,
    kind: Kind,
    name: &ObjectName,
    route: Option<&HttpRoute>,
    world: &World<'_>,
    event: &CutoverEvent,
    controller_name: &str,
) -> Result<(), LiveError> {
    let get = |kind: Kind, object: ObjectName| async move {
        let api: Api<DynamicObject> = Api::namespaced_with(
            source.client.clone(),
            &object.namespace,
            &api_resource(kind),
        );
        api.get_opt(&object.name)
            .await
            .map_err(|e| LiveError::Status {
                cluster: source.name.clone(),
                kind: kind.as_str(),
                object: object.to_string(),
                cause: Box::new(e),
            })
    };
    let Some(stored) = get(kind, name.clone()).await? else {
        return Ok(());
    };
    let (mut labels, mut annotations) = (BTreeMap::new(), BTreeMap::new());
    for parent in route.map_or(&[][..], |r| r.parent_refs.as_slice()) {
        let Some(gateway) = route.and_then(|r| world.topology.our_gateway(r, parent).ok()) else {
            continue;
        };
        let Some(gateway) = get(Kind::Gateway, gateway.meta.object_name()).await? else {
            continue;
        };
        for (field, into) in [("labels", &mut labels), ("annotations", &mut annotations)] {
            let pairs = gateway
                .data
                .pointer(&format!("/spec/infrastructure/{field}"))
                .and_then(Value::as_object);
            for (k, v) in pairs.into_iter().flatten() {
                if let Some(v) = v.as_str() {
                    into.entry(k.clone()).or_insert_with(|| v.to_string());
                }
            }
        }
    }
    create_cutover_event(
        &source.client,
        &source.name,
        kind,
        name,
        stored.metadata.uid,
        event,
        controller_name,
        labels,
        annotations,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(active: Option<u64>, pending: Option<u64>, failure: Option<&str>) -> RouteStatus {
        RouteStatus {
            namespace: "shop".into(),
            name: "app".into(),
            active_generation: active,
            pending_generation: pending,
            last_failure: failure.map(str::to_string),
            ..RouteStatus::default()
        }
    }

    #[test]
    fn started_then_committed() {
        let idle = row(Some(6), None, None);
        let pending = row(Some(6), Some(7), None);
        assert_eq!(
            transitions(Some(&idle), &pending),
            [CutoverEvent::Started { generation: 7 }]
        );
        let done = row(Some(7), None, None);
        assert_eq!(
            transitions(Some(&pending), &done),
            [CutoverEvent::Committed {
                generation: 7,
                forced: false
            }]
        );
        assert!(transitions(Some(&done), &done).is_empty());
        assert!(transitions(None, &pending).is_empty(), "nothing seen");
    }

    #[test]
    fn a_generation_active_without_being_seen_pending_is_a_commit() {
        // Committed by its apply's own entry.
        let idle = row(Some(6), None, None);
        let done = row(Some(7), None, None);
        assert_eq!(
            transitions(Some(&idle), &done),
            [CutoverEvent::Committed {
                generation: 7,
                forced: false
            }]
        );
        // One pending generation replaced by another committed at once:
        // the first was abandoned, the second committed.
        let pending = row(Some(6), Some(7), None);
        let replaced_and_done = row(Some(8), None, None);
        let events = transitions(Some(&pending), &replaced_and_done);
        assert_eq!(
            events,
            [
                CutoverEvent::Abandoned {
                    generation: 7,
                    why: "replaced by generation 8".into()
                },
                CutoverEvent::Committed {
                    generation: 8,
                    forced: false
                }
            ]
        );
    }

    #[test]
    fn timed_out_abandoned_and_replaced() {
        let pending = row(Some(6), Some(7), None);
        let timed_out = row(Some(6), None, Some("readiness timed out after 30s"));
        let events = transitions(Some(&pending), &timed_out);
        let [CutoverEvent::TimedOut { generation: 7, why }] = events.as_slice() else {
            panic!("{events:?}")
        };
        assert!(why.contains("timed out"));
        let abandoned = row(Some(6), None, Some("route deleted"));
        assert_eq!(
            transitions(Some(&pending), &abandoned)[0].reason(),
            "CutoverAbandoned"
        );
        let replaced = row(Some(6), Some(8), None);
        let events = transitions(Some(&pending), &replaced);
        assert_eq!(
            events,
            [
                CutoverEvent::Abandoned {
                    generation: 7,
                    why: "replaced by generation 8".into()
                },
                CutoverEvent::Started { generation: 8 }
            ]
        );
        assert_eq!(events[0].type_(), "Warning");
        assert_eq!(events[0].event_name("app"), "app.cutover-7-abandoned");
    }
}
