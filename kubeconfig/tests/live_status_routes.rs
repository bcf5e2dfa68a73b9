//! HTTPRoute status for every route, against a fake API server that
//! applies status with server-side apply semantics (atomic `parents`,
//! conditions by type): a route whose first version fails translation,
//! the fall-back to the last good version (`PartiallyInvalid`), repair of
//! an entry another writer clobbered, and the sweep that removes our
//! entries from routes we no longer serve.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

mod live_support;

use live_support::{Clients, WAIT, desired_once, fleet, publish_clean, watching};
use serde_json::{Value, json};
use std::time::Duration;
use switchyard_kubeconfig::live::{
    LEADER_TERM_CONDITION, PARTIALLY_INVALID_CONDITION, StatusPublisher,
};
use switchyard_proto::model::CONTROLLER_NAME;
use switchyard_test_support::eventually;
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::{GW, OTHER_CONTROLLER, shop, with_generation};

const LEADING: fn() -> Option<u64> = || Some(1);

/// shop's route `app` with an invalid regular expression: it fails
/// translation.
fn bad_route(generation: i64) -> Value {
    let mut route = shop::route("blue", generation);
    route["spec"]["rules"][0]["matches"] =
        json!([{"path": {"type": "RegularExpression", "value": "(["}}]);
    route
}

fn cluster_with_route(route: Value) -> Vec<Value> {
    let mut objects = shop::cluster();
    objects.retain(|o| o["kind"] != "HTTPRoute");
    objects.push(route);
    objects
}

fn our_entry(route: &Value) -> Option<&Value> {
    route["status"]["parents"]
        .as_array()?
        .iter()
        .find(|p| p["controllerName"] == CONTROLLER_NAME)
}

fn condition<'a>(entry: &'a Value, type_: &str) -> &'a Value {
    entry["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} in {entry}"))
}

