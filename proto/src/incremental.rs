//! Sets a proxy tells the leader again and again — the route generations
//! it serves (heartbeats) and the backends it keeps warm (readiness
//! reports) — sent whole once, then as the changes since the set the
//! leader acknowledged.
//!
//! Owns both sides' rules. The sender ([`SetSender`]) numbers every
//! distinct set it sends (`seq`, never 0, moving whenever the set
//! changes), sends it whole while the receiver acknowledged nothing and as
//! changes on the acknowledged set after that, and falls back to whole
//! when an answer shows the receiver holds something else (a new leader,
//! a lost answer, a new registration). The receiver ([`HeldSet`]) takes a
//! whole set always and changes only on exactly the set they were made
//! from; otherwise it keeps what it held, unchanged, and says which
//! sequence it holds. So both ends agree on the set, or the next call
//! sends it whole. Does not own the calls, nor what the sets mean.
//!
//! A set sent whole again (to a new leader, after a new registration) is
//! first named by its digest ([`SetUpdate::Known`]) when it is large: a
//! fleet's proxies mostly keep the same backends warm and serve the same
//! generations, so the receiver usually holds the very same set already,
//! from another sender ([`KnownSets`]), and takes that one (a shared
//! persistent map) instead of decoding, interning and indexing every
//! entry again: at a failover, 200 proxies times 10,000 entries, twice.
//! (Listing what changed is still O(R).) A digest it does not know is answered
//! like changes on a set not held, and the set follows whole — from the
//! first sender naming it: the receiver holds the calls of later senders
//! naming the same digest until that copy came (at most [`AWAIT_WHOLE`],
//! see [`KnownSets::missed`]), since a new leader hears the same digest
//! from most of the fleet at once. When a
//! receiver refuses changes on the set it last acknowledged (a new leader),
//! that acknowledged set is named first — by digest, else whole — and the
//! changes since it follow: the old leader acknowledged the same set from
//! most of the fleet, so the new one takes it by digest from every proxy
//! after the first, where the proxies' current sets (each a few changes
//! further, each its own way) would each have gone whole. On the wire
//! the digest travels as changes on set 0, which a receiver older than
//! digests refuses (no set is 0), so it never mistakes one for an empty
//! set.
//!
//! Cost: sets are persistent maps ([`imbl::OrdMap`]): keeping the
//! acknowledged copy is O(1), and the changes between it and the current
//! set are found by a walk that skips shared subtrees — O(C log R) for C
//! changes when the current set was derived from the acknowledged one by
//! C updates, O(R) at worst. The receiver's cost is O(C log R) per call.

use imbl::OrdMap;
use imbl::ordmap::DiffItem;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A set's SHA-256 over its entries' canonical bytes, in key order.
pub type Digest = [u8; 32];

/// Sets with fewer entries than this always go whole: naming them by
/// digest would save little and could cost a round trip.
pub const KNOWN_MIN_ENTRIES: usize = 64;

/// Bytes that identify a key or value in a set's [`Digest`]: equal values
/// give equal bytes, and the encoding is self-delimiting (so two entries
/// never read as one).
pub trait Canonical {
    /// Appends this value's bytes to `out`.
    fn canonical(&self, out: &mut Vec<u8>);
}

