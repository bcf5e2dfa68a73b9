//! The `Watch` contract across versions: bytes written by a proxy or
//! coordinator from before deltas and chunks decode under today's types
//! (the new fields at their "old behaviour" defaults), and today's
//! updates decode under the old types with the fields those knew intact.

use prost::Message;
use switchyard_proto::pb;

/// `WatchRequest` as it was before `accepts_deltas`.
#[derive(Clone, PartialEq, prost::Message)]
struct OldWatchRequest {
    #[prost(string, tag = "1")]
    proxy_id: String,
    #[prost(uint64, tag = "2")]
    known_version: u64,
}

/// `ConfigUpdate` as it was before deltas and chunks.
#[derive(Clone, PartialEq, prost::Message)]
struct OldConfigUpdate {
    #[prost(uint64, tag = "1")]
    version: u64,
    #[prost(bytes = "vec", tag = "2")]
    snapshot_json: Vec<u8>,
    #[prost(uint64, tag = "3")]
    coordinator_id: u64,
}

#[test]
fn an_old_proxys_watch_request_asks_for_whole_snapshots() {
    let old = OldWatchRequest {
        proxy_id: "p1".into(),
        known_version: 7,
    };
    let new = pb::WatchRequest::decode(old.encode_to_vec().as_slice()).unwrap();
    assert_eq!((new.proxy_id.as_str(), new.known_version), ("p1", 7));
    assert!(
        !new.accepts_deltas,
        "an old proxy must get today's contract"
    );
}

#[test]
fn an_old_coordinators_update_reads_as_a_whole_unchunked_snapshot() {
    let old = OldConfigUpdate {
        version: 9,
        snapshot_json: b"{\"version\":9}".to_vec(),
        coordinator_id: 2,
    };
    let new = pb::ConfigUpdate::decode(old.encode_to_vec().as_slice()).unwrap();
    assert_eq!(new.version, 9);
    assert_eq!(&new.snapshot_json[..], b"{\"version\":9}");
    assert!(new.delta_json.is_empty());
    assert_eq!(
        (new.base_version, new.chunk_index, new.chunk_count),
        (0, 0, 0)
    );
}

#[test]
fn a_whole_snapshot_sent_today_reads_the_same_to_an_old_proxy() {
    let new = pb::ConfigUpdate {
        version: 12,
        snapshot_json: b"{}".to_vec().into(),
        coordinator_id: 1,
        ..Default::default()
    };
    let old = OldConfigUpdate::decode(new.encode_to_vec().as_slice()).unwrap();
    assert_eq!(
        old,
        OldConfigUpdate {
            version: 12,
            snapshot_json: b"{}".to_vec(),
            coordinator_id: 1,
        }
    );
    // A delta (only ever sent to proxies that asked) carries no snapshot
    // an old reader could mistake for a configuration.
    let delta = pb::ConfigUpdate {
        version: 13,
        base_version: 12,
        delta_json: b"{}".to_vec().into(),
        chunk_count: 1,
        ..Default::default()
    };
    let old = OldConfigUpdate::decode(delta.encode_to_vec().as_slice()).unwrap();
    assert!(old.snapshot_json.is_empty());
}
