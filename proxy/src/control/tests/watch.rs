//! The configuration stream against fake coordinators, and its pure parts
//! (which coordinator next, what an update means, when a stream lags).

use super::fake::Fake;
use super::{Logs, Proxy, nothing_listening};
use crate::control::assembly::{Assembler, Received, receive};
use crate::control::error::ControlError;
use crate::control::watch::{Ended, Lag, LagDetector, next_target};
use std::time::Duration;
use switchyard_proto::model::ConfigSnapshot;
use switchyard_proto::pb;

#[tokio::test]
async fn a_version_only_update_keeps_the_stream_and_moves_the_version_heartbeats_carry() {
    let logs = Logs::capture();
    let mut coordinator = Fake::start().await;
    let proxy = Proxy::against(&coordinator);

    let stream = coordinator.next_watch().await;
    stream.send_snapshot(1, &ConfigSnapshot::default()).await;
    stream.send_version_only(2).await;
    coordinator.heartbeat_where(|h| h.config_version == 2).await;
    // An update no newer than what is held is dropped unread: were it
    // read, this one would fail to decode and end the stream.
    stream.send_raw(2, b"stale and not JSON".to_vec()).await;
    stream.send_version_only(3).await;
    coordinator.heartbeat_where(|h| h.config_version == 3).await;

    assert!(!stream.is_closed(), "the proxy dropped the stream");
    assert!(!coordinator.watched_again(), "the proxy watched again");
    assert!(proxy.dataplane.has_config());
    assert_eq!(
        proxy.metric("switchyard_proxy_config_version_received"),
        3.0
    );
    assert_eq!(proxy.coordinator_errors(), 0.0);
    proxy.stop().await;
    coordinator.next_deregister().await;
    assert_eq!(logs.warnings(), Vec::<String>::new(), "a clean run warned");
}

#[tokio::test]
async fn a_configuration_that_does_not_decode_is_a_decode_error_and_the_proxy_watches_again() {
    let logs = Logs::capture();
    let mut coordinator = Fake::start().await;
    let proxy = Proxy::against(&coordinator);

    let first = coordinator.next_watch().await;
    first.send_raw(1, b"{not a snapshot".to_vec()).await;
    first.closed().await;
    let second = coordinator.next_watch().await;

    assert_eq!(
        second.request.known_version, 0,
        "the configuration that did not decode was taken"
    );
    assert!(!proxy.dataplane.has_config());
    assert_eq!(proxy.coordinator_errors(), 1.0);
    let failed = logs.at("ERROR", "configuration stream failed");
    assert_eq!(failed.len(), 1, "{:#?}", logs.lines());
    assert!(
        failed[0].contains(&format!(
            "coordinator {}: configuration version 1 does not decode: ",
            coordinator.address
        )),
        "{}",
        failed[0]
    );
    assert!(!failed[0].contains("did not get through"), "{}", failed[0]);

    // The new stream serves as any other.
    second.send_snapshot(1, &ConfigSnapshot::default()).await;
    coordinator.heartbeat_where(|h| h.config_version == 1).await;
    assert!(!second.is_closed());
    proxy.stop().await;
}

#[tokio::test]
async fn an_unreachable_coordinator_is_a_transport_failure_and_the_next_one_serves() {
    let logs = Logs::capture();
    let dead = nothing_listening().await;
    let mut alive = Fake::start().await;
    let proxy = Proxy::start(&[&dead, &alive.address]);

    let stream = alive.next_watch().await;
    alive.next_register().await;
    stream.send_snapshot(1, &ConfigSnapshot::default()).await;
    alive.heartbeat_where(|h| h.config_version == 1).await;

    let watch = logs.at("WARN", "configuration stream failed");
    assert_eq!(watch.len(), 1, "{:#?}", logs.lines());
    assert!(
        watch[0].contains(&format!("coordinator {dead}: Watch did not get through")),
        "{}",
        watch[0]
    );
    // Registering while no coordinator answers is what a start-up looks
    // like: INFO, within the patience for an election.
    let register = logs.at("INFO", "registration not possible yet");
    assert!(
        register
            .iter()
            .any(|l| l.contains(&format!("coordinator {dead}: Register did not get through"))),
        "{:#?}",
        logs.lines()
    );
    assert_eq!(logs.at("ERROR", ""), Vec::<String>::new());
    proxy.stop().await;
}

#[tokio::test]
async fn a_stream_that_stays_behind_the_leader_moves_to_another_coordinator() {
    let logs = Logs::capture();
    // The first choice: watched, and heartbeated as the leader.
    let mut behind = Fake::start().await;
    let mut other = Fake::start().await;
    let proxy = Proxy::start(&[&behind.address, &other.address]);

    let stream = behind.next_watch().await;
    stream.send_snapshot(1, &ConfigSnapshot::default()).await;
    behind.heartbeat_where(|h| h.config_version == 1).await;
    behind.leader_version(9);
    stream.closed().await;
    let moved = other.next_watch().await;

    assert_eq!(moved.request.known_version, 1);
    let lag = logs.at("WARN", "configuration stream is behind the leader");
    assert_eq!(lag.len(), 1, "{:#?}", logs.lines());
    assert!(
        lag[0].contains(&format!(
            "coordinator {}: configuration stream holds version 1, the leader has 9",
            behind.address
        )),
        "{}",
        lag[0]
    );
    // The new stream catches up, and the lag is over.
    moved.send_snapshot(9, &ConfigSnapshot::default()).await;
    behind.heartbeat_where(|h| h.config_version == 9).await;
    assert!(!moved.is_closed());
    proxy.stop().await;
}

