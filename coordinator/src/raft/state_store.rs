//! The state machine on sled: openraft's [`RaftStateMachine`] (snapshots
//! are built and stored by [`super::snapshots`]).
//!
//! Owns: feeding committed entries to [`ReplicatedState::apply`], persisting
//! the result in tree `sm` — last applied log id, last membership, and only
//! the objects the batch touched ([`super::sm_objects`] keeps the state per
//! object) — installing a received snapshot (a snapshot's data is the
//! JSON of the state, in a file), migrating a data directory of the old layout (the
//! whole state as one JSON value under `state`), and publishing the state
//! after every apply on a `tokio::sync::watch` channel. Does not own: what a
//! command does — `apply` is the lead's pure function, treated here as a
//! black box; it records which keys it touched, and the store drains that.

// `StorageError` is openraft's type, fixed by the storage traits; boxing it
// in private helpers would only add conversions at every trait boundary.
#![allow(clippy::result_large_err)]

use std::io::{Seek, SeekFrom};
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, OptionalSend};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use super::db::{
    Db, KEY_APPLIED, KEY_MEMBERSHIP, KEY_SNAPSHOT_META, KEY_STATE, io_error, read_json, to_json,
};
use super::sm_objects::{self, BatchSize, ObjectBatch};
use super::snapshots::{self, SnapshotBuilder, SnapshotFiles};
use super::types::{
    Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use crate::state::{CommandResponse, LogPosition, Outcome, ReplicatedState};

/// What the state machine holds in memory (and mirrors in sled).
#[derive(Debug, Clone, Default)]
pub(crate) struct Applied {
    pub(crate) last_applied: Option<LogId>,
    pub(crate) last_membership: StoredMembership,
    pub(crate) state: ReplicatedState,
}

/// The state machine store. Owned by openraft's state-machine worker.
pub struct StateStore {
    db: Arc<Db>,
    files: SnapshotFiles,
    applied: Applied,
    published: watch::Sender<Arc<ReplicatedState>>,
    written: WriteStats,
}

/// What the store wrote to sled for the state machine since it opened
/// (apply batches, installs, migrations): the cost of a change, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Batches written.
    pub batches: u64,
    /// The last batch.
    pub last: BatchSize,
    /// All batches together.
    pub total: BatchSize,
}

impl StateStore {
    /// Loads the state machine from sled: the persisted objects, or the
    /// stored snapshot when that is newer (a snapshot is flushed when made;
    /// the state written by `apply` may lag it after a crash). A directory
    /// of the old layout (the whole state under `state`) is migrated to one
    /// key per object in one atomic batch; so is a state restored from the
    /// snapshot, since later applies write only what they touch.
    pub(crate) fn open(db: Arc<Db>) -> Result<Self, StorageError> {
        let subject = || ErrorSubject::StateMachine;
        let files = snapshots::open_files(&db)?;
        let old_layout: Option<ReplicatedState> = read_json(&db.sm, KEY_STATE, subject())?;
        let mut rewrite = old_layout.is_some();
        let state = match old_layout {
            Some(state) => state,
            None => sm_objects::load(&db.sm)?.unwrap_or_default(),
        };
        let mut applied = Applied {
            last_applied: read_json(&db.sm, KEY_APPLIED, subject())?.flatten(),
            last_membership: read_json(&db.sm, KEY_MEMBERSHIP, subject())?.unwrap_or_default(),
            state,
        };
        if let Some(meta) = snapshots::current_meta(&db)?
            && meta.last_log_id > applied.last_applied
        {
            tracing::info!(
                snapshot = %meta.snapshot_id,
                "state machine behind its snapshot; restoring from the snapshot"
            );
            applied = Applied {
                last_applied: meta.last_log_id,
                last_membership: meta.last_membership.clone(),
                state: snapshots::read_state(&files, &meta)?,
            };
            rewrite = true;
        }
        let (published, _) = watch::channel(Arc::new(applied.state.clone()));
        let mut store = StateStore {
            db,
            files,
            applied,
            published,
            written: WriteStats::default(),
        };
        if rewrite {
            tracing::info!("writing the state machine one key per object");
            let mut batch = ObjectBatch::default();
            batch.whole(&store.db.sm, &store.applied.state)?;
            // The old layout's value goes in the same atomic step.
            batch.batch.remove(KEY_STATE);
            write(&store.db, &mut store.written, &store.applied, batch)?;
        }
        Ok(store)
    }

    /// What the store wrote since it opened.
    pub fn written(&self) -> WriteStats {
        self.written
    }

    /// A receiver of the state after every apply (and after a snapshot
    /// install). It holds the current state at once.
    pub fn subscribe(&self) -> watch::Receiver<Arc<ReplicatedState>> {
        self.published.subscribe()
    }

    fn publish(&self) {
        self.published
            .send_replace(Arc::new(self.applied.state.clone()));
    }

    /// Writes what the last applies touched.
    fn persist(&mut self) -> Result<(), StorageError> {
        let touched = self.applied.state.touched.take();
        let mut batch = ObjectBatch::default();
        batch.touched(&self.applied.state, &touched)?;
        write(&self.db, &mut self.written, &self.applied, batch)
    }
}

