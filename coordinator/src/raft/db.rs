//! The sled database under the Raft store: opening it, its trees and keys,
//! and the small amount of cluster metadata kept next to the log.
//!
//! Owns: the on-disk layout (which tree holds what, how keys are encoded),
//! exclusive access to the data directory, and the store-level error type.
//! Does not own: what the log or state machine mean — [`super::log_store`]
//! and [`super::state_store`] implement openraft's traits on top of these
//! trees. Nothing outside `raft::db`, `raft::log_store` and
//! `raft::state_store` touches sled, so the engine can be swapped here.
//!
//! Layout (one sled database per coordinator data directory):
//!
//! | tree    | key                         | value                                   |
//! | ------- | --------------------------- | --------------------------------------- |
//! | `logs`  | log index, big-endian `u64` | JSON of the openraft `Entry`            |
//! | `meta`  | `vote`                      | JSON of the last saved `Vote`           |
//! | `meta`  | `committed`                 | JSON of the last saved committed log id |
//! | `meta`  | `last_purged`               | JSON of the last purged log id          |
//! | `meta`  | `formation`                 | JSON of the cluster [`Formation`]       |
//! | `sm`    | `applied`, `membership`, `position` | state machine: last applied log id, last membership, the state's `last_index`/`last_term` |
//! | `sm`    | `o/<kind>/<JSON key>`        | one object of the state: resource, route record, proxy, endpoint generation ([`super::sm_objects`]) |
//! | `sm`    | `snapshot_meta`             | the current snapshot's openraft meta (JSON); its data is the file `snapshots/<id>.json` ([`super::snapshots`]) |
//!
//! The previous layout kept the whole `ReplicatedState` as one JSON value
//! under `sm`/`state` and the snapshot's data under `sm`/`snapshot_data`;
//! opening such a directory migrates it (see [`super::state_store`]).
//!
//! Big-endian index keys make sled's lexicographic order the log order, so
//! range scans and `last()` walk the log without decoding keys.

// `StorageError` is openraft's type, fixed by the storage traits; boxing it
// in private helpers would only add conversions at every trait boundary.
#![allow(clippy::result_large_err)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use openraft::{AnyError, ErrorSubject, ErrorVerb, StorageIOError};
use serde::{Deserialize, Serialize};

use super::types::{NodeId, StorageError};

pub(crate) const KEY_VOTE: &[u8] = b"vote";
pub(crate) const KEY_COMMITTED: &[u8] = b"committed";
pub(crate) const KEY_LAST_PURGED: &[u8] = b"last_purged";
const KEY_FORMATION: &[u8] = b"formation";
pub(crate) const KEY_APPLIED: &[u8] = b"applied";
pub(crate) const KEY_MEMBERSHIP: &[u8] = b"membership";
/// The previous layout's whole state (read to migrate, then removed).
pub(crate) const KEY_STATE: &[u8] = b"state";
pub(crate) const KEY_SNAPSHOT_META: &[u8] = b"snapshot_meta";
/// The previous layout's snapshot data (moved to its file at open).
pub(crate) const KEY_SNAPSHOT_DATA: &[u8] = b"snapshot_data";

/// Why the store could not be opened or used outside openraft's traits.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process (or another open handle) holds the directory's lock.
    #[error(
        "data directory {path} is locked by another process (is another coordinator using it?): {reason}"
    )]
    Locked {
        /// The data directory.
        path: PathBuf,
        /// sled's message.
        reason: String,
    },
    /// sled failed to open or read the database.
    #[error("sled store at {path}: {what}: {cause}")]
    Sled {
        /// The data directory.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// sled's error.
        cause: sled::Error,
    },
    /// The store was closed (the node shut down).
    #[error("sled store at {path} is closed")]
    Closed {
        /// The data directory.
        path: PathBuf,
    },
    /// A stored value does not decode.
    #[error("sled store at {path}: corrupt {what}: {reason}")]
    Corrupt {
        /// The data directory.
        path: PathBuf,
        /// Which value.
        what: &'static str,
        /// The decode error.
        reason: String,
    },
}

