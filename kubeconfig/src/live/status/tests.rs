use super::*;
use crate::live::conditions::ConditionStatus;
use crate::live::gateway_conditions::ListenerStatus;
use switchyard_proto::model::ParentRef;

const OURS: &str = "switchyard.io/gateway-controller";

fn time(s: &str) -> Time {
    serde_json::from_value(json!(s)).unwrap()
}

fn accepted(status: ConditionStatus) -> Condition {
    Condition {
        type_: "Accepted".into(),
        status,
        reason: "Accepted".into(),
        message: "attached".into(),
        observed_generation: Some(2),
    }
}

fn ours(status: ConditionStatus) -> RouteParentStatus {
    RouteParentStatus {
        parent_ref: ParentRef {
            group: "gateway.networking.k8s.io".into(),
            kind: "Gateway".into(),
            namespace: None,
            name: "gw".into(),
            section_name: Some("http".into()),
            port: None,
        },
        controller_name: OURS.into(),
        conditions: vec![accepted(status)],
    }
}

fn other_controllers_entry() -> Value {
    json!({
        "controllerName": "example.com/other",
        "parentRef": {"name": "their-gw"},
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                        "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    })
}

#[test]
fn other_controllers_entries_are_kept_and_ours_added() {
    let existing = json!([other_controllers_entry()]);
    let now = time("2025-05-05T05:05:05Z");
    let out =
        route_parents_patch(Some(&existing), &[ours(ConditionStatus::True)], OURS, &now).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0], other_controllers_entry());
    assert_eq!(out[1]["controllerName"], OURS);
    assert_eq!(out[1]["parentRef"]["sectionName"], "http");
    assert_eq!(
        out[1]["conditions"][0]["lastTransitionTime"],
        "2025-05-05T05:05:05Z"
    );
    assert_eq!(out[1]["conditions"][0]["observedGeneration"], 2);
    // It is valid Gateway API status.
    for entry in &out {
        let _: HttpRouteStatusParents = serde_json::from_value(entry.clone()).unwrap();
    }
}

#[test]
fn an_unchanged_status_is_not_written_and_a_transition_gets_a_new_time() {
    let first = time("2025-05-05T05:05:05Z");
    let written = route_parents_patch(None, &[ours(ConditionStatus::True)], OURS, &first).unwrap();
    let stored = Value::Array(written);
    let later = time("2025-06-06T06:06:06Z");
    assert_eq!(
        route_parents_patch(Some(&stored), &[ours(ConditionStatus::True)], OURS, &later),
        None
    );
    let changed =
        route_parents_patch(Some(&stored), &[ours(ConditionStatus::False)], OURS, &later).unwrap();
    assert_eq!(
        changed[0]["conditions"][0]["lastTransitionTime"],
        "2025-06-06T06:06:06Z"
    );
    // A message change alone keeps the transition time.
    let mut reworded = ours(ConditionStatus::True);
    reworded.conditions[0].message = "attached to listener(s) http".into();
    let out = route_parents_patch(Some(&stored), &[reworded], OURS, &later).unwrap();
    assert_eq!(
        out[0]["conditions"][0]["lastTransitionTime"],
        "2025-05-05T05:05:05Z"
    );
}

#[test]
fn our_entry_for_a_parent_no_longer_ours_is_removed() {
    let stored = Value::Array(
        route_parents_patch(
            Some(&json!([other_controllers_entry()])),
            &[ours(ConditionStatus::True)],
            OURS,
            &time("2025-05-05T05:05:05Z"),
        )
        .unwrap(),
    );
    let out = route_parents_patch(Some(&stored), &[], OURS, &time("2025-06-06T06:06:06Z")).unwrap();
    assert_eq!(out, [other_controllers_entry()]);
}

fn gateway(programmed: ConditionStatus) -> GatewayStatus {
    let c = |t: &str, s| Condition {
        type_: t.into(),
        status: s,
        reason: t.into(),
        message: String::new(),
        observed_generation: Some(1),
    };
    GatewayStatus {
        conditions: vec![
            c("Accepted", ConditionStatus::True),
            c("Programmed", programmed),
        ],
        listeners: vec![ListenerStatus {
            name: "http".into(),
            attached_routes: 2,
            supported_kinds: vec![("gateway.networking.k8s.io".into(), "HTTPRoute".into())],
            conditions: vec![c("Accepted", ConditionStatus::True)],
        }],
    }
}

#[test]
fn gateway_status_is_written_once_and_other_condition_types_are_left_alone() {
    let now = time("2025-05-05T05:05:05Z");
    let first = gateway_status_patch(None, &gateway(ConditionStatus::True), &now).unwrap();
    let _: K8sGatewayStatus = serde_json::from_value(first.clone()).unwrap();
    assert_eq!(first["listeners"][0]["attachedRoutes"], 2);
    // The stored status also has a condition another manager owns.
    let mut stored = first.clone();
    stored["conditions"].as_array_mut().unwrap().push(json!({
        "type": "example.com/Audited", "status": "True", "reason": "Audited",
        "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"
    }));
    let later = time("2025-06-06T06:06:06Z");
    assert_eq!(
        gateway_status_patch(Some(&stored), &gateway(ConditionStatus::True), &later),
        None
    );
    let changed =
        gateway_status_patch(Some(&stored), &gateway(ConditionStatus::False), &later).unwrap();
    let types: Vec<&str> = changed["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Accepted", "Programmed"]);
    assert_eq!(
        changed["conditions"][0]["lastTransitionTime"],
        "2025-05-05T05:05:05Z"
    );
    assert_eq!(
        changed["conditions"][1]["lastTransitionTime"],
        "2025-06-06T06:06:06Z"
    );
}