/// Writes `objects` with `applied`'s log id and membership as one atomic
/// batch, and counts it in `written`.
fn write(
    db: &Db,
    written: &mut WriteStats,
    applied: &Applied,
    mut objects: ObjectBatch,
) -> Result<(), StorageError> {
    let subject = || ErrorSubject::StateMachine;
    objects.meta(KEY_APPLIED, to_json(&applied.last_applied, subject())?);
    objects.meta(
        KEY_MEMBERSHIP,
        to_json(&applied.last_membership, subject())?,
    );
    let size = objects.size;
    db.sm
        .apply_batch(objects.batch)
        .map_err(|e| io_error(subject(), ErrorVerb::Write, e))?;
    written.batches += 1;
    written.last = size;
    written.total.keys += size.keys;
    written.total.bytes += size.bytes;
    Ok(())
}

impl RaftStateMachine<TypeConfig> for StateStore {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((
            self.applied.last_applied,
            self.applied.last_membership.clone(),
        ))
    }

    /// # Correctness
    ///
    /// Each entry is applied in log order with [`ReplicatedState::apply`]
    /// (pure and total: a rejected command is a valid response, not an
    /// error). The resulting state, last applied log id and membership are
    /// then written as one atomic sled batch, without an fsync of their own:
    /// the entries are already durable in the log, and a restart that finds
    /// an older state re-applies them (openraft re-applies up to the
    /// persisted committed id, then the leader tells it the rest). sled
    /// recovers a prefix of its writes, so the three values stay consistent.
    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CommandResponse>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries = entries.into_iter();
        let mut responses = Vec::with_capacity(entries.size_hint().0);
        for entry in entries {
            self.applied.last_applied = Some(entry.log_id);
            // The term travels with the index: the state machine's fence on
            // leader decisions compares it with the deciding term.
            let at = LogPosition::new(entry.log_id.index, entry.log_id.leader_id.get_term());
            let response = match entry.payload {
                // Blank entries (a new leader's first) and membership changes
                // are Raft's own; the state machine has nothing to decide,
                // but records the position (a new leader waits for its
                // blank entry before judging anything).
                EntryPayload::Blank => {
                    self.applied.state.note_entry(at);
                    CommandResponse(Ok(Outcome::default()))
                }
                EntryPayload::Normal(command) => self.applied.state.apply(at, &command),
                EntryPayload::Membership(membership) => {
                    self.applied.state.note_entry(at);
                    self.applied.last_membership =
                        StoredMembership::new(Some(entry.log_id), membership);
                    CommandResponse(Ok(Outcome::default()))
                }
            };
            responses.push(response);
        }
        self.persist()?;
        self.publish();
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            db: self.db.clone(),
            files: self.files.clone(),
            applied: self.applied.clone(),
        }
    }

    /// An anonymous file in `snapshots/`: the chunks are written to disk as
    /// they arrive, and an abandoned transfer leaves nothing behind.
    async fn begin_receiving_snapshot(&mut self) -> Result<Box<tokio::fs::File>, StorageError> {
        let file = self
            .files
            .receiving()
            .map_err(|e| io_error(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        Ok(Box::new(tokio::fs::File::from_std(file)))
    }

    /// # Correctness
    ///
    /// The received file is decoded first, as a stream (a bad snapshot
    /// changes nothing), and copied to its own durable file; then the
    /// snapshot record and the replaced state machine (every object) are
    /// written in one atomic sled batch and flushed before this returns:
    /// openraft purges the log the snapshot covers right after, so the
    /// snapshot must be on disk.
    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        mut snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError> {
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        let failed = |verb| move |e: std::io::Error| io_error(subject(), verb, e);
        snapshot.flush().await.map_err(failed(ErrorVerb::Write))?;
        let mut received = snapshot.into_std().await;
        received
            .seek(SeekFrom::Start(0))
            .map_err(failed(ErrorVerb::Seek))?;
        let state = snapshots::decode_state(meta, &mut received)?;
        received
            .seek(SeekFrom::Start(0))
            .map_err(failed(ErrorVerb::Seek))?;
        self.files
            .write(meta, |out| std::io::copy(&mut received, out).map(|_| ()))
            .map_err(failed(ErrorVerb::Write))?;
        let replaced = snapshots::current_meta(&self.db)?;
        let installed = Applied {
            last_applied: meta.last_log_id,
            last_membership: meta.last_membership.clone(),
            state,
        };
        let mut batch = ObjectBatch::default();
        batch.whole(&self.db.sm, &installed.state)?;
        batch.meta(KEY_SNAPSHOT_META, to_json(meta, subject())?);
        write(&self.db, &mut self.written, &installed, batch)?;
        self.applied = installed;
        self.db
            .flush()
            .await
            .map_err(|e| io_error(subject(), ErrorVerb::Write, e))?;
        self.files.remove_replaced(replaced.as_ref(), meta);
        tracing::info!(snapshot = %meta.snapshot_id, "installed snapshot");
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        snapshots::open_current(&self.db, &self.files).await
    }
}
