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
//! Cost: sets are persistent maps ([`imbl::OrdMap`]): keeping the
//! acknowledged copy is O(1), and the changes between it and the current
//! set are found by a walk that skips shared subtrees — O(C log R) for C
//! changes when the current set was derived from the acknowledged one by
//! C updates, O(R) at worst. The receiver's cost is O(C log R) per call.

use imbl::OrdMap;
use imbl::ordmap::DiffItem;
use std::future::Future;

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

    /// The sequence of the set this update makes.
    pub fn seq(&self) -> u64 {
        match self {
            SetUpdate::Whole { seq, .. } | SetUpdate::Changes { seq, .. } => *seq,
        }
    }
}

/// Changes that were not taken: the receiver holds another set than the
/// one they were made from. What it held is unchanged.
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
                let map: OrdMap<K, V> = entries.into_iter().collect();
                let changed = self
                    .map
                    .diff(&map)
                    .map(|item| match item {
                        DiffItem::Add(k, _) | DiffItem::Remove(k, _) => k.clone(),
                        DiffItem::Update { new: (k, _), .. } => k.clone(),
                    })
                    .collect();
                self.map = map;
                self.seq = seq;
                Ok(changed)
            }
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
                    if self.map.get(&key) != Some(&value) {
                        self.map.insert(key.clone(), value);
                        changed.push(key);
                    }
                }
                self.seq = seq;
                Ok(changed)
            }
        }
    }
}

/// The sending side: what the receiver acknowledged, and the numbering.
#[derive(Debug, Clone)]
pub struct SetSender<K: Ord + Clone, V: Clone> {
    /// The set the receiver is known to hold, with its number.
    acked: Option<(u64, OrdMap<K, V>)>,
    /// The newest set prepared, with its number.
    last: Option<(u64, OrdMap<K, V>)>,
}

impl<K: Ord + Clone, V: Clone> Default for SetSender<K, V> {
    fn default() -> Self {
        SetSender {
            acked: None,
            last: None,
        }
    }
}

impl<K: Ord + Clone, V: Clone + PartialEq> SetSender<K, V> {
    /// What to send for `current`: whole while nothing is acknowledged,
    /// else the changes on the acknowledged set (possibly none: that still
    /// renews what the receiver holds).
    pub fn prepare(&mut self, current: &OrdMap<K, V>) -> SetUpdate<K, V> {
        let seq = match &self.last {
            Some((seq, last)) if last.ptr_eq(current) || last == current => *seq,
            Some((seq, _)) => seq + 1,
            None => 1,
        };
        self.last = Some((seq, current.clone()));
        let Some((base, acked)) = &self.acked else {
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
        match (&self.last, &self.acked) {
            (Some((seq, set)), _) if *seq == held && held != 0 => {
                self.acked = Some((held, set.clone()));
            }
            (_, Some((acked, _))) if *acked == held => {}
            _ => self.acked = None,
        }
    }

    /// Forgets what the receiver holds (a new registration): the next
    /// update is whole.
    pub fn reset(&mut self) {
        self.acked = None;
    }

    /// Whether the next update will be whole.
    pub fn sends_whole(&self) -> bool {
        self.acked.is_none()
    }

    /// Sends `current` by `call` (whole or as changes) and notes the
    /// sequence its answer says the receiver holds; when changes were not
    /// taken, sends the whole set at once (a whole set is always taken, so
    /// this is at most two calls). `call` answers with its own result and
    /// the sequence held; its error ends the exchange with nothing noted.
    pub async fn send<T, E, Fut>(
        &mut self,
        current: &OrdMap<K, V>,
        mut call: impl FnMut(SetUpdate<K, V>) -> Fut,
    ) -> Result<T, E>
    where
        Fut: Future<Output = Result<(T, u64), E>>,
    {
        loop {
            let update = self.prepare(current);
            let changes = matches!(update, SetUpdate::Changes { .. });
            let (answer, held) = call(update).await?;
            self.answered(held);
            if !(changes && self.sends_whole()) {
                return Ok(answer);
            }
        }
    }
}

#[cfg(test)]
mod tests;