impl Canonical for u64 {
    fn canonical(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Canonical for u32 {
    fn canonical(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Canonical for str {
    fn canonical(&self, out: &mut Vec<u8>) {
        (self.len() as u64).canonical(out);
        out.extend_from_slice(self.as_bytes());
    }
}

impl<T: Canonical + ?Sized> Canonical for Arc<T> {
    fn canonical(&self, out: &mut Vec<u8>) {
        T::canonical(self, out);
    }
}

/// The digest of `set`: O(R).
pub fn digest<K: Canonical + Ord + Clone, V: Canonical + Clone>(set: &OrdMap<K, V>) -> Digest {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut bytes = Vec::with_capacity(64);
    (set.len() as u64).canonical(&mut bytes);
    context.update(&bytes);
    for (key, value) in set {
        bytes.clear();
        key.canonical(&mut bytes);
        value.canonical(&mut bytes);
        context.update(&bytes);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(context.finish().as_ref());
    out
}

/// Whether `changes` entries changed in a set of `len` (after the change)
/// is a large change: at least [`KNOWN_MIN_ENTRIES`], and at least half
/// the set. The sender then names the new set by digest rather than list
/// the changes, and the receiver that took such changes remembers the
/// result ([`KnownSets`]) for the next sender making the same jump.
/// Rare by design (a proxy's first configuration after an empty one, a
/// bulk import): remembering costs a digest, O(R), no more than taking
/// the changes did.
pub fn is_large_change(changes: usize, len: usize) -> bool {
    changes >= KNOWN_MIN_ENTRIES && changes * 2 >= len
}

/// Most calls of one [`SetSender::send`]: changes refused, the last
/// acknowledged set's digest refused, that set whole, then the changes
/// since it, named by digest when large and refused, then whole.
pub const MAX_CALLS_PER_SEND: usize = 6;

/// A set as sent: whole, or the changes on a set the receiver holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetUpdate<K, V> {
    /// Every entry; it replaces whatever the receiver held.
    Whole {
        /// The sender's number for this set (0 from senders that do not
        /// number their sets).
        seq: u64,
        /// Every entry.
        entries: Vec<(K, V)>,
    },
    /// The whole set, named by its [`digest`]: the receiver takes it if it
    /// holds a set with that digest (see [`KnownSets`]), else keeps what
    /// it held.
    Known {
        /// The sender's number for this set.
        seq: u64,
        /// The set's digest.
        digest: Digest,
    },
    /// The changes from the set numbered `base` to the one numbered `seq`.
    Changes {
        /// The set these changes apply on; never 0.
        base: u64,
        /// The set they make.
        seq: u64,
        /// Entries added or changed.
        upserted: Vec<(K, V)>,
        /// Keys removed.
        removed: Vec<K>,
    },
}

impl<K, V> SetUpdate<K, V> {
    /// The same update with every key passed through `f` (a receiver
    /// interning its keys, say).
    pub fn map_keys<K2>(self, mut f: impl FnMut(K) -> K2) -> SetUpdate<K2, V> {
        match self {
            SetUpdate::Whole { seq, entries } => SetUpdate::Whole {
                seq,
                entries: entries.into_iter().map(|(k, v)| (f(k), v)).collect(),
            },
            SetUpdate::Known { seq, digest } => SetUpdate::Known { seq, digest },
            SetUpdate::Changes {
                base,
                seq,
                upserted,
                removed,
            } => SetUpdate::Changes {
                base,
                seq,
                upserted: upserted.into_iter().map(|(k, v)| (f(k), v)).collect(),
                removed: removed.into_iter().map(f).collect(),
            },
        }
    }

    /// The digest this update names the set by, if it is one
    /// ([`SetUpdate::Known`]).
    pub fn named_digest(&self) -> Option<Digest> {
        match self {
            SetUpdate::Known { digest, .. } => Some(*digest),
            _ => None,
        }
    }

    /// The sequence of the set this update makes.
    pub fn seq(&self) -> u64 {
        match self {
            SetUpdate::Whole { seq, .. }
            | SetUpdate::Known { seq, .. }
            | SetUpdate::Changes { seq, .. } => *seq,
        }
    }
}

/// Changes that were not taken: the receiver holds another set than the
/// one they were made from (or does not know the digest that named a
/// whole set: `base` 0). What it held is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("changes on set {base} do not apply: set {held} is held")]
pub struct NotHeld {
    /// The sequence held.
    pub held: u64,
    /// The sequence the changes were made from.
    pub base: u64,
}

/// The receiving side: one sender's set, with its sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSet<K: Ord + Clone, V: Clone> {
    seq: u64,
    map: OrdMap<K, V>,
}

impl<K: Ord + Clone, V: Clone> Default for HeldSet<K, V> {
    fn default() -> Self {
        HeldSet {
            seq: 0,
            map: OrdMap::new(),
        }
    }
}

impl<K: Ord + Clone, V: Clone + PartialEq> HeldSet<K, V> {
    /// The sequence held (0: nothing numbered).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The set.
    pub fn map(&self) -> &OrdMap<K, V> {
        &self.map
    }

    /// Takes `update`: the keys whose entry it added, changed or removed
    /// (none: the set is as it was), or [`NotHeld`] (and nothing changed)
    /// for changes made from another set than the one held. O(C log R)
    /// for changes; a whole set is compared with the one held, O(R).
    pub fn take(&mut self, update: SetUpdate<K, V>) -> Result<Vec<K>, NotHeld> {
        match update {
            SetUpdate::Whole { seq, entries } => {
                Ok(self.replace(seq, entries.into_iter().collect()))
            }
            // Without the sets it knows, a receiver knows no digest.
            SetUpdate::Known { .. } => Err(NotHeld {
                held: self.seq,
                base: 0,
            }),
            SetUpdate::Changes {
                base,
                seq,
                upserted,
                removed,
            } => {
                if base == 0 || base != self.seq {
                    return Err(NotHeld {
                        held: self.seq,
                        base,
                    });
                }
                let mut changed = Vec::new();
                for key in removed {
                    if self.map.remove(&key).is_some() {
                        changed.push(key);
                    }
                }
                for (key, value) in upserted {
                    // One walk down the tree for a key held already (the
                    // common case: a served generation moving on), not a
                    // lookup and then an insert. An equal value still
                    // copies its path where the tree is shared; senders
                    // list only what changed, so that is rare.
                    match self.map.get_mut(&key) {
                        Some(held) if *held == value => {}
                        Some(held) => {
                            *held = value;
                            changed.push(key);
                        }
                        None => {
                            self.map.insert(key.clone(), value);
                            changed.push(key);
                        }
                    }
                }
                self.seq = seq;
                Ok(changed)
            }
        }
    }

    /// Holds `map` as set `seq`: the keys whose entry differs from what
    /// was held. O(R) (less where the two share subtrees).
    fn replace(&mut self, seq: u64, map: OrdMap<K, V>) -> Vec<K> {
        match self.replace_listing(seq, map, usize::MAX) {
            Changed::Keys(keys) => keys,
            Changed::MoreThan(_) => unreachable!("no list is longer than usize::MAX"),
        }
    }

    /// [`HeldSet::replace`], listing at most `limit` changed keys: the
    /// diff stops at the first key past it, so holding a large set where
    /// little or nothing was held (a new leader hearing from each proxy)
    /// costs O(limit), not O(R).
    fn replace_listing(&mut self, seq: u64, map: OrdMap<K, V>, limit: usize) -> Changed<K> {
        let mut keys = Vec::new();
        let mut more = false;
        for item in self.map.diff(&map) {
            if keys.len() == limit {
                more = true;
                break;
            }
            keys.push(match item {
                DiffItem::Add(k, _) | DiffItem::Remove(k, _) => k.clone(),
                DiffItem::Update { new: (k, _), .. } => k.clone(),
            });
        }
        self.map = map;
        self.seq = seq;
        if more {
            Changed::MoreThan(limit)
        } else {
            Changed::Keys(keys)
        }
    }
}

/// What taking an update changed, as far as the receiver asked to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed<K> {
    /// Every key whose entry was added, changed or removed.
    Keys(Vec<K>),
    /// More keys than this many changed; they were not listed.
    MoreThan(usize),
}

impl<K: Ord + Clone + Canonical, V: Clone + PartialEq + Canonical> HeldSet<K, V> {
    /// [`HeldSet::take`], with the sets `known` by digest: a large whole
    /// set is remembered there, and a [`SetUpdate::Known`] is taken from
    /// there (a shared copy, and a diff with what was held),
    /// or refused when its digest is not known.
    pub fn take_known(
        &mut self,
        update: SetUpdate<K, V>,
        known: &mut KnownSets<K, V>,
    ) -> Result<Vec<K>, NotHeld> {
        match self.take_known_listing(update, known, usize::MAX)? {
            Changed::Keys(keys) => Ok(keys),
            Changed::MoreThan(_) => unreachable!("no list is longer than usize::MAX"),
        }
    }

    /// [`HeldSet::take_known`], listing at most `limit` changed keys (see
    /// `HeldSet::replace_listing`): a set named by digest is then taken
    /// in O(limit) whatever its size. Changes list what they changed
    /// (their own size bounds it).
    pub fn take_known_listing(
        &mut self,
        update: SetUpdate<K, V>,
        known: &mut KnownSets<K, V>,
        limit: usize,
    ) -> Result<Changed<K>, NotHeld> {
        match update {
            SetUpdate::Whole { seq, entries } => {
                let map: OrdMap<K, V> = entries.into_iter().collect();
                known.remember(&map);
                Ok(self.replace_listing(seq, map, limit))
            }
            SetUpdate::Known { seq, digest } => match known.get(&digest) {
                Some(map) => Ok(self.replace_listing(seq, map, limit)),
                None => Err(NotHeld {
                    held: self.seq,
                    base: 0,
                }),
            },
            changes => {
                let keys = self.take(changes)?;
                if is_large_change(keys.len(), self.map.len()) {
                    known.remember(&self.map);
                }
                Ok(Changed::Keys(keys))
            }
        }
    }
}

/// How long after a receiver refused a digest it did not know (asking
/// that sender for the set whole) later senders naming the same digest
/// are asked to wait for it rather than send it whole too. A new leader
/// hears the same digest from most of the fleet at once: without the
/// wait every sender whose call came before the first whole set was
/// taken sent its own copy (at a failover at 10,000 routes, 113 of 200
/// sets of 10,000 entries, 1.4 s of the new leader's time). Short: a
/// waiting call is answered within it, and the first sender's whole set
/// needs one round trip.
pub const AWAIT_WHOLE: Duration = Duration::from_millis(300);

/// A digest named that the receiver does not know (see
/// [`KnownSets::missed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// Nobody was asked for this set lately: this sender is (its answer
    /// refuses the digest, and the set follows whole).
    AskWhole,
    /// Another sender was asked for this set whole less than
    /// [`AWAIT_WHOLE`] ago: naming it again once that set came will be
    /// taken.
    Awaited,
}

/// The large sets a receiver was sent whole lately, by digest, shared by
/// all its senders: a few, most recent first; and the digests it asked a
/// sender for lately. A lookup is O(N) digest comparisons for N remembered
/// sets (at most [`KnownSets::CAPACITY`]); remembering a set costs its
/// digest, O(R).
#[derive(Debug, Clone)]
pub struct KnownSets<K: Ord + Clone, V: Clone> {
    sets: VecDeque<(Digest, OrdMap<K, V>)>,
    /// Digests refused lately, with when (the receiver's clock, ms): the
    /// set is awaited whole from the sender that named it first.
    asked: VecDeque<(Digest, u64)>,
}

impl<K: Ord + Clone, V: Clone> Default for KnownSets<K, V> {
    fn default() -> Self {
        KnownSets {
            sets: VecDeque::new(),
            asked: VecDeque::new(),
        }
    }
}

impl<K: Ord + Clone + Canonical, V: Clone + Canonical> KnownSets<K, V> {
    /// How many sets are remembered.
    pub const CAPACITY: usize = 8;

