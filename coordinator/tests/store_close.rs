//! The Raft store counts as closed only once its data directory can be
//! opened again: [`StoreLiveness`] (what `Node::shutdown` waits on) says
//! "open" while sled still holds the directory's lock, even with no handle
//! of ours left. Before, it said "closed" as soon as the last handle's drop
//! began — while sled was still flushing and holding the lock — and a
//! restart in the same process right after a shutdown sometimes found the
//! directory locked (`cluster.rs`,
//! `start_refuses_peers_without_self_and_a_locked_store`).
//!
//! [`StoreLiveness`]: switchyard_coordinator::raft::db::StoreLiveness

use std::fs::{File, TryLockError};
use std::path::Path;
use std::time::Duration;
use switchyard_coordinator::raft::db::LOCK_FILE;
use switchyard_coordinator::raft::open;
use switchyard_test_support::eventually_blocking;

/// Whether a descriptor of our own cannot take the lock sled takes.
fn locked(dir: &Path) -> anyhow::Result<bool> {
    let file = File::open(dir.join(LOCK_FILE))?;
    Ok(matches!(file.try_lock(), Err(TryLockError::WouldBlock)))
}

#[test]
fn the_store_is_open_while_its_directory_is_locked() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let stores = open(dir.path())?;
    let liveness = stores.liveness.clone();
    // sled locks exactly this file while the store is open.
    assert!(locked(dir.path())?, "sled does not lock {LOCK_FILE}");
    assert!(liveness.is_open());

    drop(stores);
    // sled's IO threads may hold the file a moment after the drop.
    eventually_blocking("the store to close", Duration::from_secs(10), || {
        !liveness.is_open()
    })?;
    assert!(!locked(dir.path())?, "closed, but the directory is locked");

    // No handle left, but the directory still locked — as while the last
    // handle's drop is still inside sled's: the store is not closed yet.
    let holder = File::open(dir.path().join(LOCK_FILE))?;
    holder.lock()?;
    assert!(liveness.is_open(), "called closed while the lock is held");
    drop(holder);
    assert!(!liveness.is_open());

    // Closed means the directory opens again.
    drop(open(dir.path())?);
    Ok(())
}
