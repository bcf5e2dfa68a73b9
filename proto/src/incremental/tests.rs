use super::*;
use proptest::prelude::*;

fn set(entries: &[(u32, u32)]) -> OrdMap<u32, u32> {
    entries.iter().copied().collect()
}

#[test]
fn the_first_update_is_whole_then_only_changes_travel() {
    let mut sender = SetSender::default();
    let mut held = HeldSet::default();
    let mut current = set(&[(1, 10), (2, 20), (3, 30)]);
    let first = sender.prepare(&current);
    assert!(matches!(first, SetUpdate::Whole { seq: 1, ref entries } if entries.len() == 3));
    assert_eq!(held.take(first), Ok(vec![1, 2, 3]));
    sender.answered(held.seq());
    assert!(!sender.sends_whole());

    // Nothing changed: an empty change on the same set renews it.
    let same = sender.prepare(&current);
    assert_eq!(
        same,
        SetUpdate::Changes {
            base: 1,
            seq: 1,
            upserted: vec![],
            removed: vec![]
        }
    );
    assert_eq!(held.take(same), Ok(vec![]));
    sender.answered(held.seq());

    current.insert(2, 21);
    current.remove(&3);
    current.insert(4, 40);
    let changes = sender.prepare(&current);
    assert_eq!(
        changes,
        SetUpdate::Changes {
            base: 1,
            seq: 2,
            upserted: vec![(2, 21), (4, 40)],
            removed: vec![3]
        }
    );
    assert_eq!(held.take(changes), Ok(vec![3, 2, 4]));
    sender.answered(held.seq());
    assert_eq!(held.map(), &current);
    assert_eq!(held.seq(), 2);
}

#[test]
fn changes_on_a_set_not_held_change_nothing_and_the_next_update_is_whole() {
    let mut sender = SetSender::default();
    let mut old_leader = HeldSet::default();
    let current = set(&[(1, 10)]);
    old_leader.take(sender.prepare(&current)).unwrap();
    sender.answered(old_leader.seq());

    // A new leader holds nothing.
    let mut new_leader = HeldSet::default();
    let mut next = current.clone();
    next.insert(2, 20);
    let changes = sender.prepare(&next);
    assert_eq!(new_leader.take(changes), Err(NotHeld { held: 0, base: 1 }));
    assert!(new_leader.map().is_empty(), "nothing taken");
    sender.answered(new_leader.seq());
    assert!(sender.sends_whole());
    let whole = sender.prepare(&next);
    assert!(matches!(whole, SetUpdate::Whole { .. }));
    assert_eq!(new_leader.take(whole), Ok(vec![1, 2]));
    assert_eq!(new_leader.map(), &next);
}

#[test]
fn changes_on_nothing_are_never_taken() {
    let mut held: HeldSet<u32, u32> = HeldSet::default();
    let refused = held.take(SetUpdate::Changes {
        base: 0,
        seq: 1,
        upserted: vec![(1, 1)],
        removed: vec![],
    });
    assert_eq!(refused, Err(NotHeld { held: 0, base: 0 }));
}

/// One step of a random exchange.
#[derive(Debug, Clone)]
enum Step {
    /// The sender's set changes.
    Set(u32, Option<u32>),
    /// A call whose answer arrives.
    Call,
    /// A call taken by the receiver whose answer is lost.
    LostAnswer,
    /// A call lost before the receiver saw it.
    LostCall,
    /// The receiver is replaced (a new leader) with nothing held.
    NewReceiver,
    /// The sender registers again.
    Reset,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u32..20, proptest::option::of(0u32..5)).prop_map(|(k, v)| Step::Set(k, v)),
        4 => Just(Step::Call),
        1 => Just(Step::LostAnswer),
        1 => Just(Step::LostCall),
        1 => Just(Step::NewReceiver),
        1 => Just(Step::Reset),
    ]
}

