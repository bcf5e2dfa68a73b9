//! Writing status: the server-side-apply writers for HTTPRoute and
//! Gateway status, and the pure builders of what they apply.
//!
//! **Why read, merge, then force-apply with a resourceVersion.** An
//! HTTPRoute's `status.parents` is an *atomic* list in the Gateway API
//! schema (no list-map keys), so server-side apply cannot split it between
//! controllers by field manager: whoever applies it owns all of it. Each
//! controller must therefore write the whole list, keeping the other
//! controllers' entries exactly as they are and replacing only its own
//! (those with its `controllerName`). We read the object, merge, and apply
//! with our own field manager ([`super::FIELD_MANAGER`]) and `force: true`
//! — without force every write after another controller's would conflict
//! forever — guarded by `metadata.resourceVersion` in the applied object:
//! if anyone wrote in between, the API server answers 409 and we read
//! again, so another controller's fresh entries are never lost.
//!
//! Gateway status belongs to the Gateway's class controller (us) alone;
//! its `conditions` and `listeners` are list-maps keyed by type and name,
//! so the same apply only touches the entries we set. Reading first also
//! lets both writers keep `lastTransitionTime` when a condition's status
//! did not change, and skip the write entirely when nothing changed.
//!
//! It deliberately does not decide *what* the conditions are
//! ([`super::route_parent_statuses`], [`super::gateway_status`]) nor when
//! to publish ([`super::StatusPublisher`]).

use super::conditions::{Condition, RouteParentStatus};
use super::error::LiveError;
use super::gateway_conditions::GatewayStatus;
use super::kinds::{FIELD_MANAGER, api_resource};
use gateway_api::apis::standard::gateways::{
    GatewayStatus as K8sGatewayStatus, GatewayStatusListeners, GatewayStatusListenersSupportedKinds,
};
use gateway_api::apis::standard::httproutes::{
    HttpRouteStatusParents, HttpRouteStatusParentsParentRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as K8sCondition, Time};
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};
use switchyard_proto::model::{Kind, ObjectName};
use tracing::debug;

/// How many read-merge-apply rounds a write tries before giving up on
/// conflicts (the next publish tries again).
const ATTEMPTS: u32 = 3;

/// What a status write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The status was applied.
    Written,
    /// The stored status already said the same; nothing was sent.
    Unchanged,
    /// The object no longer exists; nothing was sent.
    Gone,
}

/// Replaces our entries of an HTTPRoute's `status.parents` in `cluster`
/// with `parents` (all of them carrying `controller_name`), keeping every
/// other controller's entry.
pub async fn write_route_status(
    client: &kube::Client,
    cluster: &str,
    route: &ObjectName,
    controller_name: &str,
    parents: &[RouteParentStatus],
) -> Result<WriteOutcome, LiveError> {
    let now = now();
    write(client, cluster, Kind::HTTPRoute, route, |current| {
        let existing = current.data.pointer("/status/parents");
        route_parents_patch(existing, parents, controller_name, &now)
            .map(|parents| json!({ "parents": parents }))
    })
    .await
}

/// Applies a Gateway's conditions and listener statuses in `cluster`.
pub async fn write_gateway_status(
    client: &kube::Client,
    cluster: &str,
    gateway: &ObjectName,
    status: &GatewayStatus,
) -> Result<WriteOutcome, LiveError> {
    let now = now();
    write(client, cluster, Kind::Gateway, gateway, |current| {
        gateway_status_patch(current.data.get("status"), status, &now)
    })
    .await
}

/// Read, build, apply; again on 409.
async fn write(
    client: &kube::Client,
    cluster: &str,
    kind: Kind,
    name: &ObjectName,
    build: impl Fn(&DynamicObject) -> Option<Value>,
) -> Result<WriteOutcome, LiveError> {
    let resource = api_resource(kind);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &name.namespace, &resource);
    let fail = |source| LiveError::Status {
        cluster: cluster.to_string(),
        kind: kind.as_str(),
        object: name.to_string(),
        cause: Box::new(source),
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for attempt in 1..=ATTEMPTS {
        let current = match api.get(&name.name).await {
            Ok(current) => current,
            Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(WriteOutcome::Gone),
            Err(e) => return Err(fail(e)),
        };
        let Some(status) = build(&current) else {
            return Ok(WriteOutcome::Unchanged);
        };
        let body = json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": {
                "name": name.name,
                "namespace": name.namespace,
                "resourceVersion": current.metadata.resource_version,
            },
            "status": status,
        });
        match api
            .patch_status(&name.name, &params, &Patch::Apply(&body))
            .await
        {
            Ok(_) => return Ok(WriteOutcome::Written),
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                debug!(%cluster, object = %name, attempt, "status write conflicted; reading again");
            }
            Err(e) => return Err(fail(e)),
        }
    }
    Err(LiveError::Conflict {
        cluster: cluster.to_string(),
        kind: kind.as_str(),
        object: name.to_string(),
        attempts: ATTEMPTS,
    })
}

