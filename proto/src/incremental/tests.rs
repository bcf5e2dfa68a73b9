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