proptest! {
    /// Whatever is lost or replaced, an answered call leaves the receiver
    /// holding exactly the sender's set, or tells the sender to send it
    /// whole — and the call after that one always agrees.
    #[test]
    fn both_ends_agree_after_every_answered_call(steps in proptest::collection::vec(step(), 1..80)) {
        let mut sender = SetSender::default();
        let mut receiver = HeldSet::default();
        let mut current: OrdMap<u32, u32> = OrdMap::new();
        for s in steps {
            match s {
                Step::Set(k, Some(v)) => { current.insert(k, v); }
                Step::Set(k, None) => { current.remove(&k); }
                Step::Call => {
                    let update = sender.prepare(&current);
                    let whole = matches!(update, SetUpdate::Whole { .. });
                    match receiver.take(update) {
                        Ok(_) => prop_assert_eq!(receiver.map(), &current),
                        Err(_) => prop_assert!(!whole, "a whole set is always taken"),
                    }
                    sender.answered(receiver.seq());
                    let again = sender.prepare(&current);
                    prop_assert!(receiver.take(again).is_ok());
                    prop_assert_eq!(receiver.map(), &current);
                    sender.answered(receiver.seq());
                }
                Step::LostAnswer => {
                    let update = sender.prepare(&current);
                    let _ = receiver.take(update);
                }
                Step::LostCall => {
                    let _ = sender.prepare(&current);
                }
                Step::NewReceiver => receiver = HeldSet::default(),
                Step::Reset => {
                    sender.reset();
                    receiver = HeldSet::default();
                }
            }
        }
    }
}

/// A set large enough to be named by digest: keys `0..n`, values `v`.
fn large(n: u32, v: u32) -> OrdMap<u32, u32> {
    (0..n).map(|k| (k, v)).collect()
}

#[test]
fn a_large_set_another_sender_sent_whole_is_taken_by_its_digest() {
    let mut known = KnownSets::default();
    let current = large(100, 7);

    // The first sender: its digest is not known yet, so the set follows
    // whole, and the receiver remembers it.
    let mut first = SetSender::default();
    let mut first_held = HeldSet::default();
    let named = first.prepare(&current);
    assert!(
        matches!(named, SetUpdate::Known { seq: 1, .. }),
        "{named:?}"
    );
    assert_eq!(
        first_held.take_known(named, &mut known),
        Err(NotHeld { held: 0, base: 0 })
    );
    first.answered(first_held.seq());
    assert!(first.sends_whole());
    let whole = first.prepare(&current);
    assert!(matches!(whole, SetUpdate::Whole { seq: 1, ref entries } if entries.len() == 100));
    first_held.take_known(whole, &mut known).unwrap();
    first.answered(first_held.seq());
    assert!(!first.sends_whole());

    // A second sender with the same set: its digest is taken, no entries
    // travel, and it holds exactly that set.
    let mut second = SetSender::default();
    let mut second_held = HeldSet::default();
    let named = second.prepare(&current);
    assert!(matches!(named, SetUpdate::Known { .. }));
    assert_eq!(
        second_held.take_known(named, &mut known).map(|k| k.len()),
        Ok(100)
    );
    second.answered(second_held.seq());
    assert!(!second.sends_whole());
    assert_eq!(second_held.map(), &current);
    assert!(
        second_held.map().ptr_eq(first_held.map()),
        "one copy shared"
    );

    // Changes then travel as usual.
    let mut next = current.clone();
    next.insert(3, 8);
    let changes = second.prepare(&next);
    assert!(matches!(
        changes,
        SetUpdate::Changes {
            base: 1,
            seq: 2,
            ..
        }
    ));
    assert_eq!(second_held.take_known(changes, &mut known), Ok(vec![3]));
    assert_eq!(second_held.map(), &next);
}

#[test]
fn a_set_differing_in_one_value_has_another_digest() {
    let a = large(100, 7);
    let mut b = a.clone();
    b.insert(50, 8);
    assert_ne!(digest(&a), digest(&b));
    assert_eq!(digest(&a), digest(&large(100, 7)), "same set, same digest");
    // Key order, not insertion order, defines the digest.
    let reversed: OrdMap<u32, u32> = (0u32..100).rev().map(|k| (k, 7u32)).collect();
    assert_eq!(digest(&a), digest(&reversed));
}

