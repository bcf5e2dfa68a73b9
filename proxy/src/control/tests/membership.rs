//! Registration, heartbeats, readiness reports and deregistration against
//! fake coordinators.

use super::fake::{Fake, Watch};
use super::{Logs, Proxy, served, waiting, within};
use std::time::Duration;

#[tokio::test]
async fn a_followers_refusal_naming_the_leader_is_followed_to_the_leader() {
    let logs = Logs::capture();
    let mut follower = Fake::start().await;
    let mut next_in_line = Fake::start().await;
    let mut leader = Fake::start().await;
    follower.refuse_registrations_naming(&leader);
    // The follower first: the proxy asks it, and is sent past the next
    // coordinator in its list straight to the leader.
    let proxy = Proxy::start(&[&follower.address, &next_in_line.address, &leader.address]);

    follower.next_register().await;
    leader.next_register().await;
    let beat = leader.next_heartbeat().await;
    let report = leader.next_report().await;

    assert_eq!((beat.registration, report.registration), (1, 1));
    assert!(
        !follower.registered(),
        "the proxy went back to the follower"
    );
    assert!(!next_in_line.registered(), "the proxy ignored the hint");
    // Being sent to the leader is what a healthy cluster does.
    let redirected = logs.at("INFO", "registration not possible yet");
    assert_eq!(redirected.len(), 1, "{:#?}", logs.lines());
    assert!(
        redirected[0].contains(&format!(
            "coordinator {} refused Register: not the leader ({} leads)",
            follower.address, leader.address
        )),
        "{}",
        redirected[0]
    );
    proxy.stop().await;
    assert_eq!(leader.next_deregister().await.registration, 1);
    assert_eq!(logs.warnings(), Vec::<String>::new(), "a redirect warned");
}

#[tokio::test]
async fn a_heartbeat_the_leader_does_not_know_registers_again_and_the_new_registration_is_used() {
    let logs = Logs::capture();
    let mut coordinator = Fake::start().await;
    coordinator.answer_next_register(7);
    coordinator.answer_next_register(8);
    // The leader lost this proxy's lease (or a new one never had it).
    coordinator.forget_next_heartbeat();
    let proxy = Proxy::against(&coordinator);

    coordinator.next_register().await;
    assert_eq!(coordinator.next_report().await.registration, 7);
    assert_eq!(coordinator.next_heartbeat().await.registration, 7);
    coordinator.next_register().await;
    assert_eq!(coordinator.next_report().await.registration, 8);
    assert_eq!(coordinator.next_heartbeat().await.registration, 8);
    assert_eq!(coordinator.next_heartbeat().await.registration, 8);

    let again = logs.at("WARN", "registering again");
    assert_eq!(again.len(), 1, "{:#?}", logs.lines());
    assert!(
        again[0].contains(&format!(
            "coordinator {} refused Heartbeat: registration 7 is unknown to the leader",
            coordinator.address
        )),
        "{}",
        again[0]
    );
    // An unknown registration is an answer, not a failed call.
    assert_eq!(proxy.coordinator_errors(), 0.0);
    proxy.stop().await;
    assert_eq!(coordinator.next_deregister().await.registration, 8);
}