#[test]
fn lag_counts_only_three_heartbeats_in_a_row_behind_what_the_leader_had_a_round_before() {
    let mut lag = LagDetector::default();
    // The first round has nothing to compare with.
    assert_eq!(lag.observe(5, 9), None);
    assert_eq!(lag.observe(5, 9), None);
    assert_eq!(lag.observe(5, 9), None);
    // Caught up with what the leader had a round ago: counting starts
    // over.
    assert_eq!(lag.observe(9, 12), None);
    assert_eq!(lag.observe(10, 12), None);
    assert_eq!(lag.observe(11, 12), None);
    assert_eq!(
        lag.observe(11, 12),
        Some(Lag {
            held: 11,
            leader: 12
        })
    );
    // Reported once; three more rounds before the next report.
    assert_eq!(lag.observe(11, 12), None);
}

#[test]
fn rounds_closer_than_a_heartbeat_interval_count_once() {
    let interval = Duration::from_millis(300);
    let mut lag = LagDetector::spaced(interval);
    let start = tokio::time::Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    // Early rounds (readiness changed, a report due) a few ms apart, the
    // stream a commit behind for the moment: one heartbeat's worth.
    for ms in [0, 5, 10, 20, 40] {
        assert_eq!(lag.observe_at(at(ms), 5, 6), None, "at {ms} ms");
    }
    // Behind for three intervals in a row: a lag.
    assert_eq!(lag.observe_at(at(300), 5, 6), None);
    assert_eq!(lag.observe_at(at(600), 5, 6), None);
    assert_eq!(
        lag.observe_at(at(900), 5, 6),
        Some(Lag { held: 5, leader: 6 })
    );
}

#[test]
fn a_stream_one_commit_behind_a_leader_that_keeps_committing_is_not_lagging() {
    let mut lag = LagDetector::default();
    for held in 1..50 {
        assert_eq!(lag.observe(held, held + 1), None, "at {held}");
    }
}

#[test]
fn the_next_coordinator_is_the_leader_unless_it_just_failed() {
    let order = ["a".to_string(), "b".to_string(), "c".to_string()];
    let next = |leader: Option<&str>, previous| next_target(&order, leader, previous);
    assert_eq!(next(Some("a"), None).as_deref(), Some("a"));
    // After a failure elsewhere, the leader.
    assert_eq!(
        next(Some("c"), Some(("a", Ended::Failed))).as_deref(),
        Some("c")
    );
    // Never straight back to the one that failed (or lagged) …
    assert_eq!(
        next(Some("b"), Some(("b", Ended::Failed))).as_deref(),
        Some("c")
    );
    // … nor to one that ended its stream: go round the list.
    assert_eq!(
        next(Some("a"), Some(("c", Ended::Cleanly))).as_deref(),
        Some("a")
    );
    assert_eq!(
        next(Some("c"), Some(("a", Ended::Cleanly))).as_deref(),
        Some("b")
    );
    // A leader outside the list (a hint) that failed: back to the list.
    assert_eq!(
        next(Some("x"), Some(("x", Ended::Failed))).as_deref(),
        Some("a")
    );
    // One coordinator: that one, whatever happened.
    let one = ["a".to_string()];
    assert_eq!(
        next_target(&one, Some("a"), Some(("a", Ended::Failed))).as_deref(),
        Some("a")
    );
    assert_eq!(next_target(&[], None, None), None);
}

#[test]
fn updates_are_stale_a_version_or_a_snapshot_and_only_snapshots_decode() {
    let update = |version, json: &[u8]| {
        let update = pb::ConfigUpdate {
            version,
            snapshot_json: json.to_vec().into(),
            coordinator_id: 1,
            ..Default::default()
        };
        let whole = Assembler::default().push(update).unwrap().unwrap();
        receive("c", 5, None, false, whole)
    };
    let json = serde_json::to_vec(&ConfigSnapshot::default()).unwrap();
    assert!(matches!(update(5, b"junk"), Ok(Received::Stale)));
    assert!(matches!(update(6, b""), Ok(Received::Version(6))));
    assert!(matches!(update(7, &json), Ok(Received::Snapshot(7, _))));
    match update(8, b"junk") {
        Err(ControlError::Decode {
            coordinator,
            version,
            ..
        }) => assert_eq!((coordinator.as_str(), version), ("c", 8)),
        other => panic!("expected a decode error, got {other:?}"),
    }
}
