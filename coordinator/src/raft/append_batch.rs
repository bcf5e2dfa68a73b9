//! One AppendEntries bounded by bytes, not only by entries.
//!
//! openraft batches replication by entry count (`max_payload_entries`), and
//! a new leader probes each follower's log from the middle of its own: one
//! request can carry that many of the largest entries (a bulk import's
//! thousand objects, a group of 64 applies). Encoded whole, such a request
//! took seconds to build, send and decode on a busy machine, ran past the
//! RPC deadline, and was built again and again: a leader elected after a
//! burst of updates went 15 s without a quorum, and past the gRPC message
//! limit a follower could never catch up from the log at all.
//!
//! Owns: encoding a request as the JSON the peer's `RaftService` decodes
//! (openraft's own serde form), with only the leading entries that fit a
//! byte budget (always at least one), and the reply openraft must see for
//! what was sent: a follower's `Success` for a prefix is openraft's
//! `PartialSuccess` up to its last entry, so the next request starts
//! after it. Does not own: sending (`super::network`) or retries
//! (openraft's).

use super::types::{LogId, NodeId, TypeConfig};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};

/// An AppendEntries request encoded for the wire, maybe with only a prefix
/// of its entries.
pub(super) struct AppendBatch {
    /// The request's JSON, as `serde_json` would encode the request cut to
    /// [`AppendBatch::entries_sent`] entries.
    pub json: Vec<u8>,
    /// The last entry sent, when some were left out.
    cut_after: Option<LogId>,
    sent: usize,
}

impl AppendBatch {
    /// Encodes `request` with its leading entries while their JSON stays
    /// within `budget` bytes; the first entry goes whatever its size (a
    /// request must carry something to make progress). O(bytes sent),
    /// plus the encoding of at most one entry left out.
    pub fn encode(
        request: &AppendEntriesRequest<TypeConfig>,
        budget: usize,
    ) -> serde_json::Result<AppendBatch> {
        let mut json = Vec::with_capacity(256);
        json.extend_from_slice(b"{\"vote\":");
        serde_json::to_writer(&mut json, &request.vote)?;
        json.extend_from_slice(b",\"prev_log_id\":");
        serde_json::to_writer(&mut json, &request.prev_log_id)?;
        json.extend_from_slice(b",\"leader_commit\":");
        serde_json::to_writer(&mut json, &request.leader_commit)?;
        json.extend_from_slice(b",\"entries\":[");
        let entries_start = json.len();
        let mut sent = 0;
        for entry in &request.entries {
            let before = json.len();
            if sent > 0 {
                json.push(b',');
            }
            serde_json::to_writer(&mut json, entry)?;
            if sent > 0 && json.len() - entries_start > budget {
                json.truncate(before);
                break;
            }
            sent += 1;
        }
        json.extend_from_slice(b"]}");
        let cut_after = (sent < request.entries.len()).then(|| request.entries[sent - 1].log_id);
        Ok(AppendBatch {
            json,
            cut_after,
            sent,
        })
    }

    /// How many of the request's entries the JSON carries.
    pub fn entries_sent(&self) -> usize {
        self.sent
    }

    /// What openraft is told the follower answered: its `Success` for a
    /// cut request is a partial success up to the last entry sent; every
    /// other answer concerns the request's start and stands as it is.
    pub fn reply(&self, reply: AppendEntriesResponse<NodeId>) -> AppendEntriesResponse<NodeId> {
        match (reply, self.cut_after) {
            (AppendEntriesResponse::Success, Some(last)) => {
                AppendEntriesResponse::PartialSuccess(Some(last))
            }
            (reply, _) => reply,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Command;
    use openraft::{CommittedLeaderId, EntryPayload, Vote};

    fn log_id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(3, 1), index)
    }

    /// Entries 1..=n, each a registration whose id is `size` bytes long.
    fn request(n: u64, size: usize) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(3, 1),
            prev_log_id: Some(log_id(0)),
            leader_commit: Some(log_id(0)),
            entries: (1..=n)
                .map(|i| openraft::Entry {
                    log_id: log_id(i),
                    payload: EntryPayload::Normal(std::sync::Arc::new(Command::RegisterProxy {
                        id: format!("{i:0>size$}"),
                        zone: "zone-a".into(),
                        admin_address: "127.0.0.1:1".into(),
                    })),
                })
                .collect(),
        }
    }

    /// What the peer's service decodes from the batch.
    fn decoded(batch: &AppendBatch) -> AppendEntriesRequest<TypeConfig> {
        serde_json::from_slice(&batch.json).expect("the peer decodes it")
    }

    fn indexes(request: &AppendEntriesRequest<TypeConfig>) -> Vec<u64> {
        request.entries.iter().map(|e| e.log_id.index).collect()
    }

    #[test]
    fn a_request_within_the_budget_goes_whole_as_serde_encodes_it() {
        let request = request(5, 100);
        let batch = AppendBatch::encode(&request, 1 << 20).unwrap();
        assert_eq!(batch.entries_sent(), 5);
        assert_eq!(
            serde_json::to_value(decoded(&batch)).unwrap(),
            serde_json::to_value(&request).unwrap()
        );
        assert_eq!(
            batch.reply(AppendEntriesResponse::Success),
            AppendEntriesResponse::Success
        );
    }

    #[test]
    fn a_request_over_the_budget_sends_the_entries_that_fit_and_reports_partial_success() {
        let request = request(10, 1000);
        // Each entry's JSON is a little over 1,000 bytes: three fit in 3,500.
        let batch = AppendBatch::encode(&request, 3500).unwrap();
        assert_eq!(batch.entries_sent(), 3);
        let sent = decoded(&batch);
        assert_eq!(indexes(&sent), vec![1, 2, 3]);
        assert_eq!(sent.vote, request.vote);
        assert_eq!(sent.prev_log_id, request.prev_log_id);
        assert_eq!(sent.leader_commit, request.leader_commit);
        assert_eq!(
            batch.reply(AppendEntriesResponse::Success),
            AppendEntriesResponse::PartialSuccess(Some(log_id(3)))
        );
        // A conflict or a higher vote concerns the request's start: as is.
        assert_eq!(
            batch.reply(AppendEntriesResponse::Conflict),
            AppendEntriesResponse::Conflict
        );
        assert_eq!(
            batch.reply(AppendEntriesResponse::HigherVote(Vote::new(4, 2))),
            AppendEntriesResponse::HigherVote(Vote::new(4, 2))
        );
    }

    #[test]
    fn an_entry_larger_than_the_budget_goes_alone() {
        let request = request(3, 5000);
        let batch = AppendBatch::encode(&request, 100).unwrap();
        assert_eq!(indexes(&decoded(&batch)), vec![1]);
        assert_eq!(
            batch.reply(AppendEntriesResponse::Success),
            AppendEntriesResponse::PartialSuccess(Some(log_id(1)))
        );
    }

    #[test]
    fn a_heartbeat_carries_no_entries_and_its_success_stands() {
        let request = request(0, 0);
        let batch = AppendBatch::encode(&request, 100).unwrap();
        assert_eq!(batch.entries_sent(), 0);
        assert!(decoded(&batch).entries.is_empty());
        assert_eq!(
            batch.reply(AppendEntriesResponse::Success),
            AppendEntriesResponse::Success
        );
    }
}
