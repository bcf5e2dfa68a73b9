use super::*;
use crate::live::conditions::{Condition, ConditionStatus};
use crate::live::fence::{Fenced, LEADER_TERM_CONDITION};
use crate::live::gateway_conditions::ListenerStatus;
use gateway_api::apis::standard::gateways::GatewayStatus as K8sGatewayStatus;
use gateway_api::apis::standard::httproutes::HttpRouteStatusParents;
use switchyard_proto::model::ParentRef;

const OURS: &str = "switchyard.io/gateway-controller";
const TERM: u64 = 4;

/// The patch of a writer of [`TERM`], never fenced here.
fn route_patch(
    existing: Option<&Value>,
    ours: &[RouteParentStatus],
    now: &Time,
) -> Option<Vec<Value>> {
    route_parents_patch(existing, ours, OURS, TERM, now).unwrap()
}

fn gateway_patch(existing: Option<&Value>, status: &GatewayStatus, now: &Time) -> Option<Value> {
    gateway_status_patch(existing, status, TERM, now).unwrap()
}

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
    let out = route_patch(Some(&existing), &[ours(ConditionStatus::True)], &now).unwrap();
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
    let written = route_patch(None, &[ours(ConditionStatus::True)], &first).unwrap();
    let stored = Value::Array(written);
    let later = time("2025-06-06T06:06:06Z");
    assert_eq!(
        route_patch(Some(&stored), &[ours(ConditionStatus::True)], &later),
        None
    );
    let changed = route_patch(Some(&stored), &[ours(ConditionStatus::False)], &later).unwrap();
    assert_eq!(
        changed[0]["conditions"][0]["lastTransitionTime"],
        "2025-06-06T06:06:06Z"
    );
    // A message change alone keeps the transition time.
    let mut reworded = ours(ConditionStatus::True);
    reworded.conditions[0].message = "attached to listener(s) http".into();
    let out = route_patch(Some(&stored), &[reworded], &later).unwrap();
    assert_eq!(
        out[0]["conditions"][0]["lastTransitionTime"],
        "2025-05-05T05:05:05Z"
    );
}

#[test]
fn our_entry_for_a_parent_no_longer_ours_is_removed() {
    let stored = Value::Array(
        route_patch(
            Some(&json!([other_controllers_entry()])),
            &[ours(ConditionStatus::True)],
            &time("2025-05-05T05:05:05Z"),
        )
        .unwrap(),
    );
    let out = route_patch(Some(&stored), &[], &time("2025-06-06T06:06:06Z")).unwrap();
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
        addresses: Vec::new(),
    }
}

#[test]
fn gateway_status_is_written_once_and_other_condition_types_are_left_alone() {
    let now = time("2025-05-05T05:05:05Z");
    let first = gateway_patch(None, &gateway(ConditionStatus::True), &now).unwrap();
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
        gateway_patch(Some(&stored), &gateway(ConditionStatus::True), &later),
        None
    );
    let changed = gateway_patch(Some(&stored), &gateway(ConditionStatus::False), &later).unwrap();
    let types: Vec<&str> = changed["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Accepted", "Programmed", LEADER_TERM_CONDITION]);
    assert_eq!(
        changed["conditions"][0]["lastTransitionTime"],
        "2025-05-05T05:05:05Z"
    );
    assert_eq!(
        changed["conditions"][1]["lastTransitionTime"],
        "2025-06-06T06:06:06Z"
    );
}

#[test]
fn every_write_carries_the_term_and_a_new_term_rewrites_once() {
    let first = time("2025-05-05T05:05:05Z");
    let written = route_patch(None, &[ours(ConditionStatus::True)], &first).unwrap();
    let term = &written[0]["conditions"][1];
    assert_eq!(term["type"], LEADER_TERM_CONDITION);
    assert!(term["message"].as_str().unwrap().ends_with(" 4"), "{term}");
    let stored = Value::Array(written);
    // The next leader (term 5) rewrites the same conditions with its term,
    // and its term condition gets a new transition time.
    let later = time("2025-05-05T05:06:00Z");
    let next = route_parents_patch(
        Some(&stored),
        &[ours(ConditionStatus::True)],
        OURS,
        5,
        &later,
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        next[0]["conditions"][0]["lastTransitionTime"],
        "2025-05-05T05:05:05Z"
    );
    assert_eq!(
        next[0]["conditions"][1]["lastTransitionTime"],
        "2025-05-05T05:06:00Z"
    );
}

#[test]
fn a_deposed_leaders_patch_over_a_newer_term_is_refused() {
    let at = time("2025-05-05T05:05:05Z");
    let newer = Value::Array(
        route_parents_patch(None, &[ours(ConditionStatus::True)], OURS, 9, &at)
            .unwrap()
            .unwrap(),
    );
    let soon = time("2025-05-05T05:05:30Z");
    assert_eq!(
        route_parents_patch(
            Some(&newer),
            &[ours(ConditionStatus::False)],
            OURS,
            8,
            &soon
        ),
        Err(Fenced { stored: 9, ours: 8 })
    );
    // Withdrawing is a write too.
    assert!(route_parents_patch(Some(&newer), &[], OURS, 8, &soon).is_err());
    let gateway_newer = gateway_status_patch(None, &gateway(ConditionStatus::True), 9, &at)
        .unwrap()
        .unwrap();
    assert_eq!(
        gateway_status_patch(
            Some(&gateway_newer),
            &gateway(ConditionStatus::False),
            8,
            &soon
        ),
        Err(Fenced { stored: 9, ours: 8 })
    );
}

#[test]
fn route_status_never_overwrites_a_condition_of_a_newer_generation() {
    // Gateway API: observedGeneration must not go back; a lagging view
    // (generation 2 here) keeps what was written for generation 3.
    let at = time("2025-05-05T05:05:05Z");
    let mut newer = ours(ConditionStatus::False);
    newer.conditions[0].observed_generation = Some(3);
    let stored = Value::Array(route_patch(None, &[newer], &at).unwrap());
    let later = time("2025-05-05T05:06:00Z");
    let out = route_patch(Some(&stored), &[ours(ConditionStatus::True)], &later);
    let kept = out.map_or_else(
        || stored[0]["conditions"][0].clone(),
        |o| o[0]["conditions"][0].clone(),
    );
    assert_eq!(kept["observedGeneration"], 3);
    assert_eq!(kept["status"], "False");
}
