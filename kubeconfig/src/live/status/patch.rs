//! The pure half of the status writers: from what is stored and what we
//! want, the `status` to apply — or nothing when it would not change, or
//! [`Fenced`] when a newer leader wrote it.
//!
//! Three rules every builder follows:
//!
//! - **The term fences.** Our part of the stored status carries the
//!   writer's Raft term ([`super::super::fence`]); a higher recent term
//!   refuses the write, and every write stamps our term.
//! - **Never overwrite a newer generation.** A stored condition of ours
//!   whose `observedGeneration` is newer than the one we computed (a
//!   lagging cache, a deposed leader's view) is kept as it is: status
//!   must never go back in time.
//! - **Keep `lastTransitionTime`** when a condition's status did not
//!   change (for the term condition: when the term did not change), so an
//!   unchanged status compares equal and is not written.
//!
//! It deliberately does no IO and reads no clock (`now` comes in).

use crate::live::class_status::ClassStatus;
use crate::live::conditions::{Condition, RouteParentStatus};
use crate::live::fence::{
    Fenced, LEADER_TERM_CONDITION, check, highest, stored_term, term_condition,
};
use crate::live::gateway_conditions::GatewayStatus;
use gateway_api::apis::standard::gatewayclasses::{
    GatewayClassStatus, GatewayClassStatusSupportedFeatures,
};
use gateway_api::apis::standard::gateways::{
    GatewayStatus as K8sGatewayStatus, GatewayStatusAddresses, GatewayStatusListeners,
    GatewayStatusListenersSupportedKinds,
};
use gateway_api::apis::standard::httproutes::{
    HttpRouteStatusParents, HttpRouteStatusParentsParentRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as K8sCondition, Time};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One controller's entry of a status list that controllers share (a
/// route's `status.parents`, a policy's `status.ancestors`): the object it
/// is about, and its conditions.
pub(super) trait SharedEntry: Serialize + DeserializeOwned + PartialEq {
    /// What the entry is about (a parentRef, an ancestorRef).
    type Ref: PartialEq;
    /// The entry's reference.
    fn reference(&self) -> &Self::Ref;
    /// The entry's conditions.
    fn conditions(&self) -> &[K8sCondition];
    /// An entry of ours.
    fn ours(reference: Self::Ref, conditions: Vec<K8sCondition>, controller_name: String) -> Self;
}

/// What we want one entry of ours to say.
pub(super) struct WantedEntry<'a, R> {
    /// What it is about.
    pub reference: R,
    /// Our conditions (without the term condition, added here).
    pub conditions: &'a [Condition],
    /// Our controller name.
    pub controller_name: &'a str,
}

/// A shared status list to apply: other controllers' entries untouched,
/// in their order, then ours (each with our term). `Ok(None)` when our
/// entries would not change; `Err` when a newer leader wrote them. The one
/// rule for every such list ([`route_parents_patch`],
/// `ancestors::policy_ancestors_patch`).
pub(super) fn shared_list_patch<E: SharedEntry>(
    existing: Option<&Value>,
    ours: Vec<WantedEntry<'_, E::Ref>>,
    controller_name: &str,
    term: u64,
    now: &Time,
) -> Result<Option<Vec<Value>>, Fenced> {
    let existing: &[Value] = existing
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let is_ours =
        |v: &&Value| v.get("controllerName").and_then(Value::as_str) == Some(controller_name);
    let old_ours: Vec<E> = existing
        .iter()
        .filter(is_ours)
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    check(
        highest(old_ours.iter().map(|o| stored_term(o.conditions()))),
        term,
        now,
    )?;
    let new_ours: Vec<E> = ours
        .into_iter()
        .map(|w| {
            let old = old_ours
                .iter()
                .find(|o| *o.reference() == w.reference)
                .map_or(&[][..], |o| o.conditions());
            let generation = w
                .conditions
                .iter()
                .filter_map(|c| c.observed_generation)
                .max();
            let mut wanted = w.conditions.to_vec();
            wanted.push(term_condition(term, generation));
            let conditions = conditions(&wanted, old, now);
            E::ours(w.reference, conditions, w.controller_name.to_string())
        })
        .collect();
    if new_ours == old_ours && existing.iter().filter(is_ours).count() == old_ours.len() {
        return Ok(None);
    }
    let mut out: Vec<Value> = existing.iter().filter(|v| !is_ours(v)).cloned().collect();
    out.extend(new_ours.iter().filter_map(|e| serde_json::to_value(e).ok()));
    Ok(Some(out))
}

impl SharedEntry for HttpRouteStatusParents {
    type Ref = HttpRouteStatusParentsParentRef;

    fn reference(&self) -> &Self::Ref {
        &self.parent_ref
    }

    fn conditions(&self) -> &[K8sCondition] {
        &self.conditions
    }

    fn ours(reference: Self::Ref, conditions: Vec<K8sCondition>, controller_name: String) -> Self {
        HttpRouteStatusParents {
            conditions,
            controller_name,
            parent_ref: reference,
        }
    }
}

