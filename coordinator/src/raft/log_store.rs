//! The Raft log and vote on sled: openraft's [`RaftLogStorage`] and
//! [`RaftLogReader`].
//!
//! Owns: log entries (tree `logs`, big-endian index keys, JSON values), the
//! vote, the committed log id and the last purged log id (tree `meta`), and
//! when each of them is made durable. The newest entries are also kept
//! decoded (`super::recent_entries`) and read from there. Does not own:
//! applying entries (that is [`super::state_store`]) or deciding what to
//! append, truncate or purge (openraft does).
//!
//! Every write method runs to completion — including its fsync where one is
//! needed — before it returns, so write IO is serialized as openraft
//! requires: a later write never overtakes an earlier one.

// `StorageError` is openraft's type, fixed by the storage traits; boxing it
// in private helpers would only add conversions at every trait boundary.
#![allow(clippy::result_large_err)]

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader};

use super::db::{
    Db, KEY_COMMITTED, KEY_LAST_PURGED, KEY_VOTE, index_key, io_error, key_index, read_json,
    to_json,
};
use super::recent_entries::RecentEntries;
use super::types::{Entry, LogId, LogState, StorageError, TypeConfig, Vote};

/// The log store. Cheap to clone: clones share the sled trees, which is how
/// openraft's replication tasks get their own readers.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Db>,
    /// The newest entries, decoded; shared by the clones like the trees.
    recent: Arc<Mutex<RecentEntries>>,
}

impl LogStore {
    pub(crate) fn new(db: Arc<Db>) -> Self {
        LogStore {
            db,
            recent: Arc::default(),
        }
    }

    fn recent(&self) -> MutexGuard<'_, RecentEntries> {
        // Every change to the cache completes under the lock; one that
        // panicked left it as consistent as the last completed change.
        self.recent.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn flush(&self, subject: ErrorSubject<u64>) -> Result<(), StorageError> {
        self.db
            .flush()
            .await
            .map_err(|e| io_error(subject, ErrorVerb::Write, e))
    }

    fn last_purged(&self) -> Result<Option<LogId>, StorageError> {
        read_json(&self.db.meta, KEY_LAST_PURGED, ErrorSubject::Store)
    }