    /// Remembers `set` if it is large enough to be named by digest.
    pub fn remember(&mut self, set: &OrdMap<K, V>) {
        if set.len() < KNOWN_MIN_ENTRIES {
            return;
        }
        let named = digest(set);
        self.asked.retain(|(d, _)| *d != named);
        self.sets.retain(|(d, _)| *d != named);
        self.sets.push_front((named, set.clone()));
        self.sets.truncate(Self::CAPACITY);
    }

    /// The set named `digest`, if remembered (O(1) copy).
    pub fn get(&self, digest: &Digest) -> Option<OrdMap<K, V>> {
        self.sets
            .iter()
            .find(|(d, _)| d == digest)
            .map(|(_, set)| set.clone())
    }

    /// `digest` was named and is not known, at `now_ms`: whether a sender
    /// was asked for that set whole less than [`AWAIT_WHOLE`] ago
    /// ([`Missed::Awaited`]), or this one is asked now
    /// ([`Missed::AskWhole`], noted). When the asked sender's whole set
    /// does not come in time, the next sender naming it is asked. At most
    /// [`KnownSets::CAPACITY`] digests are awaited at once (the oldest
    /// forgotten: its namers are asked whole, as without the wait).
    pub fn missed(&mut self, digest: &Digest, now_ms: u64) -> Missed {
        let window = AWAIT_WHOLE.as_millis() as u64;
        if let Some((_, asked_ms)) = self.asked.iter().find(|(d, _)| d == digest)
            && now_ms.saturating_sub(*asked_ms) < window
        {
            return Missed::Awaited;
        }
        self.asked.retain(|(d, _)| d != digest);
        self.asked.push_front((*digest, now_ms));
        self.asked.truncate(Self::CAPACITY);
        Missed::AskWhole
    }
}

/// The sending side: what the receiver acknowledged, and the numbering.
#[derive(Debug, Clone)]
pub struct SetSender<K: Ord + Clone, V: Clone> {
    /// The set the receiver is known to hold, with its number.
    acked: Option<(u64, OrdMap<K, V>)>,
    /// The newest set prepared, with its number.
    last: Option<(u64, OrdMap<K, V>)>,
    /// The set whose digest was sent last and not (yet) taken: after a
    /// refusal it goes whole.
    named: Option<u64>,
    /// A set whose digest the receiver did not know: it goes whole.
    unknown: Option<u64>,
    /// The large set a receiver acknowledged last, kept when a receiver
    /// refused changes on it (a new leader): it is named first, by digest
    /// and else whole, and the changes since follow. A fleet's proxies
    /// were acknowledged the same sets by the old leader, so the new one
    /// takes this set by digest from every proxy but the first, however
    /// their current sets differ.
    previous: Option<(u64, OrdMap<K, V>)>,
    /// When the last exchange was answered (see [`SetSender::due`]).
    answered_at: Option<Instant>,
}

impl<K: Ord + Clone, V: Clone> Default for SetSender<K, V> {
    fn default() -> Self {
        SetSender {
            acked: None,
            last: None,
            named: None,
            unknown: None,
            previous: None,
            answered_at: None,
        }
    }
}

impl<K: Ord + Clone + Canonical, V: Clone + PartialEq + Canonical> SetSender<K, V> {
    /// What to send for `current`: while nothing is acknowledged, the set
    /// by its digest when it is large (and the receiver did not just
    /// refuse that digest), else whole; then the changes on the
    /// acknowledged set (possibly none: that still renews what the
    /// receiver holds), or again the digest when they would be a large
    /// change ([`is_large_change`]) and the receiver did not just refuse
    /// it. One walk of the changes, O(C log R), decides and lists them.
    pub fn prepare(&mut self, current: &OrdMap<K, V>) -> SetUpdate<K, V> {
        let seq = match &self.last {
            Some((seq, last)) if last.ptr_eq(current) || last == current => *seq,
            Some((seq, _)) => seq + 1,
            None => 1,
        };
        self.last = Some((seq, current.clone()));
        self.named = None;
        let Some((base, acked)) = &self.acked else {
            if let Some((previous_seq, previous)) = &self.previous {
                if self.unknown != Some(*previous_seq) {
                    self.named = Some(*previous_seq);
                    return SetUpdate::Known {
                        seq: *previous_seq,
                        digest: digest(previous),
                    };
                }
                // Whole, so the receiver remembers it for the next sender.
                return SetUpdate::Whole {
                    seq: *previous_seq,
                    entries: previous
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                };
            }
            if current.len() >= KNOWN_MIN_ENTRIES && self.unknown != Some(seq) {
                self.named = Some(seq);
                return SetUpdate::Known {
                    seq,
                    digest: digest(current),
                };
            }
            return SetUpdate::Whole {
                seq,
                entries: current
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            };
        };
        let mut upserted = Vec::new();
        let mut removed = Vec::new();
        for item in acked.diff(current) {
            match item {
                DiffItem::Add(k, v) | DiffItem::Update { new: (k, v), .. } => {
                    upserted.push((k.clone(), v.clone()));
                }
                DiffItem::Remove(k, _) => removed.push(k.clone()),
            }
        }
        if self.unknown != Some(seq)
            && is_large_change(upserted.len() + removed.len(), current.len())
        {
            // Most of the set changed at once (a first configuration after
            // an empty one, a bulk import): every sender of the fleet
            // makes the same jump, so the receiver likely holds the result
            // from another one already.
            self.named = Some(seq);
            return SetUpdate::Known {
                seq,
                digest: digest(current),
            };
        }
        SetUpdate::Changes {
            base: *base,
            seq,
            upserted,
            removed,
        }
    }

