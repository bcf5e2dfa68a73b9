//! The proxies' listener sockets as leader soft state: kept per current
//! registration, replaced whole, forgotten with the registration.

use super::*;

fn socket(port: u16, error: Option<&str>) -> ListenerBinding {
    ListenerBinding {
        gateway: None,
        port,
        address: format!("127.0.0.1:{port}"),
        bound: error.is_none(),
        error: error.map(Into::into),
    }
}

#[test]
fn sockets_follow_the_latest_report_of_the_current_registration() {
    let mut s = world(&["a"], "1", "keep-old");
    let mut e = CutoverEngine::new(settings(), &s, 0, TERM);
    assert_eq!(e.sockets_of("p0"), None, "nothing reported yet");

    assert!(report(&mut e, &s, "p0", green_ready(&s), 10));
    e.record_sockets("p0", Some(vec![socket(80, Some("Address in use"))]));
    assert_eq!(
        e.sockets_of("p0"),
        Some(&[socket(80, Some("Address in use"))][..])
    );
    // A later report replaces the sockets whole.
    e.record_sockets("p0", Some(vec![socket(80, None), socket(81, None)]));
    assert_eq!(e.sockets_of("p0").map(<[_]>::len), Some(2));
    // A report without sockets (an older proxy) makes them unknown again.
    e.record_sockets("p0", None);
    assert_eq!(e.sockets_of("p0"), None);

    // A proxy this engine holds no registration for keeps nothing.
    e.record_sockets("intruder", Some(vec![socket(80, None)]));
    assert_eq!(e.sockets_of("intruder"), None);

    // Registering again (a restart) drops what the earlier run said.
    e.record_sockets("p0", Some(vec![socket(80, None)]));
    next(&mut s, register("p0", "a"));
    e.sync(&s, 20);
    assert_eq!(e.sockets_of("p0"), None);
}
