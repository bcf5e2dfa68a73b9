//! Snapshots: openraft's [`RaftSnapshotBuilder`], the record of the current
//! snapshot in sled, and snapshot data as files in the data directory
//! (`snapshots/`), so a snapshot is written, sent, received and installed
//! as a stream and never held whole in memory next to the state, and so
//! rewriting it does not churn sled (whose large values become blob files
//! reclaimed only lazily).
//!
//! Owns: where a snapshot's file lives (named by its snapshot id), writing
//! one durably (temporary file, fsync, rename, fsync of the directory),
//! the anonymous file a snapshot is received into, removing files no
//! record names, the `snapshot_meta` record (switched only once the file
//! is durable), and moving a snapshot of the old layout (data inside sled,
//! `snapshot_data`) to its file. Does not own: installing a snapshot into
//! the state machine — [`super::state_store`] does that.

// `StorageError` is openraft's type, fixed by the storage traits.
#![allow(clippy::result_large_err)]

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use openraft::{ErrorSubject, ErrorVerb, RaftSnapshotBuilder};

use super::db::{Db, KEY_SNAPSHOT_DATA, KEY_SNAPSHOT_META, io_error, read_json, to_json};
use super::state_store::Applied;
use super::types::{Snapshot, SnapshotMeta, StorageError, TypeConfig};
use crate::state::ReplicatedState;

/// The `snapshots/` directory of one data directory.
#[derive(Debug, Clone)]
pub(crate) struct SnapshotFiles {
    dir: PathBuf,
}

impl SnapshotFiles {
    pub(crate) fn new(data_dir: &Path) -> Self {
        SnapshotFiles {
            dir: data_dir.join("snapshots"),
        }
    }

    /// The file of the snapshot `meta` describes. Snapshot ids are ours
    /// (`term-node-index-seq`) or a leader's; anything but `[A-Za-z0-9._-]`
    /// is replaced so an id can never name a path outside the directory.
    pub(crate) fn path_of(&self, meta: &SnapshotMeta) -> PathBuf {
        let name: String = meta
            .snapshot_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{name}.json"))
    }

    /// Writes the snapshot file of `meta` with `fill` and makes it durable:
    /// a crash leaves either no file or the whole one. Returns its size.
    pub(crate) fn write(
        &self,
        meta: &SnapshotMeta,
        fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<u64> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path_of(meta);
        let partial = path.with_extension("partial");
        let file = File::create(&partial)?;
        let mut out = BufWriter::new(file);
        fill(&mut out)?;
        let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        let size = file.metadata()?.len();
        std::fs::rename(&partial, &path)?;
        File::open(&self.dir)?.sync_all()?;
        Ok(size)
    }

    /// Opens the snapshot file of `meta` for reading.
    pub(crate) fn open(&self, meta: &SnapshotMeta) -> io::Result<File> {
        File::open(self.path_of(meta))
    }

