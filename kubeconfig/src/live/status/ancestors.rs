//! The pure half of the BackendTLSPolicy status writer: from the stored
//! `status.ancestors` and our entries, the list to apply — the rules of
//! `patch` (term fence, no going back a generation, kept
//! `lastTransitionTime`) applied to an atomic list shared with other
//! controllers, as `route_parents_patch` does for a route's `parents`.
//!
//! It deliberately does no IO and reads no clock (`now` comes in).

use super::patch::{SharedEntry, WantedEntry, shared_list_patch};
use crate::live::fence::Fenced;
use crate::live::kinds::GATEWAY_GROUP;
use crate::live::policy_status::PolicyAncestorStatus;
use gateway_api::apis::standard::backendtlspolicies::{
    BackendTlsPolicyStatusAncestors, BackendTlsPolicyStatusAncestorsAncestorRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as K8sCondition, Time};
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
    let wanted = ours
        .iter()
        .map(|a| WantedEntry {
            reference: ancestor_ref(a),
            conditions: &a.conditions,
            controller_name: &a.controller_name,
        })
        .collect();
    shared_list_patch::<BackendTlsPolicyStatusAncestors>(
        existing,
        wanted,
        controller_name,
        term,
        now,
    )
}

impl SharedEntry for BackendTlsPolicyStatusAncestors {
    type Ref = BackendTlsPolicyStatusAncestorsAncestorRef;

    fn reference(&self) -> &Self::Ref {
        &self.ancestor_ref
    }

    fn conditions(&self) -> &[K8sCondition] {
        &self.conditions
    }

    fn ours(reference: Self::Ref, conditions: Vec<K8sCondition>, controller_name: String) -> Self {
        BackendTlsPolicyStatusAncestors {
            ancestor_ref: reference,
            conditions,
            controller_name,
        }
    }
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
