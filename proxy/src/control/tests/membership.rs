//! Registration, heartbeats, readiness reports and deregistration against
//! fake coordinators.

use super::fake::Fake;
use super::{Logs, Proxy};

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