    /// A new, empty file to receive a snapshot into, already unlinked: it
    /// disappears when dropped, and a crash leaves nothing behind.
    pub(crate) fn receiving(&self) -> io::Result<File> {
        std::fs::create_dir_all(&self.dir)?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir
            .join(format!("receiving-{}-{n}.partial", std::process::id()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(file)
    }

    /// Removes the file of `replaced` (a snapshot record just superseded)
    /// unless it is also `current`'s. Best effort: a file left over is
    /// removed at the next open.
    pub(crate) fn remove_replaced(&self, replaced: Option<&SnapshotMeta>, current: &SnapshotMeta) {
        if let Some(old) = replaced {
            let old = self.path_of(old);
            if old != self.path_of(current) {
                let _ = std::fs::remove_file(old);
            }
        }
    }

    /// Removes every file but `current`'s (left over by a crash or by a
    /// superseded snapshot). Run at open, before anything else uses the
    /// directory.
    pub(crate) fn remove_all_but(&self, current: Option<&SnapshotMeta>) -> io::Result<()> {
        let keep = current.map(|meta| self.path_of(meta));
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let path = entry?.path();
            if Some(&path) != keep.as_ref() {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    }
}

fn snapshot_error(meta: &SnapshotMeta, verb: ErrorVerb, e: impl std::fmt::Display) -> StorageError {
    io_error(ErrorSubject::Snapshot(Some(meta.signature())), verb, e)
}

/// The record of the current snapshot, if any.
pub(crate) fn current_meta(db: &Db) -> Result<Option<SnapshotMeta>, StorageError> {
    read_json(&db.sm, KEY_SNAPSHOT_META, ErrorSubject::Snapshot(None))
}

/// Decodes the state from a snapshot's data (the JSON of the state), read
/// as a stream.
pub(crate) fn decode_state(
    meta: &SnapshotMeta,
    data: impl Read,
) -> Result<ReplicatedState, StorageError> {
    serde_json::from_reader(BufReader::new(data))
        .map_err(|e| snapshot_error(meta, ErrorVerb::Read, e))
}

/// Reads the state of the current snapshot from its file.
pub(crate) fn read_state(
    files: &SnapshotFiles,
    meta: &SnapshotMeta,
) -> Result<ReplicatedState, StorageError> {
    let file = files
        .open(meta)
        .map_err(|e| snapshot_error(meta, ErrorVerb::Read, e))?;
    decode_state(meta, file)
}

/// Prepares the snapshot directory at open: a snapshot of the old layout
/// (its data inside sled) is written to its file first, and only then
/// removed from sled; files no record names are removed.
pub(crate) fn open_files(db: &Db) -> Result<SnapshotFiles, StorageError> {
    let files = SnapshotFiles::new(&db.path);
    let meta = current_meta(db)?;
    if let Some(meta) = &meta {
        let legacy = db
            .sm
            .get(KEY_SNAPSHOT_DATA)
            .map_err(|e| snapshot_error(meta, ErrorVerb::Read, e))?;
        if let Some(data) = legacy {
            tracing::info!(snapshot = %meta.snapshot_id, "moving the snapshot out of sled into its file");
            files
                .write(meta, |out| out.write_all(&data))
                .map_err(|e| snapshot_error(meta, ErrorVerb::Write, e))?;
            db.sm
                .remove(KEY_SNAPSHOT_DATA)
                .map_err(|e| snapshot_error(meta, ErrorVerb::Write, e))?;
        }
    }
    files
        .remove_all_but(meta.as_ref())
        .map_err(|e| io_error(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
    Ok(files)
}

/// The current snapshot, opened for reading (openraft sends it in chunks).
pub(crate) async fn open_current(
    db: &Db,
    files: &SnapshotFiles,
) -> Result<Option<Snapshot>, StorageError> {
    let Some(meta) = current_meta(db)? else {
        return Ok(None);
    };
    let file = files
        .open(&meta)
        .map_err(|e| snapshot_error(&meta, ErrorVerb::Read, e))?;
    Ok(Some(Snapshot {
        meta,
        snapshot: Box::new(tokio::fs::File::from_std(file)),
    }))
}

/// Records `meta` as the current snapshot built here, unless a newer one
/// is already recorded: a snapshot built in the background can finish after
/// the node installed a newer one from the leader, and that older one must
/// not replace it. `Some(replaced)` when recorded, `None` when not.
fn record_built(
    db: &Db,
    meta: &SnapshotMeta,
) -> Result<Option<Option<SnapshotMeta>>, StorageError> {
    let meta_json = to_json(meta, ErrorSubject::Snapshot(Some(meta.signature())))?;
    let result = db.sm.transaction(|tx| {
        let current = tx
            .get(KEY_SNAPSHOT_META)?
            .and_then(|current| serde_json::from_slice::<SnapshotMeta>(&current).ok());
        if current
            .as_ref()
            .is_some_and(|current| current.last_log_id > meta.last_log_id)
        {
            return Ok(None);
        }
        tx.insert(KEY_SNAPSHOT_META, meta_json.as_slice())?;
        Ok(Some(current))
    });
    result.map_err(|e: sled::transaction::TransactionError<()>| {
        snapshot_error(meta, ErrorVerb::Write, format!("{e:?}"))
    })
}

/// Builds a snapshot from a copy of the state taken when openraft asked for
/// a builder (an O(1) clone: the state's maps are persistent), so applying
/// continues while the snapshot is written.
pub struct SnapshotBuilder {
    pub(crate) db: Arc<Db>,
    pub(crate) files: SnapshotFiles,
    pub(crate) applied: Applied,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    /// # Correctness
    ///
    /// The snapshot file is written and fsynced, then its record is stored
    /// in sled and flushed before this returns, because openraft may purge
    /// the log up to the snapshot right after: the snapshot must then be on
    /// disk for a restart to restore the state those entries built. The
    /// JSON is streamed to the file on a blocking thread; it is never held
    /// whole in memory.
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
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
        let (files, state, for_file) =
            (self.files.clone(), self.applied.state.clone(), meta.clone());
        let bytes = tokio::task::spawn_blocking(move || {
            files.write(&for_file, |out| {
                serde_json::to_writer(out, &state).map_err(io::Error::other)
            })
        })
        .await
        .map_err(|e| snapshot_error(&meta, ErrorVerb::Write, e))?
        .map_err(|e| snapshot_error(&meta, ErrorVerb::Write, e))?;
        let opened = self
            .files
            .open(&meta)
            .map_err(|e| snapshot_error(&meta, ErrorVerb::Read, e))?;
        match record_built(&self.db, &meta)? {
            Some(replaced) => {
                self.db
                    .flush()
                    .await
                    .map_err(|e| snapshot_error(&meta, ErrorVerb::Write, e))?;
                self.files.remove_replaced(replaced.as_ref(), &meta);
            }
            // A newer snapshot is current: ours is handed to openraft
            // (the open file stays readable) and its file goes at once.
            None => {
                let _ = std::fs::remove_file(self.files.path_of(&meta));
            }
        }
        tracing::info!(snapshot = %meta.snapshot_id, bytes, "built snapshot");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(opened)),
        })
    }
}