#[test]
fn a_new_leader_takes_changes_then_digest_then_whole_in_one_send() {
    let current = large(100, 1);
    let mut sender = SetSender::default();
    let mut old_leader = HeldSet::default();
    let mut old_known = KnownSets::default();
    sender.answered(0);
    // Held by the old leader (first the digest, refused, then whole).
    for _ in 0..2 {
        let update = sender.prepare(&current);
        let _ = old_leader.take_known(update, &mut old_known);
        sender.answered(old_leader.seq());
    }
    assert!(!sender.sends_whole());

    // A new leader that knows nothing: changes refused, digest refused,
    // whole taken — three calls of one `send`.
    let mut new_leader = HeldSet::default();
    let mut new_known = KnownSets::default();
    let mut calls = Vec::new();
    let sent: Result<(), ()> = block_on_ready(sender.send(&current, |update| {
        calls.push(match &update {
            SetUpdate::Whole { .. } => "whole",
            SetUpdate::Known { .. } => "digest",
            SetUpdate::Changes { .. } => "changes",
        });
        let _ = new_leader.take_known(update, &mut new_known);
        std::future::ready(Ok(((), new_leader.seq())))
    }));
    sent.unwrap();
    assert_eq!(calls, ["changes", "digest", "whole"]);
    assert_eq!(new_leader.map(), &current);
    assert!(!sender.sends_whole());
}

#[test]
fn a_receiver_without_digests_refuses_one_and_gets_the_set_whole() {
    let current = large(100, 1);
    let mut sender = SetSender::default();
    let mut receiver = HeldSet::default();
    let named = sender.prepare(&current);
    assert!(matches!(named, SetUpdate::Known { .. }));
    assert!(receiver.take(named).is_err(), "never mistaken for a set");
    assert!(receiver.map().is_empty());
    sender.answered(receiver.seq());
    let whole = sender.prepare(&current);
    assert!(matches!(whole, SetUpdate::Whole { .. }));
    receiver.take(whole).unwrap();
    assert_eq!(receiver.map(), &current);
}

#[test]
fn small_sets_always_go_whole() {
    let current = large(KNOWN_MIN_ENTRIES as u32 - 1, 1);
    let mut sender = SetSender::default();
    assert!(matches!(sender.prepare(&current), SetUpdate::Whole { .. }));
    let mut known = KnownSets::default();
    known.remember(&current);
    assert_eq!(known.get(&digest(&current)), None, "not remembered either");
}

#[test]
fn only_the_most_recent_large_sets_are_remembered() {
    let mut known = KnownSets::default();
    for v in 0..(KnownSets::<u32, u32>::CAPACITY as u32 + 1) {
        known.remember(&large(100, v));
    }
    assert_eq!(known.get(&digest(&large(100, 0))), None, "the oldest went");
    assert!(known.get(&digest(&large(100, 1))).is_some());
}

#[test]
fn an_unknown_digest_is_asked_whole_once_then_awaited_until_it_comes_or_the_wait_ends() {
    let window = AWAIT_WHOLE.as_millis() as u64;
    let mut known = KnownSets::default();
    let (a, b) = (large(100, 1), large(100, 2));
    // The first sender to name `a` is asked for it whole; the others
    // naming it meanwhile wait for that copy.
    assert_eq!(known.missed(&digest(&a), 1_000), Missed::AskWhole);
    assert_eq!(known.missed(&digest(&a), 1_010), Missed::Awaited);
    assert_eq!(
        known.missed(&digest(&a), 1_000 + window - 1),
        Missed::Awaited
    );
    // Another set's digest is not awaited because `a` is.
    assert_eq!(known.missed(&digest(&b), 1_020), Missed::AskWhole);
    // `a` never came: once the wait is over the next sender is asked, and
    // the wait starts again from there.
    assert_eq!(known.missed(&digest(&a), 1_000 + window), Missed::AskWhole);
    assert_eq!(
        known.missed(&digest(&a), 1_000 + window + 1),
        Missed::Awaited
    );

    // `b` came whole: its digest is known, no longer awaited; named
    // again after being forgotten, it is asked for afresh.
    known.remember(&b);
    assert!(known.get(&digest(&b)).is_some());
    assert!(known.asked.iter().all(|(d, _)| *d != digest(&b)));

    // At most CAPACITY digests are awaited: the oldest is asked again.
    let mut known = KnownSets::<u32, u32>::default();
    let capacity = KnownSets::<u32, u32>::CAPACITY as u32;
    for v in 0..=capacity {
        assert_eq!(known.missed(&digest(&large(100, v)), 0), Missed::AskWhole);
    }
    assert_eq!(
        known.missed(&digest(&large(100, capacity)), 1),
        Missed::Awaited
    );
    assert_eq!(known.missed(&digest(&large(100, 0)), 1), Missed::AskWhole);
}