/// The `status.parents` to apply: other controllers' entries untouched, in
/// their order, then ours (each with our term). `Ok(None)` when our
/// entries would not change; `Err` when a newer leader wrote them.
pub(crate) fn route_parents_patch(
    existing: Option<&Value>,
    ours: &[RouteParentStatus],
    controller_name: &str,
    term: u64,
    now: &Time,
) -> Result<Option<Vec<Value>>, Fenced> {
    let wanted = ours
        .iter()
        .map(|p| WantedEntry {
            reference: parent_ref(p),
            conditions: &p.conditions,
            controller_name: &p.controller_name,
        })
        .collect();
    shared_list_patch::<HttpRouteStatusParents>(existing, wanted, controller_name, term, now)
}

/// The Gateway `status` to apply (`conditions` with our term,
/// `listeners`, `addresses`). `Ok(None)` when the stored status already
/// says the same.
pub(crate) fn gateway_status_patch(
    existing: Option<&Value>,
    status: &GatewayStatus,
    term: u64,
    now: &Time,
) -> Result<Option<Value>, Fenced> {
    let old: K8sGatewayStatus = existing
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let old_conditions = old.conditions.unwrap_or_default();
    check(stored_term(&old_conditions), term, now)?;
    let old_listeners = old.listeners.unwrap_or_default();
    let new_conditions = with_term(&status.conditions, &old_conditions, term, now);
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
    let new_addresses: Vec<GatewayStatusAddresses> = status
        .addresses
        .iter()
        .map(|a| GatewayStatusAddresses {
            r#type: Some(a.type_.clone()),
            value: a.value.clone(),
        })
        .collect();
    let unchanged = same_of_our_types(&old_conditions, &new_conditions)
        && old_listeners == new_listeners
        && old.addresses.unwrap_or_default() == new_addresses;
    if unchanged {
        return Ok(None);
    }
    Ok(serde_json::to_value(K8sGatewayStatus {
        addresses: Some(new_addresses),
        conditions: Some(new_conditions),
        listeners: Some(new_listeners),
        ..K8sGatewayStatus::default()
    })
    .ok())
}

/// The GatewayClass `status` to apply (`conditions` with our term,
/// `supportedFeatures`). `Ok(None)` when the stored status says the same.
pub(crate) fn class_status_patch(
    existing: Option<&Value>,
    status: &ClassStatus,
    term: u64,
    now: &Time,
) -> Result<Option<Value>, Fenced> {
    let old: GatewayClassStatus = existing
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let old_conditions = old.conditions.unwrap_or_default();
    check(stored_term(&old_conditions), term, now)?;
    let new_conditions = with_term(&status.conditions, &old_conditions, term, now);
    let features: Vec<GatewayClassStatusSupportedFeatures> = status
        .supported_features
        .iter()
        .map(|name| GatewayClassStatusSupportedFeatures { name: name.clone() })
        .collect();
    if same_of_our_types(&old_conditions, &new_conditions)
        && old.supported_features.unwrap_or_default() == features
    {
        return Ok(None);
    }
    Ok(serde_json::to_value(GatewayClassStatus {
        conditions: Some(new_conditions),
        supported_features: Some(features),
    })
    .ok())
}

/// A `status` that is only `conditions` (a ServiceExport's): ours with our
/// term, merged with the stored ones. `Ok(None)` when they say the same.
pub(crate) fn conditions_patch(
    existing: Option<&Value>,
    wanted: &[Condition],
    term: u64,
    now: &Time,
) -> Result<Option<Value>, Fenced> {
    let old: Vec<K8sCondition> = existing
        .and_then(|s| s.get("conditions"))
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    check(stored_term(&old), term, now)?;
    let new = with_term(wanted, &old, term, now);
    if same_of_our_types(&old, &new) {
        return Ok(None);
    }
    Ok(Some(serde_json::json!({ "conditions": new })))
}

/// `new` plus our term condition, merged with `old`.
fn with_term(new: &[Condition], old: &[K8sCondition], term: u64, now: &Time) -> Vec<K8sCondition> {
    let generation = new.iter().filter_map(|c| c.observed_generation).max();
    let mut wanted = new.to_vec();
    wanted.push(term_condition(term, generation));
    conditions(&wanted, old, now)
}

/// Whether every condition in `new` is stored exactly so in `old`.
fn same_of_our_types(old: &[K8sCondition], new: &[K8sCondition]) -> bool {
    new.iter()
        .all(|n| old.iter().any(|o| o.type_ == n.type_ && o == n))
}

/// Our conditions as Kubernetes conditions: a stored one of a newer
/// generation is kept as it is; otherwise each keeps its old
/// `lastTransitionTime` when its status (the term's: its message) did not
/// change.
pub(super) fn conditions(new: &[Condition], old: &[K8sCondition], now: &Time) -> Vec<K8sCondition> {
    new.iter()
        .map(|c| {
            let prev = old.iter().find(|o| o.type_ == c.type_);
            if let Some(prev) = prev
                && c.type_ != LEADER_TERM_CONDITION
                && prev.observed_generation > c.observed_generation
            {
                return prev.clone();
            }
            let status = c.status.as_str();
            let since = prev
                .filter(|o| o.status == status)
                .filter(|o| c.type_ != LEADER_TERM_CONDITION || o.message == c.message)
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