/// The cluster a node belongs to, fixed when the node formed or joined it.
///
/// `peers` is the initial membership given by `--peers` at formation (or the
/// one adopted from the leader by a node that joined later); `fingerprint`
/// is its short hash, sent with every Raft RPC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Formation {
    /// Short hash of `peers` (see [`super::fingerprint`]).
    pub fingerprint: String,
    /// The initial membership as `id=addr` pairs, sorted by id, comma separated.
    pub peers: String,
}

/// An open sled database and its trees. Shared (behind `Arc`) by the log
/// store, the state store and the cluster metadata; the directory lock is
/// released when the last of them is dropped.
pub(crate) struct Db {
    pub(crate) path: PathBuf,
    pub(crate) db: sled::Db,
    pub(crate) logs: sled::Tree,
    pub(crate) meta: sled::Tree,
    pub(crate) sm: sled::Tree,
}

impl Db {
    /// Opens (creating if needed) the database in `path`.
    pub(crate) fn open(path: &Path) -> Result<Arc<Db>, StoreError> {
        let db = sled::Config::new().path(path).open().map_err(|e| match e {
            // sled reports a held `flock` as a generic IO error; its message is
            // the only way to tell it apart from other IO failures.
            sled::Error::Io(ref io) if io.to_string().contains("could not acquire lock") => {
                StoreError::Locked {
                    path: path.to_path_buf(),
                    reason: io.to_string(),
                }
            }
            source => StoreError::Sled {
                path: path.to_path_buf(),
                what: "open",
                cause: source,
            },
        })?;
        let tree = |name: &'static str| {
            db.open_tree(name).map_err(|source| StoreError::Sled {
                path: path.to_path_buf(),
                what: "open tree",
                cause: source,
            })
        };
        Ok(Arc::new(Db {
            path: path.to_path_buf(),
            logs: tree("logs")?,
            meta: tree("meta")?,
            sm: tree("sm")?,
            db,
        }))
    }

    /// Flushes every tree and fsyncs. When this returns `Ok`, every write
    /// made before the call survives a crash (sled's `flush_async` contract).
    pub(crate) async fn flush(&self) -> Result<(), sled::Error> {
        self.db.flush_async().await.map(|_bytes| ())
    }
}

/// Handle to the cluster metadata kept in the store (the [`Formation`]).
///
/// Holds the database weakly: the RaftService (which may outlive a node's
/// shutdown inside a server) must not keep the directory locked. Once the
/// log and state stores are dropped, its operations fail with
/// [`StoreError::Closed`].
#[derive(Clone)]
pub struct ClusterMetaStore {
    db: Weak<Db>,
    path: PathBuf,
}

impl ClusterMetaStore {
    pub(crate) fn new(db: &Arc<Db>) -> Self {
        ClusterMetaStore {
            db: Arc::downgrade(db),
            path: db.path.clone(),
        }
    }

    fn db(&self) -> Result<Arc<Db>, StoreError> {
        self.db.upgrade().ok_or_else(|| StoreError::Closed {
            path: self.path.clone(),
        })
    }

    /// The formation recorded at first start or at first contact, if any.
    pub fn load_formation(&self) -> Result<Option<Formation>, StoreError> {
        let db = self.db()?;
        let raw = db
            .meta
            .get(KEY_FORMATION)
            .map_err(|source| StoreError::Sled {
                path: self.path.clone(),
                what: "read formation",
                cause: source,
            })?;
        raw.map(|bytes| {
            serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                path: self.path.clone(),
                what: "formation",
                reason: e.to_string(),
            })
        })
        .transpose()
    }

    /// Records the formation durably (flushed before returning).
    pub async fn save_formation(&self, formation: &Formation) -> Result<(), StoreError> {
        let db = self.db()?;
        let json = serde_json::to_vec(formation).map_err(|e| StoreError::Corrupt {
            path: self.path.clone(),
            what: "formation",
            reason: e.to_string(),
        })?;
        let sled_err = |what| {
            let path = self.path.clone();
            move |source| StoreError::Sled {
                path,
                what,
                cause: source,
            }
        };
        db.meta
            .insert(KEY_FORMATION, json)
            .map_err(sled_err("write formation"))?;
        db.flush().await.map_err(sled_err("flush formation"))
    }
}