    /// The receiver's answer to the last prepared update: the sequence it
    /// now holds. Anything but that update's sequence (or the one already
    /// acknowledged) means it holds another set: the next update is whole.
    pub fn answered(&mut self, held: u64) {
        if let Some(named) = self.named.take()
            && named != held
        {
            self.unknown = Some(named);
        }
        if let Some((previous_seq, previous)) = self.previous.take() {
            if previous_seq == held && held != 0 {
                // Taken: the changes since go next.
                self.acked = Some((held, previous));
                self.unknown = None;
                return;
            }
            self.previous = Some((previous_seq, previous));
        }
        match (&self.last, &self.acked) {
            (Some((seq, set)), _) if *seq == held && held != 0 => {
                self.acked = Some((held, set.clone()));
                // Whoever holds the set next (a new leader) may know it.
                self.unknown = None;
                self.previous = None;
            }
            (_, Some((acked, _))) if *acked == held => {}
            _ => {
                // Another set is held: changes on the acknowledged one
                // were refused. A large one is named first.
                if let Some((seq, acked)) = self.acked.take()
                    && acked.len() >= KNOWN_MIN_ENTRIES
                {
                    self.previous = Some((seq, acked));
                }
            }
        }
    }

    /// Makes the set due at the next round whatever changed, as after a
    /// failed exchange (a new leader was named: it may hold this set, if
    /// it was sent it already, or not). The next update is changes on the
    /// set acknowledged; a receiver that does not hold that set refuses
    /// them, and [`SetSender::send`] follows with the digest or the whole.
    pub fn renew(&mut self) {
        self.answered_at = None;
    }