#[tokio::test]
async fn applied_generations_go_by_version_once_served_and_whole_again_to_a_leader_holding_none() {
    let logs = Logs::capture();
    let mut leader = Fake::start().await;
    leader.take_changes();
    let proxy = Proxy::against(&leader);
    let stream = leader.next_watch().await;
    // Before any configuration: the (empty) set, whole and numbered, and
    // no version: nothing is served.
    let first = leader.next_heartbeat().await;
    assert!(!first.applied_delta && first.applied_seq > 0, "{first:?}");
    assert_eq!(first.applied_through, 0);
    stream
        .send_snapshot(5, &served(5, &["a", "b", "c"], 5))
        .await;

    // The three routes now served: the version says it, nothing listed.
    let served_at_5 = leader
        .heartbeat_where(|b| b.applied_delta && b.applied_through == 5)
        .await;
    assert_eq!(served_at_5.applied_base, first.applied_seq);
    assert!(served_at_5.applied.is_empty() && served_at_5.applied_removed.is_empty());
    // Nothing changes: renewals name the same set and version.
    let renewal = leader
        .heartbeat_where(|b| b.applied_delta && b.applied_base == served_at_5.applied_seq)
        .await;
    assert_eq!(renewal.applied_through, 5);
    assert!(renewal.applied.is_empty() && renewal.applied_removed.is_empty());

    // One route moves on, one goes: the version moves, nothing listed.
    let mut next = served(6, &["a", "b"], 5);
    next.routes[0].active.as_mut().unwrap().generation = 6;
    stream.send_snapshot(6, &next).await;
    let moved = leader.heartbeat_where(|b| b.applied_through == 6).await;
    assert!(moved.applied.is_empty(), "{moved:?}");

    // A new leader holds nothing: the next changes are refused, and the
    // whole (empty) set follows at once with the version, not a
    // heartbeat interval later.
    leader.forget_sets();
    let again = leader.heartbeat_where(|b| !b.applied_delta).await;
    assert_eq!(again.applied_through, 6);
    assert!(again.applied.is_empty());
    let (held, refused) = leader.applied_held();
    assert_eq!(refused, 1, "one change refused, then the whole set");
    assert!(held.map().is_empty());
    proxy.stop().await;
    assert_eq!(logs.warnings(), Vec::<String>::new());
}

#[tokio::test]
async fn a_configuration_that_moves_only_served_generations_costs_one_heartbeat_and_no_report() {
    let logs = Logs::capture();
    let mut leader = Fake::start().await;
    leader.take_changes();
    // An interval far longer than the test: no renewal falls due in it,
    // so every call after the first round is a change's.
    leader.heartbeat_interval(600_000);
    let proxy = Proxy::against(&leader);
    let stream = leader.next_watch().await;
    leader.next_register().await;
    // The first round sends both sets, whole (both empty).
    assert!(!leader.next_report().await.delta);
    assert!(!leader.next_heartbeat().await.applied_delta);

    // Routes without backends: the served generations move, the evidence
    // does not. A heartbeat with the change, and no report before it (a
    // round reports first, so one would have arrived already).
    // Both served at version 5: said by the version, nothing listed.
    stream.send_snapshot(5, &served(5, &["a", "b"], 5)).await;
    let beat = leader.next_heartbeat().await;
    assert!(beat.applied_delta && beat.applied.is_empty(), "{beat:?}");
    assert_eq!(beat.applied_through, 5);
    assert!(!leader.reported_again(), "an unchanged report was sent");

    // Nothing served moves: no call at all (the version said stays 5).
    // The next change's heartbeat is the next heartbeat.
    stream.send_version_only(6).await;
    let mut next = served(7, &["a", "b"], 5);
    next.routes[1].active.as_mut().unwrap().generation = 7;
    stream.send_snapshot(7, &next).await;
    let beat = leader.next_heartbeat().await;
    assert_eq!(beat.applied_through, 7, "{beat:?}");
    assert!(beat.applied.is_empty(), "{beat:?}");
    assert!(!leader.reported_again(), "an unchanged report was sent");

    proxy.stop().await;
    leader.next_deregister().await;
    assert_eq!(logs.warnings(), Vec::<String>::new());
}

#[tokio::test]
async fn a_report_that_failed_before_a_heartbeat_reached_the_leader_goes_again_at_once() {
    let logs = Logs::capture();
    let mut leader = Fake::start().await;
    // Neither a renewal nor a back-off pause falls due within the test
    // (a pause is drawn below 600 s: one under the few seconds waited
    // comes by chance once in a hundred runs or so).
    leader.heartbeat_interval(600_000);
    // The report of the first round fails as one to a leader that just
    // stepped down would; the heartbeat after it goes through.
    leader.fail_next_report();
    let proxy = Proxy::start_with_backoff(&[&leader.address], Duration::from_secs(600));
    leader.next_register().await;
    let failed = leader.next_report().await;
    leader.next_heartbeat().await;
    // The evidence follows the heartbeat at once, not a back-off later:
    // a new leader judges readiness by it.
    let again = leader.next_report().await;
    assert_eq!(again.registration, failed.registration);

    proxy.stop().await;
    leader.next_deregister().await;
    assert_eq!(logs.warnings(), Vec::<String>::new());
}