/// The file of a data directory that sled holds an exclusive `flock` on
/// while the database is open (sled's `Config::db_path`). A test opens a
/// store and checks that this is the file it locks, so a sled upgrade that
/// moves the lock cannot go unnoticed.
pub const LOCK_FILE: &str = "db";

/// Observes whether the store is still open somewhere in this process, so a
/// shutdown can wait until the directory lock is really released before the
/// same directory is opened again.
///
/// # Correctness
///
/// "No handle left" is not "closed": the strong count of the shared `Db`
/// reaches zero *before* the last handle's drop runs sled's own (it flushes,
/// fsyncs and joins sled's flusher thread, possibly on another thread), and
/// sled's IO threads can hold the locked file a moment longer still. Only
/// when the directory's lock can be taken is the store closed, so
/// [`StoreLiveness::is_open`] checks both.
#[derive(Clone)]
pub struct StoreLiveness {
    db: Weak<Db>,
    lock_file: PathBuf,
}

impl StoreLiveness {
    pub(crate) fn new(db: &Arc<Db>) -> Self {
        StoreLiveness {
            db: Arc::downgrade(db),
            lock_file: db.path.join(LOCK_FILE),
        }
    }

    /// True while any log store, state store or metadata handle is alive,
    /// or while sled still holds the directory's lock.
    pub fn is_open(&self) -> bool {
        self.db.strong_count() > 0 || lock_held(&self.lock_file)
    }
}

/// Whether someone holds the exclusive `flock` sled takes on `path`: a
/// probe on a descriptor of its own (flock locks belong to the open file,
/// so sled's lock in this same process blocks it), released at once by
/// closing it. A file that cannot be opened holds no lock.
fn lock_held(path: &Path) -> bool {
    match std::fs::File::open(path) {
        Ok(file) => matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

/// The sled key of log index `index`: big-endian so byte order is log order.
pub(crate) fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// Decodes a key written by [`index_key`].
pub(crate) fn key_index(key: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(key).ok().map(u64::from_be_bytes)
}

/// A storage IO error for openraft, with subject and verb.
pub(crate) fn io_error(
    subject: ErrorSubject<NodeId>,
    verb: ErrorVerb,
    source: impl std::fmt::Display,
) -> StorageError {
    StorageIOError::new(subject, verb, AnyError::error(source)).into()
}

/// Reads a JSON value from `tree`, mapping failures to openraft errors.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    tree: &sled::Tree,
    key: &[u8],
    subject: ErrorSubject<NodeId>,
) -> Result<Option<T>, StorageError> {
    let raw = tree
        .get(key)
        .map_err(|e| io_error(subject.clone(), ErrorVerb::Read, e))?;
    raw.map(|bytes| {
        serde_json::from_slice(&bytes).map_err(|e| io_error(subject, ErrorVerb::Read, e))
    })
    .transpose()
}

/// Encodes `value` as JSON, mapping failures to openraft errors.
pub(crate) fn to_json<T: Serialize>(
    value: &T,
    subject: ErrorSubject<NodeId>,
) -> Result<Vec<u8>, StorageError> {
    serde_json::to_vec(value).map_err(|e| io_error(subject, ErrorVerb::Write, e))
}

/// Everything [`open`] hands out for one data directory.
pub struct Stores {
    /// openraft's log store.
    pub log: super::log_store::LogStore,
    /// openraft's state machine store.
    pub state: super::state_store::StateStore,
    /// The cluster formation record.
    pub cluster: ClusterMetaStore,
    /// Tells when every handle above has been dropped.
    pub liveness: StoreLiveness,
}

/// Opens the Raft store in `path` (creating it on first use). Fails with
/// [`StoreError::Locked`] when another process has it open.
pub fn open(path: &Path) -> Result<Stores, StoreError> {
    let db = Db::open(path)?;
    let state =
        super::state_store::StateStore::open(db.clone()).map_err(|e| StoreError::Corrupt {
            path: path.to_path_buf(),
            what: "state machine",
            reason: e.to_string(),
        })?;
    Ok(Stores {
        log: super::log_store::LogStore::new(db.clone()),
        state,
        cluster: ClusterMetaStore::new(&db),
        liveness: StoreLiveness::new(&db),
    })
}