#[test]
fn a_set_the_receiver_holds_is_due_again_only_for_renewal() {
    let every = std::time::Duration::from_secs(1);
    let mut sender = SetSender::default();
    let mut receiver = HeldSet::default();
    let mut current = set(&[(1, 10), (2, 20)]);
    let mut exchange = |sender: &mut SetSender<u32, u32>, current: &OrdMap<u32, u32>| {
        let sent: Result<(), ()> = block_on_ready(sender.send(current, |update| {
            receiver.take(update).unwrap();
            std::future::ready(Ok(((), receiver.seq())))
        }));
        sent.unwrap();
    };
    let before = Instant::now();
    assert!(sender.due(&current, before, every), "nothing held yet");
    assert_eq!(sender.renewal_at(every), None);

    exchange(&mut sender, &current);
    let renew_at = sender.renewal_at(every).unwrap();
    assert!(renew_at >= before + every && renew_at <= Instant::now() + every);
    // Held and fresh: not due, whether the same map or an equal one.
    assert!(!sender.due(&current, renew_at - every, every));
    assert!(!sender.due(&set(&[(1, 10), (2, 20)]), renew_at - every, every));
    // Fresh no longer: due though unchanged.
    assert!(sender.due(&current, renew_at, every));
    assert_eq!(sender.until_renewal(renew_at - every / 4, every), every / 4);
    assert_eq!(sender.until_renewal(renew_at, every), Duration::ZERO);
    assert_eq!(sender.until_renewal(renew_at - every * 2, every), every);

    // Changed: due at once.
    current.insert(3, 30);
    assert!(sender.due(&current, renew_at - every, every));
    exchange(&mut sender, &current);
    assert!(!sender.due(&current, Instant::now(), every));

    // A failed exchange: whoever answers next may hold nothing.
    let failed: Result<(), ()> =
        block_on_ready(sender.send(&current, |_| std::future::ready(Err(()))));
    assert!(failed.is_err());
    assert!(sender.due(&current, Instant::now(), every));
    exchange(&mut sender, &current);
    assert!(!sender.due(&current, Instant::now(), every));

    // A new registration holds nothing.
    sender.reset();
    assert!(sender.due(&current, Instant::now(), every));
    assert_eq!(sender.renewal_at(every), None);
    assert_eq!(sender.until_renewal(Instant::now(), every), every);
}

#[test]
fn a_version_is_due_until_taken_with_the_set_the_receiver_holds() {
    let every = Duration::from_secs(3600);
    let mut sender = VersionedSetSender::default();
    let mut receiver = HeldSet::default();
    let listed = set(&[]);
    let now = Instant::now;
    assert!(sender.due(&listed, 0, now(), every), "nothing held yet");

    // Taken with the set: neither moved, nothing due.
    let sent: Result<(), ()> = block_on_ready(sender.send(&listed, 5, |update| {
        receiver.take(update).unwrap();
        std::future::ready(Ok(((), receiver.seq())))
    }));
    sent.unwrap();
    assert!(!sender.due(&listed, 5, now(), every));
    // The version moved, the set did not: due.
    assert!(sender.due(&listed, 6, now(), every));

    // An answer showing the receiver holds another set (a new leader, a
    // new registration: sequence 0) does not take the version either.
    let refused: Result<(), ()> =
        block_on_ready(sender.send(&listed, 6, |_| std::future::ready(Ok(((), 0)))));
    refused.unwrap();
    assert!(sender.due(&listed, 6, now(), every));
    assert!(sender.due(&listed, 5, now(), every), "the set is not held");

    // A failed call takes nothing.
    let failed: Result<(), ()> =
        block_on_ready(sender.send(&listed, 6, |_| std::future::ready(Err(()))));
    assert!(failed.is_err());
    assert!(sender.due(&listed, 6, now(), every));

    let mut receiver = HeldSet::default();
    let sent: Result<(), ()> = block_on_ready(sender.send(&listed, 6, |update| {
        receiver.take(update).unwrap();
        std::future::ready(Ok(((), receiver.seq())))
    }));
    sent.unwrap();
    assert!(!sender.due(&listed, 6, now(), every));
}

