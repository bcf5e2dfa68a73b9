//! The log store serves its newest entries from memory (decoded once, when
//! appended) and older ones from sled: whichever it is, a read gives
//! exactly what a read of the same log from disk gives — through appends,
//! a truncated suffix and a purged prefix, and after the store is opened
//! again with nothing in memory.

use openraft::storage::{RaftLogReaderExt, RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, EntryPayload, RaftLogReader};
use std::sync::Arc;
use switchyard_coordinator::raft::open;
use switchyard_coordinator::raft::types::{Entry, LogId};
use switchyard_coordinator::state::Command;

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(Arc::new(Command::RegisterProxy {
            id: format!("proxy-{term}-{index}"),
            zone: "zone-a".into(),
            admin_address: "127.0.0.1:1".into(),
        })),
    }
}

/// Each entry as its log id and JSON, to compare reads whole.
fn described(entries: &[Entry]) -> Vec<(LogId, String)> {
    entries
        .iter()
        .map(|e| {
            (
                e.log_id,
                serde_json::to_string(e).expect("an entry encodes"),
            )
        })
        .collect()
}

#[tokio::test]
async fn reads_from_memory_equal_reads_of_the_same_log_from_disk() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let expected = {
        let mut stores = open(dir.path())?;
        stores
            .log
            .blocking_append((1..=20).map(|i| entry(1, i)))
            .await?;
        // A follower's conflicting suffix is cut and written again.
        stores.log.truncate(log_id(1, 15)).await?;
        stores
            .log
            .blocking_append((15..=18).map(|i| entry(2, i)))
            .await?;
        stores.log.purge(log_id(1, 4)).await?;

        let mut reader = stores.log.get_log_reader().await;
        let all = reader.try_get_log_entries(5..=18).await?;
        assert_eq!(
            all.iter().map(|e| e.log_id).collect::<Vec<_>>(),
            (5..=14)
                .map(|i| log_id(1, i))
                .chain((15..=18).map(|i| log_id(2, i)))
                .collect::<Vec<_>>(),
            "the truncated entries are gone, the purged ones too"
        );
        assert_eq!(reader.try_get_log_entries(1..5).await?, vec![], "purged");
        assert_eq!(
            described(&reader.try_get_log_entries(12..).await?),
            described(&all[7..]),
            "an unbounded range ends at the last entry"
        );
        assert_eq!(
            described(&[reader.get_log_entries(16..17).await?.remove(0)]),
            described(&[entry(2, 16)])
        );
        assert_eq!(
            stores.log.get_log_state().await?.last_log_id,
            Some(log_id(2, 18))
        );
        described(&all)
    };
    // Opened again: nothing in memory, every entry read from sled.
    let mut stores = open(dir.path())?;
    let mut reader = stores.log.get_log_reader().await;
    assert_eq!(
        described(&reader.try_get_log_entries(5..=18).await?),
        expected
    );
    // New entries after the reopen are served from memory again, and a
    // range that starts on disk and ends in memory is whole.
    stores
        .log
        .blocking_append((19..=21).map(|i| entry(2, i)))
        .await?;
    let mut reader = stores.log.get_log_reader().await;
    let read = reader.try_get_log_entries(10..=21).await?;
    assert_eq!(
        read.iter().map(|e| e.log_id.index).collect::<Vec<_>>(),
        (10..=21).collect::<Vec<_>>()
    );
    assert_eq!(described(&read[..9]), expected[5..]);
    assert_eq!(
        described(&read[9..]),
        described(&(19..=21).map(|i| entry(2, i)).collect::<Vec<_>>())
    );
    Ok(())
}
