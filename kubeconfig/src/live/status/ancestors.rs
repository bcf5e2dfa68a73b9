//! The pure half of the BackendTLSPolicy status writer: from the stored
//! `status.ancestors` and our entries, the list to apply — the rules of
//! `patch` (term fence, no going back a generation, kept
//! `lastTransitionTime`) applied to an atomic list shared with other
//! controllers, as `route_parents_patch` does for a route's `parents`.
//!
//! It deliberately does no IO and reads no clock (`now` comes in).

use super::patch::conditions;
use crate::live::fence::{Fenced, check, highest, stored_term, term_condition};
use crate::live::kinds::GATEWAY_GROUP;
use crate::live::policy_status::PolicyAncestorStatus;
use gateway_api::apis::standard::backendtlspolicies::{
    BackendTlsPolicyStatusAncestors, BackendTlsPolicyStatusAncestorsAncestorRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

/// The `status.ancestors` to apply: other controllers' entries untouched,
/// in their order, then ours (each with our term). `Ok(None)` when our
/// entries would not change; `Err` when a newer leader wrote them.
pub(crate) fn policy_ancestors_patch(
    existing: Option<&Value>,
    ours: &[PolicyAncestorStatus],
    controller_name: &str,
    term: u64,
    now: &Time,
) -> Result<Option<Vec<Value>>, Fenced> {
    let existing: &[Value] = existing
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let is_ours =
        |v: &&Value| v.get("controllerName").and_then(Value::as_str) == Some(controller_name);
    let old_ours: Vec<BackendTlsPolicyStatusAncestors> = existing
        .iter()
        .filter(is_ours)
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    check(
        highest(old_ours.iter().map(|o| stored_term(&o.conditions))),
        term,
        now,
    )?;
    let new_ours: Vec<BackendTlsPolicyStatusAncestors> = ours
        .iter()
        .map(|a| {
            let ancestor_ref = ancestor_ref(a);
            let old = old_ours
                .iter()
                .find(|o| o.ancestor_ref == ancestor_ref)
                .map_or(&[][..], |o| o.conditions.as_slice());
            let generation = a
                .conditions
                .iter()
                .filter_map(|c| c.observed_generation)
                .max();
            let mut wanted = a.conditions.clone();
            wanted.push(term_condition(term, generation));
            BackendTlsPolicyStatusAncestors {
                ancestor_ref,
                conditions: conditions(&wanted, old, now),
                controller_name: a.controller_name.clone(),
            }
        })
        .collect();
    if new_ours == old_ours && existing.iter().filter(is_ours).count() == old_ours.len() {
        return Ok(None);
    }
    let mut out: Vec<Value> = existing.iter().filter(|v| !is_ours(v)).cloned().collect();
    out.extend(new_ours.iter().filter_map(|a| serde_json::to_value(a).ok()));
    Ok(Some(out))
}

/// A Gateway as an `ancestorRef`, every defaultable field spelled out (the
/// API server stores what it is given; comparing with what we wrote must
/// not depend on its defaults).
fn ancestor_ref(a: &PolicyAncestorStatus) -> BackendTlsPolicyStatusAncestorsAncestorRef {
    BackendTlsPolicyStatusAncestorsAncestorRef {
        group: Some(GATEWAY_GROUP.to_string()),
        kind: Some("Gateway".to_string()),
        name: a.gateway.name.clone(),
        namespace: Some(a.gateway.namespace.clone()),
        port: None,
        section_name: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::conditions::{Condition, ConditionStatus};
    use serde_json::json;
    use switchyard_proto::model::ObjectName;

    fn at(second: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap())
    }

    fn ours(accepted: ConditionStatus) -> PolicyAncestorStatus {
        PolicyAncestorStatus {
            gateway: ObjectName::new("shop", "gw"),
            controller_name: "us".into(),
            conditions: vec![Condition {
                type_: "Accepted".into(),
                status: accepted,
                reason: "Accepted".into(),
                message: String::new(),
                observed_generation: Some(1),
            }],
        }
    }

    fn theirs() -> Value {
        json!({"controllerName": "them",
               "ancestorRef": {"name": "other"},
               "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                               "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"}]})
    }

    #[test]
    fn other_controllers_entries_stay_and_an_unchanged_status_is_not_written() {
        let existing = json!([theirs()]);
        let first = policy_ancestors_patch(
            Some(&existing),
            &[ours(ConditionStatus::True)],
            "us",
            1,
            &at(100),
        )
        .unwrap()
        .expect("a write");
        assert_eq!(first.len(), 2);
        assert_eq!(first[0], theirs());
        assert_eq!(first[1]["ancestorRef"]["kind"], "Gateway");
        let stored = Value::Array(first);
        // Later, the same: nothing to write, the transition time kept.
        let again = policy_ancestors_patch(
            Some(&stored),
            &[ours(ConditionStatus::True)],
            "us",
            1,
            &at(200),
        );
        assert_eq!(again, Ok(None));
        let changed = policy_ancestors_patch(
            Some(&stored),
            &[ours(ConditionStatus::False)],
            "us",
            1,
            &at(300),
        )
        .unwrap()
        .expect("a write");
        assert_eq!(
            changed[1]["conditions"][0]["lastTransitionTime"],
            json!(at(300))
        );
        // No entries of ours: only theirs is left.
        let cleared = policy_ancestors_patch(Some(&stored), &[], "us", 1, &at(400))
            .unwrap()
            .expect("a write");
        assert_eq!(cleared, [theirs()]);
    }

    #[test]
    fn a_newer_leaders_entries_fence_the_write() {
        let stored = Value::Array(
            policy_ancestors_patch(None, &[ours(ConditionStatus::True)], "us", 5, &at(100))
                .unwrap()
                .expect("a write"),
        );
        let refused = policy_ancestors_patch(
            Some(&stored),
            &[ours(ConditionStatus::False)],
            "us",
            4,
            &at(110),
        );
        assert!(refused.is_err(), "{refused:?}");
    }
}
