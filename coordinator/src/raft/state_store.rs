//! The state machine and its snapshots on sled: openraft's
//! [`RaftStateMachine`] and [`RaftSnapshotBuilder`].
//!
//! Owns: feeding committed entries to [`ReplicatedState::apply`], persisting
//! the result (last applied log id, last membership, the state as JSON) in
//! tree `sm`, building and installing snapshots (a snapshot's data is the
//! JSON of the state), and publishing the state after every apply on a
//! `tokio::sync::watch` channel. Does not own: what a command does — `apply`
//! is the lead's pure function, treated here as a black box.

// `StorageError` is openraft's type, fixed by the storage traits; boxing it
// in private helpers would only add conversions at every trait boundary.
#![allow(clippy::result_large_err)]

use std::io::Cursor;
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder};
use tokio::sync::watch;

use super::db::{
    Db, KEY_APPLIED, KEY_MEMBERSHIP, KEY_SNAPSHOT_DATA, KEY_SNAPSHOT_META, KEY_STATE, io_error,
    read_json, to_json,
};
use super::types::{
    Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use crate::state::{CommandResponse, LogPosition, Outcome, ReplicatedState};

/// What the state machine holds in memory (and mirrors in sled).
#[derive(Debug, Clone, Default)]
struct Applied {
    last_applied: Option<LogId>,
    last_membership: StoredMembership,
    state: ReplicatedState,
}

/// The state machine store. Owned by openraft's state-machine worker.
pub struct StateStore {
    db: Arc<Db>,
    applied: Applied,
    published: watch::Sender<Arc<ReplicatedState>>,
}

impl StateStore {
    /// Loads the state machine from sled: the persisted state, or the stored
    /// snapshot when that is newer (a snapshot is flushed when made; the
    /// state written by `apply` may lag it after a crash).
    pub(crate) fn open(db: Arc<Db>) -> Result<Self, StorageError> {
        let subject = || ErrorSubject::StateMachine;
        let mut applied = Applied {
            last_applied: read_json(&db.sm, KEY_APPLIED, subject())?.flatten(),
            last_membership: read_json(&db.sm, KEY_MEMBERSHIP, subject())?.unwrap_or_default(),
            state: read_json(&db.sm, KEY_STATE, subject())?.unwrap_or_default(),
        };
        if let Some(snapshot) = read_snapshot(&db)?
            && snapshot.meta.last_log_id > applied.last_applied
        {
            tracing::info!(
                snapshot = %snapshot.meta.snapshot_id,
                "state machine behind its snapshot; restoring from the snapshot"
            );
            applied = Applied {
                last_applied: snapshot.meta.last_log_id,
                last_membership: snapshot.meta.last_membership.clone(),
                state: decode_state(&snapshot.meta, snapshot.snapshot.get_ref())?,
            };
        }
        let (published, _) = watch::channel(Arc::new(applied.state.clone()));
        Ok(StateStore {
            db,
            applied,
            published,
        })
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

    /// Writes the in-memory state machine to sled as one atomic batch.
    fn persist(&self) -> Result<(), StorageError> {
        let subject = || ErrorSubject::StateMachine;
        let mut batch = sled::Batch::default();
        batch.insert(KEY_APPLIED, to_json(&self.applied.last_applied, subject())?);
        batch.insert(
            KEY_MEMBERSHIP,
            to_json(&self.applied.last_membership, subject())?,
        );
        batch.insert(KEY_STATE, to_json(&self.applied.state, subject())?);
        self.db
            .sm
            .apply_batch(batch)
            .map_err(|e| io_error(subject(), ErrorVerb::Write, e))
    }
}

/// Decodes a snapshot's data (the JSON of the state).
fn decode_state(meta: &SnapshotMeta, data: &[u8]) -> Result<ReplicatedState, StorageError> {
    serde_json::from_slice(data).map_err(|e| {
        io_error(
            ErrorSubject::Snapshot(Some(meta.signature())),
            ErrorVerb::Read,
            e,
        )
    })
}

/// The stored snapshot, if any.
fn read_snapshot(db: &Db) -> Result<Option<Snapshot>, StorageError> {
    let meta: Option<SnapshotMeta> =
        read_json(&db.sm, KEY_SNAPSHOT_META, ErrorSubject::Snapshot(None))?;
    let Some(meta) = meta else {
        return Ok(None);
    };
    let data = db
        .sm
        .get(KEY_SNAPSHOT_DATA)
        .map_err(|e| {
            io_error(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Read,
                e,
            )
        })?
        .ok_or_else(|| {
            io_error(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Read,
                "snapshot metadata present but data missing",
            )
        })?;
    Ok(Some(Snapshot {
        meta,
        snapshot: Box::new(Cursor::new(data.to_vec())),
    }))
}

/// Stores `meta` and `data` as the current snapshot, atomically with `extra`
/// (the state written by an install). Returns false, writing nothing, when
/// `only_if_newer` is set and a newer snapshot is already stored.
///
/// A snapshot built in the background can finish after the node installed a
/// newer one from the leader; that older one must not replace it. An install
/// is authoritative and replaces whatever is stored.
fn store_snapshot(
    db: &Db,
    meta: &SnapshotMeta,
    data: &[u8],
    extra: &[(&[u8], Vec<u8>)],
    only_if_newer: bool,
) -> Result<bool, StorageError> {
    let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
    let meta_json = to_json(meta, subject())?;
    let result = db.sm.transaction(|tx| {
        if let Some(current) = tx.get(KEY_SNAPSHOT_META)?.filter(|_| only_if_newer) {
            let newer = serde_json::from_slice::<SnapshotMeta>(&current)
                .map(|current| current.last_log_id > meta.last_log_id)
                .unwrap_or(false);
            if newer {
                return Ok(false);
            }
        }
        tx.insert(KEY_SNAPSHOT_META, meta_json.as_slice())?;
        tx.insert(KEY_SNAPSHOT_DATA, data)?;
        for (key, value) in extra {
            tx.insert(*key, value.as_slice())?;
        }
        Ok(true)
    });
    result.map_err(|e: sled::transaction::TransactionError<()>| {
        io_error(subject(), ErrorVerb::Write, format!("{e:?}"))
    })
}

/// Builds a snapshot from a copy of the state taken when openraft asked for
/// a builder, so applying continues while the snapshot is serialized.
pub struct SnapshotBuilder {
    db: Arc<Db>,
    applied: Applied,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    /// # Correctness
    ///
    /// The snapshot (metadata and data) is stored in one sled transaction and
    /// flushed before this returns, because openraft may purge the log up to
    /// the snapshot right after: the snapshot must then be on disk for a
    /// restart to restore the state those entries built.
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let data = serde_json::to_vec(&self.applied.state)
            .map_err(|e| io_error(ErrorSubject::StateMachine, ErrorVerb::Read, e))?;
        // sled ids are unique and increase across restarts, which keeps
        // snapshot ids unique even for the same last log id.
        let seq = self
            .db
            .db
            .generate_id()
            .map_err(|e| io_error(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        let snapshot_id = match &self.applied.last_applied {
            Some(last) => format!("{}-{}-{seq}", last.leader_id, last.index),
            None => format!("none-{seq}"),
        };
        let meta = SnapshotMeta {
            last_log_id: self.applied.last_applied,
            last_membership: self.applied.last_membership.clone(),
            snapshot_id,
        };
        if store_snapshot(&self.db, &meta, &data, &[], true)? {
            self.db.flush().await.map_err(|e| {
                io_error(
                    ErrorSubject::Snapshot(Some(meta.signature())),
                    ErrorVerb::Write,
                    e,
                )
            })?;
        }
        tracing::info!(snapshot = %meta.snapshot_id, bytes = data.len(), "built snapshot");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
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
            applied: self.applied.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    /// # Correctness
    ///
    /// The received data is decoded first (a bad snapshot changes nothing),
    /// then the snapshot and the replaced state machine are written in one
    /// sled transaction and flushed before this returns: openraft purges the
    /// log the snapshot covers right after, so the snapshot must be on disk.
    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let state = decode_state(meta, &data)?;
        let installed = Applied {
            last_applied: meta.last_log_id,
            last_membership: meta.last_membership.clone(),
            state,
        };
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        let extra = [
            (KEY_APPLIED, to_json(&installed.last_applied, subject())?),
            (
                KEY_MEMBERSHIP,
                to_json(&installed.last_membership, subject())?,
            ),
            (KEY_STATE, to_json(&installed.state, subject())?),
        ];
        store_snapshot(&self.db, meta, &data, &extra, false)?;
        self.db
            .flush()
            .await
            .map_err(|e| io_error(subject(), ErrorVerb::Write, e))?;
        tracing::info!(snapshot = %meta.snapshot_id, "installed snapshot");
        self.applied = installed;
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        read_snapshot(&self.db)
    }
}