/// Drives a future that never waits (the calls above answer at once).
fn block_on_ready<F: std::future::Future>(future: F) -> F::Output {
    let waker = std::task::Waker::noop();
    let mut context = std::task::Context::from_waker(waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut context) {
            return out;
        }
    }
}

#[test]
fn a_set_taken_with_a_limit_lists_at_most_that_many_changed_keys() {
    let mut known = KnownSets::default();
    let current = large(100, 7);
    let mut sender = SetSender::default();
    let mut held = HeldSet::default();
    let _ = held.take_known(sender.prepare(&current), &mut known);
    sender.answered(held.seq());
    held.take_known(sender.prepare(&current), &mut known)
        .unwrap();

    // A second receiver (a new leader) holding nothing takes the same set
    // by digest, asked for at most 5 keys: it holds all 100 entries, and
    // says more than 5 changed without listing them.
    let mut fresh = HeldSet::default();
    let mut named_by_digest = SetSender::default();
    let named = named_by_digest.prepare(&current);
    assert!(matches!(named, SetUpdate::Known { .. }));
    assert_eq!(
        fresh.take_known_listing(named, &mut known, 5),
        Ok(Changed::MoreThan(5))
    );
    assert_eq!(fresh.map(), &current);
    // Within the limit every changed key is listed; nothing changed, none.
    let mut next = current.clone();
    next.insert(3, 8);
    named_by_digest.answered(fresh.seq());
    let changes = named_by_digest.prepare(&next);
    assert_eq!(
        fresh.take_known_listing(changes, &mut known, 5),
        Ok(Changed::Keys(vec![3]))
    );
    named_by_digest.answered(fresh.seq());
    let again = named_by_digest.prepare(&next);
    assert_eq!(
        fresh.take_known_listing(again, &mut known, 0),
        Ok(Changed::Keys(Vec::new()))
    );
    // A whole set equal to the one held: nothing listed even at limit 0.
    let whole = SetUpdate::Whole {
        seq: 9,
        entries: next.iter().map(|(k, v)| (*k, *v)).collect(),
    };
    assert_eq!(
        fresh.take_known_listing(whole, &mut known, 0),
        Ok(Changed::Keys(Vec::new()))
    );
}

#[test]
fn a_large_jump_goes_by_digest_and_the_changes_that_made_it_are_remembered() {
    let mut known = KnownSets::default();
    let before = set(&[(1000, 1)]);
    let jumped = large(100, 7);
    let mut senders = [SetSender::default(), SetSender::default()];
    let mut held = [HeldSet::default(), HeldSet::default()];
    for (sender, held) in senders.iter_mut().zip(held.iter_mut()) {
        held.take_known(sender.prepare(&before), &mut known)
            .unwrap();
        sender.answered(held.seq());
    }
    let mut sends = Vec::new();
    for (sender, held) in senders.iter_mut().zip(held.iter_mut()) {
        let mut calls = Vec::new();
        let sent: Result<(), ()> = block_on_ready(sender.send(&jumped, |update| {
            calls.push(match &update {
                SetUpdate::Whole { .. } => "whole",
                SetUpdate::Known { .. } => "digest",
                SetUpdate::Changes { upserted, .. } => {
                    assert_eq!(upserted.len(), 100, "the jump's changes");
                    "changes"
                }
            });
            let _ = held.take_known(update, &mut known);
            std::future::ready(Ok(((), held.seq())))
        }));
        sent.unwrap();
        assert_eq!(held.map(), &jumped);
        assert!(!sender.sends_whole());
        sends.push(calls);
    }
    // The first receiver did not know the new set: the changes follow the
    // refused digest (not the whole set), and the receiver remembers what
    // they made. The second sender's jump is then taken by its digest.
    assert_eq!(sends, [vec!["digest", "changes"], vec!["digest"]]);
    assert!(held[1].map().ptr_eq(held[0].map()), "one copy shared");

    // A small change still travels as changes, and is not remembered.
    let mut next = jumped.clone();
    next.insert(3, 8);
    let changes = senders[1].prepare(&next);
    assert!(matches!(changes, SetUpdate::Changes { ref upserted, .. } if upserted.len() == 1));
    assert_eq!(held[1].take_known(changes, &mut known), Ok(vec![3]));
    assert_eq!(known.get(&digest(&next)), None);
}