/// Now, to the second (Kubernetes stores condition times in seconds, and
/// equal times are what let an unchanged status compare equal).
fn now() -> Time {
    let ts = k8s_openapi::jiff::Timestamp::now();
    Time(k8s_openapi::jiff::Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

/// The `status.parents` to apply: other controllers' entries untouched, in
/// their order, then ours. `None` when our entries would not change.
pub(crate) fn route_parents_patch(
    existing: Option<&Value>,
    ours: &[RouteParentStatus],
    controller_name: &str,
    now: &Time,
) -> Option<Vec<Value>> {
    let existing: &[Value] = existing
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let is_ours =
        |v: &&Value| v.get("controllerName").and_then(Value::as_str) == Some(controller_name);
    let old_ours: Vec<HttpRouteStatusParents> = existing
        .iter()
        .filter(is_ours)
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    let new_ours: Vec<HttpRouteStatusParents> = ours
        .iter()
        .map(|p| {
            let parent_ref = parent_ref(p);
            let old = old_ours
                .iter()
                .find(|o| o.parent_ref == parent_ref)
                .map_or(&[][..], |o| o.conditions.as_slice());
            HttpRouteStatusParents {
                conditions: conditions(&p.conditions, old, now),
                controller_name: p.controller_name.clone(),
                parent_ref,
            }
        })
        .collect();
    if new_ours == old_ours && existing.iter().filter(is_ours).count() == old_ours.len() {
        return None;
    }
    let mut out: Vec<Value> = existing.iter().filter(|v| !is_ours(v)).cloned().collect();
    out.extend(new_ours.iter().filter_map(|p| serde_json::to_value(p).ok()));
    Some(out)
}

/// The Gateway `status` to apply (`conditions` and `listeners`). `None`
/// when the stored status already says the same.
pub(crate) fn gateway_status_patch(
    existing: Option<&Value>,
    status: &GatewayStatus,
    now: &Time,
) -> Option<Value> {
    let old: K8sGatewayStatus = existing
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let old_conditions = old.conditions.unwrap_or_default();
    let old_listeners = old.listeners.unwrap_or_default();
    let new_conditions = conditions(&status.conditions, &old_conditions, now);
    let new_listeners: Vec<GatewayStatusListeners> = status
        .listeners
        .iter()
        .map(|l| {
            let old = old_listeners
                .iter()
                .find(|o| o.name == l.name)
                .map_or(&[][..], |o| o.conditions.as_slice());
            GatewayStatusListeners {
                attached_routes: l.attached_routes,
                conditions: conditions(&l.conditions, old, now),
                name: l.name.clone(),
                supported_kinds: Some(
                    l.supported_kinds
                        .iter()
                        .map(|(group, kind)| GatewayStatusListenersSupportedKinds {
                            group: Some(group.clone()),
                            kind: kind.clone(),
                        })
                        .collect(),
                ),
            }
        })
        .collect();
    let old_of_our_types: Vec<&K8sCondition> = new_conditions
        .iter()
        .filter_map(|n| old_conditions.iter().find(|o| o.type_ == n.type_))
        .collect();
    let unchanged = old_of_our_types.len() == new_conditions.len()
        && old_of_our_types
            .iter()
            .zip(&new_conditions)
            .all(|(o, n)| *o == n)
        && old_listeners == new_listeners;
    if unchanged {
        return None;
    }
    serde_json::to_value(K8sGatewayStatus {
        conditions: Some(new_conditions),
        listeners: Some(new_listeners),
        ..K8sGatewayStatus::default()
    })
    .ok()
}

/// Our conditions as Kubernetes conditions, each keeping its old
/// `lastTransitionTime` when its status did not change.
fn conditions(new: &[Condition], old: &[K8sCondition], now: &Time) -> Vec<K8sCondition> {
    new.iter()
        .map(|c| {
            let status = c.status.as_str();
            let since = old
                .iter()
                .find(|o| o.type_ == c.type_ && o.status == status)
                .map_or_else(|| now.clone(), |o| o.last_transition_time.clone());
            K8sCondition {
                last_transition_time: since,
                message: c.message.clone(),
                observed_generation: c.observed_generation,
                reason: c.reason.clone(),
                status: status.to_string(),
                type_: c.type_.clone(),
            }
        })
        .collect()
}

fn parent_ref(p: &RouteParentStatus) -> HttpRouteStatusParentsParentRef {
    let r = &p.parent_ref;
    HttpRouteStatusParentsParentRef {
        group: Some(r.group.clone()),
        kind: Some(r.kind.clone()),
        name: r.name.clone(),
        namespace: r.namespace.clone(),
        port: r.port.map(i32::from),
        section_name: r.section_name.clone(),
    }
}

#[cfg(test)]
mod tests;
