//! The newest log entries, kept decoded next to the log on disk.
//!
//! Every entry is read back soon after it is appended: by the state
//! machine when it is committed, and on the leader by each follower's
//! replication task. Read from sled, each of those reads decoded the
//! entry's JSON again (a profile of the leader at 10,000 routes under 128
//! clients' updates: about 6 % of its CPU went to decoding log entries).
//! An entry's command is shared (`Arc`), so handing out a kept entry is a
//! count, not a copy.
//!
//! Owns: which entries are kept — always a run of consecutive indexes
//! ending at the log's last entry, as written — and its bounds
//! ([`RecentEntries::MAX_ENTRIES`], [`RecentEntries::MAX_BYTES`] of their
//! JSON). Does not own: the log itself ([`super::log_store`] writes sled
//! first and tells this cache after, so whatever is kept is also on disk),
//! or when entries are truncated or purged (openraft decides).

use std::collections::VecDeque;

use super::types::Entry;

/// A run of the log's newest entries, oldest first.
#[derive(Default)]
pub(super) struct RecentEntries {
    /// The entries with the size of each one's JSON.
    entries: VecDeque<(Entry, usize)>,
    /// The sum of those sizes.
    bytes: usize,
}

impl RecentEntries {
    /// At most this many entries are kept (the log's newest): replication
    /// and the state machine read within the last few hundred.
    pub const MAX_ENTRIES: usize = 1024;
    /// And at most this many bytes of their JSON (a bulk import's entries
    /// are large; decoded, an entry takes a few times its JSON).
    pub const MAX_BYTES: usize = 16 * 1024 * 1024;

    /// Index of the oldest entry kept.
    fn first(&self) -> Option<u64> {
        self.entries.front().map(|(e, _)| e.log_id.index)
    }

    /// Index of the newest entry kept.
    fn last(&self) -> Option<u64> {
        self.entries.back().map(|(e, _)| e.log_id.index)
    }

    /// Keeps `entry`, just written to the log with `json_len` bytes of
    /// JSON. An entry that does not follow the newest kept one (a log
    /// never written through this cache, or a hole) starts the run anew,
    /// so the run stays consecutive.
    pub fn appended(&mut self, entry: Entry, json_len: usize) {
        if self
            .last()
            .is_some_and(|last| last + 1 != entry.log_id.index)
        {
            self.clear();
        }
        self.bytes += json_len;
        self.entries.push_back((entry, json_len));
        while self.entries.len() > Self::MAX_ENTRIES
            || (self.bytes > Self::MAX_BYTES && self.entries.len() > 1)
        {
            self.drop_oldest();
        }
    }

    /// The log lost `[index, ..)` (a conflicting suffix).
    pub fn truncated(&mut self, index: u64) {
        while self.last().is_some_and(|last| last >= index) {
            if let Some((_, len)) = self.entries.pop_back() {
                self.bytes -= len;
            }
        }
    }

    /// The log lost `[.., index]` (it is inside a snapshot).
    pub fn purged(&mut self, index: u64) {
        while self.first().is_some_and(|first| first <= index) {
            self.drop_oldest();
        }
    }

    /// The entries of `[start, end)` if the run holds `start`: those of
    /// them kept (the run ends at the log's last entry, so none of the
    /// range is missing after it). `None` when `start` is older than the
    /// run, or nothing is kept: read the log.
    pub fn range(&self, start: u64, end: u64) -> Option<Vec<Entry>> {
        let first = self.first()?;
        let last = self.last()?;
        if start < first || start > last {
            return None;
        }
        let from = (start - first) as usize;
        let to = (end.min(last + 1).max(start) - first) as usize;
        Some(
            self.entries
                .range(from..to)
                .map(|(entry, _)| entry.clone())
                .collect(),
        )
    }

    fn drop_oldest(&mut self) {
        if let Some((_, len)) = self.entries.pop_front() {
            self.bytes -= len;
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Command;
    use openraft::{CommittedLeaderId, EntryPayload, LogId};
    use std::sync::Arc;

    fn entry(index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(Arc::new(Command::RegisterProxy {
                id: format!("p{index}"),
                zone: "zone-a".into(),
                admin_address: "127.0.0.1:1".into(),
            })),
        }
    }

    fn indexes(entries: Option<Vec<Entry>>) -> Option<Vec<u64>> {
        entries.map(|e| e.iter().map(|e| e.log_id.index).collect())
    }

    fn kept(first: u64, last: u64) -> RecentEntries {
        let mut recent = RecentEntries::default();
        for i in first..=last {
            recent.appended(entry(i), 10);
        }
        recent
    }

    #[test]
    fn a_range_starting_inside_the_run_is_served_up_to_the_log_s_end() {
        let recent = kept(5, 9);
        assert_eq!(indexes(recent.range(5, 10)), Some(vec![5, 6, 7, 8, 9]));
        assert_eq!(indexes(recent.range(7, 9)), Some(vec![7, 8]));
        // Past the last entry there is nothing in the log either.
        assert_eq!(indexes(recent.range(8, u64::MAX)), Some(vec![8, 9]));
        assert_eq!(indexes(recent.range(6, 6)), Some(vec![]));
    }

    #[test]
    fn a_range_starting_before_the_run_or_after_it_goes_to_the_log() {
        let recent = kept(5, 9);
        assert_eq!(indexes(recent.range(4, 10)), None);
        assert_eq!(indexes(recent.range(10, 12)), None);
        assert_eq!(indexes(RecentEntries::default().range(0, 3)), None);
    }

    #[test]
    fn truncating_and_purging_drop_what_the_log_dropped() {
        let mut recent = kept(1, 10);
        recent.truncated(8);
        assert_eq!(indexes(recent.range(1, u64::MAX)), Some((1..=7).collect()));
        recent.purged(3);
        assert_eq!(indexes(recent.range(4, u64::MAX)), Some(vec![4, 5, 6, 7]));
        assert_eq!(indexes(recent.range(3, u64::MAX)), None, "purged");
        // A new suffix after the truncation continues the run.
        recent.appended(entry(8), 10);
        assert_eq!(indexes(recent.range(7, u64::MAX)), Some(vec![7, 8]));
        assert_eq!(recent.bytes, 50);
    }

    #[test]
    fn an_entry_that_does_not_follow_the_run_starts_a_new_one() {
        let mut recent = kept(1, 4);
        recent.appended(entry(9), 10);
        assert_eq!(indexes(recent.range(1, 10)), None);
        assert_eq!(indexes(recent.range(9, 10)), Some(vec![9]));
        assert_eq!(recent.bytes, 10);
    }

    #[test]
    fn the_run_is_bounded_by_count_and_by_bytes_keeping_the_newest() {
        let recent = kept(1, RecentEntries::MAX_ENTRIES as u64 + 5);
        assert_eq!(recent.entries.len(), RecentEntries::MAX_ENTRIES);
        assert_eq!(recent.first(), Some(6));

        let mut recent = RecentEntries::default();
        let big = RecentEntries::MAX_BYTES / 3 + 1;
        for i in 1..=4 {
            recent.appended(entry(i), big);
        }
        assert_eq!(indexes(recent.range(3, 5)), Some(vec![3, 4]));
        assert_eq!(indexes(recent.range(2, 5)), None);
        // One entry larger than the bound is still kept: it is the newest.
        recent.appended(entry(5), RecentEntries::MAX_BYTES * 2);
        assert_eq!(indexes(recent.range(5, 6)), Some(vec![5]));
    }
}