    fn decode_entry(key: &[u8], value: &[u8]) -> Result<Entry, StorageError> {
        let entry: Entry = serde_json::from_slice(value)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
        // The key is derived from the entry when it is written; a mismatch
        // means the tree was written by something else and must not be
        // trusted.
        if key_index(key) != Some(entry.log_id.index) {
            return Err(io_error(
                ErrorSubject::Logs,
                ErrorVerb::Read,
                format!(
                    "log key {key:?} does not match entry index {}",
                    entry.log_id.index
                ),
            ));
        }
        Ok(entry)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => match i.checked_add(1) {
                Some(i) => i,
                None => return Ok(Vec::new()),
            },
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => i.saturating_add(1),
            Bound::Excluded(&i) => i,
            Bound::Unbounded => u64::MAX,
        };
        if let Some(entries) = self.recent().range(start, end) {
            return Ok(entries);
        }
        let mut entries = Vec::new();
        for item in self.db.logs.range(index_key(start)..) {
            let (key, value) =
                item.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
            let entry = Self::decode_entry(&key, &value)?;
            if !range.contains(&entry.log_id.index) {
                break;
            }
            entries.push(entry);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState, StorageError> {
        let last = match self
            .db
            .logs
            .last()
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))?
        {
            Some((key, value)) => Some(Self::decode_entry(&key, &value)?.log_id),
            None => None,
        };
        let last_purged_log_id = self.last_purged()?;
        Ok(LogState {
            last_purged_log_id,
            // With every entry purged, the last log id is the last purged one.
            last_log_id: last.or(last_purged_log_id),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    /// # Correctness
    ///
    /// The vote is inserted and then `sled::Db::flush_async` (which fsyncs)
    /// is awaited before this returns, so a vote granted to a candidate is
    /// never forgotten by a crash. The flush covers every earlier write too,
    /// which keeps vote and log IO in order.
    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let json = to_json(vote, ErrorSubject::Vote)?;
        self.db
            .meta
            .insert(KEY_VOTE, json)
            .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, e))?;
        self.flush(ErrorSubject::Vote).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        read_json(&self.db.meta, KEY_VOTE, ErrorSubject::Vote)
    }

    /// # Correctness
    ///
    /// Written but not flushed on its own: the committed log id only lets a
    /// restarted node re-apply entries it knows are committed before it hears
    /// from a leader. Losing the latest value in a crash means re-applying
    /// fewer entries at start, never applying an uncommitted one, because
    /// sled recovers a prefix of the writes and every append is flushed.
    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let json = to_json(&committed, ErrorSubject::Store)?;
        self.db
            .meta
            .insert(KEY_COMMITTED, json)
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(
            read_json::<Option<LogId>>(&self.db.meta, KEY_COMMITTED, ErrorSubject::Store)?
                .flatten(),
        )
    }

    /// # Correctness
    ///
    /// The entries are written as one atomic sled batch (readable as soon as
    /// it is applied, as openraft requires when `append` returns), then
    /// `sled::Db::flush_async().await` fsyncs them, and only after it
    /// returned `Ok` is the `LogFlushed` callback called. openraft counts an
    /// entry towards a quorum, and so acknowledges it, only after that
    /// callback, so an acknowledged entry is on disk. The flush is awaited
    /// inline (not in a spawned task) so callbacks fire in append order and
    /// no later write overtakes this one. Keys are the entries' own indexes
    /// and openraft appends right after the last entry, so no hole appears.
    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = sled::Batch::default();
        let mut written = Vec::new();
        for entry in entries {
            let json = to_json(&entry, ErrorSubject::Logs)?;
            written.push((entry.clone(), json.len()));
            batch.insert(&index_key(entry.log_id.index), json);
        }
        self.db
            .logs
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Write, e))?;
        // Readable from the cache only once sled holds them too, so a
        // reader never sees an entry the log does not have.
        {
            let mut recent = self.recent();
            for (entry, json_len) in written {
                recent.appended(entry, json_len);
            }
        }
        match self.db.flush().await {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let message = e.to_string();
                callback.log_io_completed(Err(io::Error::other(message.clone())));
                Err(io_error(ErrorSubject::Logs, ErrorVerb::Write, message))
            }
        }
    }

    /// # Correctness
    ///
    /// Removes `[log_id.index, ..)` as one atomic sled batch, so a crash
    /// leaves either the old or the new suffix, never a hole, then flushes
    /// so a truncated (conflicting) entry cannot reappear after a restart.
    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(%log_id, "truncating log from this entry on");
        self.recent().truncated(log_id.index);
        let mut batch = sled::Batch::default();
        for key in self.db.logs.range(index_key(log_id.index)..).keys() {
            let key = key.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
            batch.remove(key);
        }
        self.db
            .logs
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Write, e))?;
        self.flush(ErrorSubject::Logs).await
    }

    /// # Correctness
    ///
    /// Records `last_purged` first and removes `[.., log_id.index]` after it
    /// in one atomic batch. sled recovers a prefix of the writes in order, so
    /// after a crash either nothing changed or `last_purged` already covers
    /// every removed entry — the log never starts with an unexplained gap.
    /// Purged entries are all inside a snapshot, so losing the purge itself
    /// is harmless; it is flushed anyway to bound disk use.
    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(%log_id, "purging log up to this entry");
        self.recent().purged(log_id.index);
        let json = to_json(&log_id, ErrorSubject::Store)?;
        self.db
            .meta
            .insert(KEY_LAST_PURGED, json)
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        let mut batch = sled::Batch::default();
        for key in self.db.logs.range(..=index_key(log_id.index)).keys() {
            let key = key.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
            batch.remove(key);
        }
        self.db
            .logs
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Write, e))?;
        self.flush(ErrorSubject::Logs).await
    }
}