    /// Forgets what the receiver holds (a new registration): the next
    /// update is by digest or whole.
    pub fn reset(&mut self) {
        self.acked = None;
        self.unknown = None;
        self.previous = None;
        self.answered_at = None;
    }

    /// Whether a round should send `current` at `now`: the receiver is not
    /// known to hold it (it changed since the set acknowledged, or nothing
    /// is), or its copy is due for renewal (`renew_every` since the last
    /// exchange was answered, or that exchange failed: what it holds is
    /// only as fresh as its last word from this sender, and leases and
    /// evidence expire). A round woken by a change that left this set
    /// alone skips it: with a fleet behind one leader, that halves the
    /// calls a change costs.
    /// Equality is a diff that skips shared subtrees: O(1) for the same
    /// map, O(C log R) for one derived from the acknowledged set by C
    /// updates, O(R) at worst.
    pub fn due(&self, current: &OrdMap<K, V>, now: Instant, renew_every: Duration) -> bool {
        !self.holds(current)
            || self
                .renewal_at(renew_every)
                .is_none_or(|renew_at| now >= renew_at)
    }

    /// Whether the receiver acknowledged holding `current` (the set or
    /// an equal one): O(1) for the same map, O(C log R) for one derived
    /// from the acknowledged set by C updates, O(R) at worst.
    pub fn holds(&self, current: &OrdMap<K, V>) -> bool {
        matches!(&self.acked, Some((_, acked)) if acked.ptr_eq(current) || acked == current)
    }