#[tokio::test]
async fn a_new_leader_named_on_the_watch_stream_gets_both_sets_at_once() {
    let logs = Logs::capture();
    let mut old = Fake::start().await;
    let mut new = Fake::start().await;
    // Neither a renewal nor a back-off pause falls due within the test.
    old.heartbeat_interval(600_000);
    let proxy = Proxy::start_with_backoff(&[&old.address, &new.address], Duration::from_secs(600));
    let stream = old.next_watch().await;
    old.next_register().await;
    old.next_report().await;
    old.next_heartbeat().await;

    // The stream names the leader the proxy already calls: nothing to do.
    let notice = |leader: &str| switchyard_proto::pb::ConfigUpdate {
        leader: leader.to_string(),
        coordinator_id: 1,
        ..Default::default()
    };
    stream.send_update(notice(&old.address)).await;
    // Then another one: a failover. Both sets go to it, unasked.
    stream.send_update(notice(&new.address)).await;
    let report = new.next_report().await;
    let beat = new.next_heartbeat().await;
    assert_eq!((report.registration, beat.registration), (1, 1));
    assert!(!old.reported_again(), "the old leader was reported to");
    assert_eq!(
        logs.at("INFO", "a coordinator named a new leader").len(),
        1,
        "{:#?}",
        logs.lines()
    );

    proxy.stop().await;
    new.next_deregister().await;
    assert_eq!(logs.warnings(), Vec::<String>::new());
}