fn theirs() -> Value {
    json!({"controllerName": OTHER_CONTROLLER, "parentRef": {"name": "other"},
           "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                           "message": "theirs", "lastTransitionTime": "2020-01-01T00:00:00Z"}]})
}

#[tokio::test]
async fn route_whose_first_version_fails_translation_is_not_accepted_with_why() {
    let server = FakeApiServer::start(cluster_with_route(bad_route(3))).await;
    let state = desired_once(&server).await;
    assert!(!state.rejected.is_empty(), "the route is rejected");
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    let route = server.get(GW, "HTTPRoute", "shop", "app").unwrap();
    let entries = route["status"]["parents"].as_array().unwrap();
    assert_eq!(
        entries.len(),
        1,
        "only our Gateway's parentRef: {entries:?}"
    );
    let ours = our_entry(&route).unwrap();
    assert_eq!(ours["parentRef"]["name"], "gw");
    let accepted = condition(ours, "Accepted");
    assert_eq!(accepted["status"], "False");
    assert_eq!(accepted["reason"], "UnsupportedValue");
    assert_eq!(accepted["observedGeneration"], 3);
    assert!(
        accepted["message"]
            .as_str()
            .unwrap()
            .contains("spec.rules[0]"),
        "names the field: {accepted}"
    );
    condition(ours, LEADER_TERM_CONDITION);
}

#[tokio::test]
async fn route_fall_back_is_accepted_at_the_good_generation_plus_partially_invalid() {
    // Gateway API RouteConditionPartiallyInvalid, "Fall Back".
    let server = FakeApiServer::start(cluster_with_route(shop::route("blue", 1))).await;
    let (rx, task) = watching(&server);
    eventually("the good version", WAIT, async || rx.borrow().clone())
        .await
        .unwrap();
    server.apply(bad_route(2));
    let state = eventually("the bad version rejected", WAIT, async || {
        rx.borrow().clone().filter(|s| !s.rejected.is_empty())
    })
    .await
    .unwrap();
    task.abort();
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    let route = server.get(GW, "HTTPRoute", "shop", "app").unwrap();
    let ours = our_entry(&route).unwrap();
    let accepted = condition(ours, "Accepted");
    assert_eq!(
        (&accepted["status"], &accepted["observedGeneration"]),
        (&json!("True"), &json!(1))
    );
    let partial = condition(ours, PARTIALLY_INVALID_CONDITION);
    assert_eq!(partial["status"], "True");
    assert_eq!(partial["observedGeneration"], 2);
    assert!(
        partial["message"]
            .as_str()
            .unwrap()
            .starts_with("Fall Back")
    );
}

#[tokio::test]
async fn route_status_entry_clobbered_by_another_writer_is_repaired() {
    let server = FakeApiServer::start(cluster_with_route(shop::route("blue", 1))).await;
    let state = desired_once(&server).await;
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME)
        .verify_every(Duration::ZERO);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    // Another controller applies the atomic list with its entry only.
    let mut clobbered = server.get(GW, "HTTPRoute", "shop", "app").unwrap();
    clobbered["status"] = json!({"parents": [theirs()]});
    server.apply(clobbered);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    let route = server.get(GW, "HTTPRoute", "shop", "app").unwrap();
    let parents = route["status"]["parents"].as_array().unwrap();
    assert_eq!(parents.len(), 2, "{parents:?}");
    assert_eq!(parents[0], theirs());
    assert_eq!(
        condition(our_entry(&route).unwrap(), "Accepted")["status"],
        "True"
    );
}

#[tokio::test]
async fn route_no_longer_served_loses_an_earlier_leaders_entry_at_the_first_publish() {
    // A route detached from our Gateway while no leader ran: this
    // publisher never wrote it, yet our stale entry goes and theirs stays.
    let mut route = shop::route("blue", 4);
    route["spec"]["parentRefs"] = json!([{"name": "other"}]);
    route["status"] = json!({"parents": [
        theirs(),
        {"controllerName": CONTROLLER_NAME, "parentRef": {"name": "gw"},
         "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                         "message": "old", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}
    ]});
    let server = FakeApiServer::start(cluster_with_route(with_generation(route, 4))).await;
    let state = desired_once(&server).await;
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    let route = server.get(GW, "HTTPRoute", "shop", "app").unwrap();
    assert_eq!(route["status"]["parents"], json!([theirs()]));
    // The next publish (within verify_every) lists nothing again.
    let before = server.requests().len();
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    assert!(
        server.requests()[before..]
            .iter()
            .all(|r| !r.path.ends_with("/httproutes")),
        "no second sweep"
    );
}

#[tokio::test]
async fn route_status_never_overwrites_a_condition_whose_observed_generation_is_newer() {
    // Gateway API: observedGeneration never goes back. A writer that saw a
    // newer generation (6) left our Accepted; this view is of 5.
    let mut route = shop::route("blue", 5);
    route["status"] = json!({"parents": [
        {"controllerName": CONTROLLER_NAME,
         "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"},
         "conditions": [{"type": "Accepted", "status": "False", "reason": "NoMatchingParent",
                         "message": "seen at 6", "observedGeneration": 6,
                         "lastTransitionTime": "2020-01-01T00:00:00Z"}]}
    ]});
    let server = FakeApiServer::start(cluster_with_route(route)).await;
    let state = desired_once(&server).await;
    let mut publisher = StatusPublisher::new(vec![server.source("east")], CONTROLLER_NAME);
    publish_clean(&mut publisher, &state, &[], &fleet(1), &LEADING).await;
    let route = server.get(GW, "HTTPRoute", "shop", "app").unwrap();
    let ours = our_entry(&route).unwrap();
    let accepted = condition(ours, "Accepted");
    assert_eq!(accepted["observedGeneration"], 6);
    assert_eq!(accepted["message"], "seen at 6");
    // The rest of what we computed is written, at our generation.
    assert_eq!(condition(ours, "ResolvedRefs")["observedGeneration"], 5);
}