#[test]
fn a_large_change_is_at_least_the_digest_minimum_and_half_the_set() {
    assert!(is_large_change(KNOWN_MIN_ENTRIES, KNOWN_MIN_ENTRIES));
    assert!(is_large_change(100, 200));
    assert!(!is_large_change(100, 201), "less than half the set");
    assert!(
        !is_large_change(KNOWN_MIN_ENTRIES - 1, 2),
        "too few to name"
    );
}

/// Sends `current` with one `send` to `receiver` (sharing `known`), and
/// the forms its calls took.
fn send_all(
    sender: &mut SetSender<u32, u32>,
    current: &OrdMap<u32, u32>,
    receiver: &mut HeldSet<u32, u32>,
    known: &mut KnownSets<u32, u32>,
) -> Vec<&'static str> {
    let mut calls = Vec::new();
    let sent: Result<(), ()> = block_on_ready(sender.send(current, |update| {
        calls.push(match &update {
            SetUpdate::Whole { .. } => "whole",
            SetUpdate::Known { .. } => "digest",
            SetUpdate::Changes { .. } => "changes",
        });
        let _ = receiver.take_known(update, known);
        std::future::ready(Ok(((), receiver.seq())))
    }));
    sent.unwrap();
    calls
}

#[test]
fn a_new_leader_takes_the_set_the_old_one_acknowledged_by_digest_then_each_sender_s_changes() {
    // Two senders the old leader acknowledged the same large set from.
    let acknowledged = large(100, 1);
    let (mut old_leader, mut old_known) = (HeldSet::default(), KnownSets::default());
    let mut senders = [SetSender::default(), SetSender::default()];
    for sender in &mut senders {
        let mut held = old_leader.clone();
        send_all(sender, &acknowledged, &mut held, &mut old_known);
        old_leader = held;
        assert!(!sender.sends_whole());
    }
    // Since, each changed its set its own way: their digests differ.
    let mut first = acknowledged.clone();
    first.insert(7, 2);
    let mut second = acknowledged.clone();
    second.insert(500, 1);
    second.remove(&3);

    // A new leader knowing nothing: the first sender's changes and the
    // acknowledged set's digest are refused; that set goes whole (and is
    // remembered), then the changes since it.
    let mut known = KnownSets::default();
    let mut held_first = HeldSet::default();
    let calls = send_all(&mut senders[0], &first, &mut held_first, &mut known);
    assert_eq!(calls, ["changes", "digest", "whole", "changes"]);
    assert_eq!(held_first.map(), &first);
    // The second's acknowledged set is known now: no whole set travels.
    let mut held_second = HeldSet::default();
    let calls = send_all(&mut senders[1], &second, &mut held_second, &mut known);
    assert_eq!(calls, ["changes", "digest", "changes"]);
    assert_eq!(held_second.map(), &second);
    // And the next changes go on what each new receiver holds.
    second.insert(501, 1);
    let calls = send_all(&mut senders[1], &second, &mut held_second, &mut known);
    assert_eq!(calls, ["changes"]);
    assert_eq!(held_second.map(), &second);
}

#[test]
fn a_receiver_that_never_takes_a_set_ends_a_send_after_its_bound() {
    let mut sender = SetSender::default();
    let current = large(100, 1);
    let mut calls = 0;
    let sent: Result<(), ()> = block_on_ready(sender.send(&current, |_| {
        calls += 1;
        std::future::ready(Ok(((), 0)))
    }));
    sent.unwrap();
    assert!(calls <= MAX_CALLS_PER_SEND, "{calls} calls");
    assert!(sender.due(&current, Instant::now(), Duration::from_secs(60)));
}