/// Waits until the proxy's `/ready` answer is `ready`.
async fn ready_is(proxy: &Proxy, ready: bool) {
    within(&format!("/ready to be {ready}"), async {
        while proxy.dataplane.is_ready() != ready {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// Once a heartbeat under registration `at.0` says version `at.1` (the
/// apply loop has run on that version by then) and several apply rounds
/// after it (one per 100 ms at least), the proxy is still not ready.
async fn still_out_at(coordinator: &mut Fake, proxy: &Proxy, at: (u64, u64), why: &str) {
    let (registration, version) = at;
    coordinator
        .heartbeat_where(|b| b.registration == registration && b.config_version == version)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!proxy.dataplane.is_ready(), "{why}");
}

/// A proxy registered with a fake leader, serving route r1 (version 1),
/// ready.
async fn ready_with_route_r1() -> (Fake, Proxy, Watch) {
    let mut coordinator = Fake::start().await;
    let proxy = Proxy::against(&coordinator);
    coordinator.next_register().await;
    let watch = coordinator.next_watch().await;
    watch.send_snapshot(1, &served(1, &["r1"], 1)).await;
    ready_is(&proxy, true).await;
    (coordinator, proxy, watch)
}

#[tokio::test]
async fn a_proxy_the_leader_dropped_is_not_ready_until_registered_again_and_caught_up() {
    let logs = Logs::capture();
    let (mut coordinator, proxy, watch) = ready_with_route_r1().await;

    // The leader lost this proxy's lease; registering again fails for now
    // (an election, say): cutovers may be committed without this proxy.
    coordinator.refuse_registrations();
    coordinator.forget_next_heartbeat();
    ready_is(&proxy, false).await;
    // Committed meanwhile: generation 2, to a backend not warm here.
    watch.send_snapshot(2, &waiting(2, "r1", 2)).await;
    coordinator.accept_registrations();
    let again = coordinator.heartbeat_where(|b| b.registration > 1).await;
    // Registered again, and a heartbeat (after it the apply loop has
    // ticked) says route r1 is served below its committed generation:
    // still behind, so still out.
    still_out_at(
        &mut coordinator,
        &proxy,
        (again.registration, 2),
        "ready while serving r1 below its committed generation",
    )
    .await;

    // Generation 3 needs nothing warm: every route is served at its
    // committed generation, the proxy is counted and caught up.
    watch.send_snapshot(3, &served(3, &["r1"], 3)).await;
    ready_is(&proxy, true).await;
    assert_eq!(
        logs.at(
            "WARN",
            "/ready answers 503 until it serves every committed generation"
        )
        .len(),
        1,
        "{:#?}",
        logs.lines()
    );
    proxy.stop().await;
}

#[tokio::test]
async fn a_proxy_registered_again_is_counted_only_through_a_configuration_as_new_as_its_registration()
 {
    let logs = Logs::capture();
    let (mut coordinator, proxy, watch) = ready_with_route_r1().await;
    coordinator.refuse_registrations();
    coordinator.forget_next_heartbeat();
    ready_is(&proxy, false).await;
    // Registered again by the log entry at 10: whatever was committed
    // before it — while this proxy was not counted — is in configurations
    // up to version 10, and this proxy holds version 1.
    coordinator.answer_next_register(10);
    coordinator.accept_registrations();
    // Each apply round finds every route of version 1 served.
    still_out_at(
        &mut coordinator,
        &proxy,
        (10, 1),
        "ready on a configuration older than its registration",
    )
    .await;
    // Version 9, nothing waiting: still older than the registration.
    watch.send_snapshot(9, &served(9, &["r1"], 1)).await;
    still_out_at(
        &mut coordinator,
        &proxy,
        (10, 9),
        "ready on version 9 after registering at 10",
    )
    .await;
    // A bare version at 10: nothing a proxy sees changed from 9 to 10
    // (the registration itself, say), so version 9's routes are those of
    // 10, all served.
    watch.send_version_only(10).await;
    ready_is(&proxy, true).await;
    let again = logs.at("INFO", "/ready answers 200 again");
    assert_eq!(again.len(), 1, "{:#?}", logs.lines());
    assert!(again[0].contains("version=10"), "{}", again[0]);
    proxy.stop().await;
}

#[tokio::test]
async fn a_starting_proxy_says_ready_only_on_a_configuration_as_new_as_its_registration() {
    let mut coordinator = Fake::start().await;
    // Registered by the log entry at 5: cutovers committed before it went
    // without this proxy, in configurations up to version 5.
    coordinator.answer_next_register(5);
    let proxy = Proxy::against(&coordinator);
    coordinator.heartbeat_where(|b| b.registration == 5).await;
    let watch = coordinator.next_watch().await;
    // Version 1 (a follower lagging behind, say), every route served.
    watch.send_snapshot(1, &served(1, &["r1"], 1)).await;
    still_out_at(
        &mut coordinator,
        &proxy,
        (5, 1),
        "ready on a configuration older than its registration",
    )
    .await;
    // Nothing a proxy sees changed from 1 to 5.
    watch.send_version_only(5).await;
    ready_is(&proxy, true).await;
    proxy.stop().await;
}

#[tokio::test]
async fn a_proxy_that_reaches_no_coordinator_stays_ready() {
    let (coordinator, proxy, watch) = ready_with_route_r1().await;
    // Every coordinator down: no cutover can commit, and what this proxy
    // serves stays right (static stability).
    drop(watch);
    drop(coordinator);
    within("calls to the stopped coordinator to fail", async {
        while proxy.coordinator_errors() < 3.0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        proxy.dataplane.is_ready(),
        "not ready with the coordinators down"
    );
    proxy.stop().await;
}

#[tokio::test]
async fn heartbeats_go_on_while_a_large_configuration_is_installed() {
    // The tests' runtime has one thread: a decode or install on it would
    // stop every heartbeat until it ended (at 10,000 routes, seconds on a
    // busy machine: longer than a lease).
    let mut coordinator = Fake::start().await;
    let proxy = Proxy::against(&coordinator);
    coordinator.next_register().await;
    let watch = coordinator.next_watch().await;
    let names: Vec<String> = (0..10_000).map(|i| format!("r{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let large = served(1, &names, 1);
    while coordinator.next_heartbeat().await.config_version != 0 {}
    watch.send_snapshot(1, &large).await;
    let mut while_installing = 0;
    while !proxy.dataplane.is_ready() {
        coordinator.next_heartbeat().await;
        while_installing += 1;
    }
    // Off the runtime's thread: 13-14 here (heartbeats every 50 ms); on
    // it, 1 (one slips in between the decode and the install).
    assert!(
        while_installing >= 3,
        "{while_installing} heartbeats while 10,000 routes were decoded and installed"
    );
    proxy.stop().await;
}