    /// When the set the receiver holds is due for renewal (`None`: it
    /// holds nothing known, so any round sends).
    fn renewal_at(&self, renew_every: Duration) -> Option<Instant> {
        self.acked.as_ref()?;
        self.answered_at.map(|at| at + renew_every)
    }

    /// How long from `now` until the held set is due for renewal, at most
    /// `renew_every` (also when nothing is held: a sender's loop waits
    /// that long before trying again, never spins).
    pub fn until_renewal(&self, now: Instant, renew_every: Duration) -> Duration {
        self.renewal_at(renew_every)
            .map_or(renew_every, |at| at.saturating_duration_since(now))
            .min(renew_every)
    }

    /// Whether the next update will be whole.
    pub fn sends_whole(&self) -> bool {
        self.acked.is_none()
    }

    /// Sends `current` by `call` (by digest, whole or as changes) and
    /// notes the sequence its answer says the receiver holds; until the
    /// receiver holds `current`, sends again at once: changes not taken
    /// are followed by the digest or the whole set — of the set the last
    /// receiver acknowledged when it is large (then the changes since
    /// it), else of `current` — and a whole set is always taken. At most
    /// [`MAX_CALLS_PER_SEND`] calls; after them (a receiver that refuses
    /// whole sets) the set is simply due again. `call` answers with its
    /// own result and the sequence held; its error ends the exchange with
    /// nothing noted but that the set is due again ([`SetSender::due`]).
    pub async fn send<T, E, Fut>(
        &mut self,
        current: &OrdMap<K, V>,
        mut call: impl FnMut(SetUpdate<K, V>) -> Fut,
    ) -> Result<T, E>
    where
        Fut: Future<Output = Result<(T, u64), E>>,
    {
        let mut calls = 0;
        loop {
            let update = self.prepare(current);
            let whole = matches!(update, SetUpdate::Whole { .. });
            let seq = update.seq();
            let current_seq = self.last.as_ref().map_or(seq, |(seq, _)| *seq);
            calls += 1;
            let (answer, held) = match call(update).await {
                Ok(answered) => answered,
                Err(e) => {
                    // Whoever answers next may be another receiver (a
                    // failover): the set is due again, changed or not.
                    self.answered_at = None;
                    return Err(e);
                }
            };
            self.answered(held);
            // Counted from the answer, not the call: a renewal never
            // follows a slow answer at once, which under load would have
            // every sender calling back to back.
            self.answered_at = Some(Instant::now());
            // The receiver holds `current` (or was sent it whole, which is
            // always taken): done. Otherwise the next form goes at once.
            let sent_whole = whole && seq == current_seq;
            if held == current_seq || sent_whole || calls == MAX_CALLS_PER_SEND {
                return Ok(answer);
            }
        }
    }
}

/// A [`SetSender`] whose set is what a heartbeat lists beside a
/// configuration version (`HeartbeatRequest.applied_through`: the proxy
/// serves every active generation of that version, but the routes the set
/// lists). Owns the rule both the proxy and the load tool's agents follow:
/// the heartbeat is due when the set is ([`SetSender::due`]) or the version
/// moved since the receiver took one with the set it holds; the version is
/// noted as taken only when the receiver holds the set sent with it.
#[derive(Debug, Clone)]
pub struct VersionedSetSender<K: Ord + Clone, V: Clone> {
    set: SetSender<K, V>,
    /// The version the receiver took with the set it holds (0: none).
    through: u64,
}

impl<K: Ord + Clone, V: Clone> Default for VersionedSetSender<K, V> {
    fn default() -> Self {
        VersionedSetSender {
            set: SetSender::default(),
            through: 0,
        }
    }
}

impl<K: Ord + Clone + Canonical, V: Clone + PartialEq + Canonical> VersionedSetSender<K, V> {
    /// Whether a round should send `listed` with `through` at `now`.
    pub fn due(
        &self,
        listed: &OrdMap<K, V>,
        through: u64,
        now: Instant,
        renew_every: Duration,
    ) -> bool {
        self.set.due(listed, now, renew_every) || self.through != through
    }

    /// Sends `listed` by `call` as [`SetSender::send`] does (`call` puts
    /// `through` beside it); the version counts as taken once the answer
    /// shows the receiver holds `listed`.
    pub async fn send<T, E, Fut>(
        &mut self,
        listed: &OrdMap<K, V>,
        through: u64,
        call: impl FnMut(SetUpdate<K, V>) -> Fut,
    ) -> Result<T, E>
    where
        Fut: Future<Output = Result<(T, u64), E>>,
    {
        let answer = self.set.send(listed, call).await;
        if answer.is_ok() && self.set.holds(listed) {
            self.through = through;
        }
        answer
    }

    /// [`SetSender::renew`].
    pub fn renew(&mut self) {
        self.set.renew();
    }

    /// [`SetSender::reset`]: a new registration holds nothing, so the set
    /// goes (and the version with it) at the next round.
    pub fn reset(&mut self) {
        self.set.reset();
    }

    /// [`SetSender::until_renewal`].
    pub fn until_renewal(&self, now: Instant, renew_every: Duration) -> Duration {
        self.set.until_renewal(now, renew_every)
    }
}

#[cfg(test)]
mod tests;
