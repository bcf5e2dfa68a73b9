//! openraft's storage contract (`openraft::testing::Suite`) run against the
//! sled store, each case in a fresh temporary directory.

use openraft::StorageError;
use openraft::testing::{StoreBuilder, Suite};
use switchyard_coordinator::raft::{LogStore, StateStore, TypeConfig, open};
use tempfile::TempDir;

/// Opens a fresh store per case; the guard keeps its directory alive.
struct SledBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateStore, TempDir> for SledBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateStore), StorageError<u64>> {
        let dir = tempfile::tempdir().map_err(setup_error)?;
        let stores = open(dir.path()).map_err(setup_error)?;
        Ok((dir, stores.log, stores.state))
    }
}

fn setup_error(e: impl std::fmt::Display) -> StorageError<u64> {
    openraft::StorageIOError::<u64>::write(openraft::AnyError::error(e)).into()
}

#[test]
fn openraft_storage_suite_passes_on_sled() -> anyhow::Result<()> {
    Suite::test_all(SledBuilder)?;
    Ok(())
}
