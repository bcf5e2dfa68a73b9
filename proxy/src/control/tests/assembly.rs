//! Chunk assembly and deltas: the pure rules, then the real client
//! against a fake coordinator that streams chunks and deltas.

use super::fake::Fake;
use super::{Logs, Proxy, served};
use crate::control::assembly::{Assembler, Encoded, Payload, Received, Whole, receive};
use crate::control::error::ControlError;
use switchyard_proto::model::{ConfigDelta, ConfigSnapshot, ObjectMeta, Resource, Service};
use switchyard_proto::pb;

fn chunk(
    version: u64,
    base: u64,
    kind: Payload,
    index: u32,
    count: u32,
    bytes: &[u8],
) -> pb::ConfigUpdate {
    let mut update = pb::ConfigUpdate {
        version,
        base_version: base,
        coordinator_id: 1,
        chunk_index: index,
        chunk_count: count,
        ..Default::default()
    };
    match kind {
        Payload::Snapshot => update.snapshot_json = bytes.to_vec().into(),
        Payload::Delta => update.delta_json = bytes.to_vec().into(),
    }
    update
}

/// `bytes` as the `count` chunks of one payload.
fn chunks(
    version: u64,
    base: u64,
    kind: Payload,
    bytes: &[u8],
    count: u32,
) -> Vec<pb::ConfigUpdate> {
    let size = bytes.len().div_ceil(count as usize);
    bytes
        .chunks(size)
        .enumerate()
        .map(|(i, c)| chunk(version, base, kind, i as u32, count, c))
        .collect()
}

fn with_service(version: u64, name: &str) -> ConfigSnapshot {
    let mut s = ConfigSnapshot {
        version,
        ..Default::default()
    };
    let _ = s.add(Resource::Service(Service {
        meta: ObjectMeta::named("demo", name),
        ports: Vec::new(),
    }));
    s
}

#[test]
fn nothing_is_whole_before_the_last_chunk_and_then_all_of_it_is() {
    let json = serde_json::to_vec(&with_service(7, "a")).unwrap();
    let mut assembler = Assembler::default();
    let parts = chunks(7, 0, Payload::Snapshot, &json, 4);
    let last = parts.len() - 1;
    for (i, part) in parts.into_iter().enumerate() {
        let out = assembler.push(part).unwrap();
        if i < last {
            assert_eq!(out, None, "chunk {i} made a whole update");
        } else {
            let whole = out.expect("the last chunk completes the payload");
            assert_eq!(whole.version, 7);
            assert_eq!(
                whole.payload.map(|(_, p)| p.bytes.to_vec()),
                Some(json.clone())
            );
        }
    }
}

#[test]
fn chunks_out_of_order_or_cut_short_are_refused_and_dropped() {
    let json = serde_json::to_vec(&with_service(7, "a")).unwrap();
    let parts = chunks(7, 0, Payload::Snapshot, &json, 3);
    // A gap.
    let mut a = Assembler::default();
    assert_eq!(a.push(parts[0].clone()), Ok(None));
    let gap = a.push(parts[2].clone()).unwrap_err();
    assert!(
        gap.contains("chunk 2 of 3") && gap.contains("chunk 1 of 3"),
        "{gap}"
    );
    // A payload that starts mid-way.
    assert!(Assembler::default().push(parts[1].clone()).is_err());
    // A whole update, or another version's chunk, before the last chunk.
    let mut b = Assembler::default();
    assert_eq!(b.push(parts[0].clone()), Ok(None));
    let bare = pb::ConfigUpdate {
        version: 8,
        ..Default::default()
    };
    assert!(
        b.push(bare)
            .unwrap_err()
            .contains("whole update came after chunk 1 of 3")
    );
    let mut c = Assembler::default();
    assert_eq!(c.push(parts[0].clone()), Ok(None));
    let other = chunk(9, 0, Payload::Snapshot, 1, 3, b"x");
    assert!(c.push(other).is_err());
    // After a refusal nothing half-received is left: a fresh payload
    // assembles.
    for part in &parts[..2] {
        assert_eq!(c.push(part.clone()), Ok(None));
    }
    assert!(c.push(parts[2].clone()).unwrap().is_some());
    // Both payload fields in one message.
    let mut both = parts[0].clone();
    both.delta_json = b"{}".to_vec().into();
    assert!(Assembler::default().push(both).is_err());
}

fn whole_delta(old: &ConfigSnapshot, new: &ConfigSnapshot) -> Whole {
    Whole {
        version: new.version,
        base: old.version,
        payload: Some((
            Payload::Delta,
            Encoded::json(
                serde_json::to_vec(&ConfigDelta::between(old, new))
                    .unwrap()
                    .into(),
            ),
        )),
    }
}

#[test]
fn a_delta_applies_on_the_version_held_and_nothing_else() {
    let old = with_service(5, "a");
    let new = with_service(9, "b");
    // Held at 5: applies.
    match receive("c", 5, Some(&old), false, whole_delta(&old, &new)) {
        Ok(Received::Snapshot(9, s)) => assert_eq!(*s, new),
        other => panic!("expected the new configuration, got {other:?}"),
    }
    // Held at 6 after a bare version: the snapshot (still saying 5) is the
    // configuration at 6, and a delta based on 6 applies on it.
    let mut from_six = whole_delta(&old, &new);
    from_six.base = 6;
    let mut delta_six = ConfigDelta::between(&old, &new);
    delta_six.base_version = 6;
    from_six.payload = Some((
        Payload::Delta,
        Encoded::json(serde_json::to_vec(&delta_six).unwrap().into()),
    ));
    assert!(matches!(
        receive("c", 6, Some(&old), false, from_six),
        Ok(Received::Snapshot(9, _))
    ));
    // Held at 7: another base, refused.
    match receive("c", 7, Some(&old), false, whole_delta(&old, &new)) {
        Err(ControlError::OutOfSequence {
            version, reason, ..
        }) => {
            assert_eq!(version, 9);
            assert!(
                reason.contains("based on version 5, this proxy holds 7"),
                "{reason}"
            );
        }
        other => panic!("expected out of sequence, got {other:?}"),
    }
    // No configuration held at all: refused.
    assert!(matches!(
        receive("c", 5, None, false, whole_delta(&old, &new)),
        Err(ControlError::OutOfSequence { .. })
    ));
    // A delta that does not apply (it removes what is not held): refused.
    let diverged = with_service(5, "z");
    assert!(matches!(
        receive("c", 5, Some(&diverged), false, whole_delta(&old, &new)),
        Err(ControlError::OutOfSequence { .. })
    ));
    // A bare version on another base: refused; on the held one, noted.
    let bare = |base| Whole {
        version: 10,
        base,
        payload: None,
    };
    assert!(matches!(
        receive("c", 9, None, false, bare(8)),
        Err(ControlError::OutOfSequence { .. })
    ));
    assert!(matches!(
        receive("c", 9, None, false, bare(9)),
        Ok(Received::Version(10))
    ));
}

#[test]
fn while_resyncing_only_a_full_snapshot_counts_even_at_the_version_held() {
    let held = with_service(5, "a");
    let json = serde_json::to_vec(&held).unwrap();
    let full = Whole {
        version: 5,
        base: 0,
        payload: Some((Payload::Snapshot, Encoded::json(json.into()))),
    };
    assert!(matches!(
        receive("c", 5, Some(&held), true, full),
        Ok(Received::Snapshot(5, _))
    ));
    assert!(matches!(
        receive(
            "c",
            5,
            Some(&held),
            true,
            whole_delta(&held, &with_service(9, "b"))
        ),
        Err(ControlError::OutOfSequence { .. })
    ));
}

#[tokio::test]
async fn a_chunked_snapshot_then_a_delta_reach_the_data_plane_and_a_bad_delta_asks_for_a_full_snapshot()
 {
    let _logs = Logs::capture();
    let mut coordinator = Fake::start().await;
    let proxy = Proxy::against(&coordinator);
    let stream = coordinator.next_watch().await;
    assert!(stream.request.accepts_deltas);
    assert_eq!(stream.request.known_version, 0);
    let first = with_service(3, "a");
    for part in chunks(
        3,
        0,
        Payload::Snapshot,
        &serde_json::to_vec(&first).unwrap(),
        3,
    ) {
        stream.send_update(part).await;
    }
    let second = with_service(4, "b");
    let delta = serde_json::to_vec(&ConfigDelta::between(&first, &second)).unwrap();
    for part in chunks(4, 3, Payload::Delta, &delta, 2) {
        stream.send_update(part).await;
    }
    coordinator.heartbeat_where(|h| h.config_version == 4).await;
    assert!(
        !stream.is_closed(),
        "the proxy dropped a stream that was in sequence"
    );
    assert!(proxy.dataplane.has_config());
    // A delta on a version this proxy does not hold: the stream is dropped
    // and the next watch asks for everything.
    let third = with_service(6, "c");
    let mut wrong_base = with_service(5, "b");
    wrong_base.version = 5;
    let bad = serde_json::to_vec(&ConfigDelta::between(&wrong_base, &third)).unwrap();
    stream
        .send_update(chunk(6, 5, Payload::Delta, 0, 1, &bad))
        .await;
    stream.closed().await;
    let again = coordinator.next_watch().await;
    assert_eq!(
        again.request.known_version, 0,
        "a full snapshot is asked for"
    );
    again.send_snapshot(6, &third).await;
    coordinator.heartbeat_where(|h| h.config_version == 6).await;
    assert_eq!(
        proxy.metric("switchyard_proxy_config_version_received"),
        6.0
    );
}

/// `chunks` of `bytes` compressed, marked `PAYLOAD_ENCODING_LZ4`.
fn compressed_chunks(
    version: u64,
    base: u64,
    kind: Payload,
    json: &[u8],
    count: u32,
) -> Vec<pb::ConfigUpdate> {
    let packed = switchyard_proto::compressed::compress(json);
    let mut parts = chunks(version, base, kind, &packed, count);
    for part in &mut parts {
        part.set_encoding(pb::PayloadEncoding::Lz4);
    }
    parts
}

#[tokio::test]
async fn compressed_chunks_reach_the_data_plane_and_a_corrupt_one_asks_for_a_full_snapshot() {
    let _logs = Logs::capture();
    let mut coordinator = Fake::start().await;
    let proxy = Proxy::against(&coordinator);
    let stream = coordinator.next_watch().await;
    assert!(stream.request.accepts_lz4, "the proxy reads LZ4");
    let first = with_service(3, "a");
    let json = serde_json::to_vec(&first).unwrap();
    for part in compressed_chunks(3, 0, Payload::Snapshot, &json, 3) {
        stream.send_update(part).await;
    }
    let second = with_service(4, "b");
    let delta = serde_json::to_vec(&ConfigDelta::between(&first, &second)).unwrap();
    for part in compressed_chunks(4, 3, Payload::Delta, &delta, 2) {
        stream.send_update(part).await;
    }
    coordinator.heartbeat_where(|h| h.config_version == 4).await;
    assert!(
        !stream.is_closed(),
        "the compressed updates were in sequence"
    );
    assert!(proxy.dataplane.has_config());
    // A compressed payload cut short: nothing of it is used, and the next
    // watch asks for everything.
    let third = with_service(5, "c");
    let delta = serde_json::to_vec(&ConfigDelta::between(&second, &third)).unwrap();
    let mut cut = compressed_chunks(5, 4, Payload::Delta, &delta, 1).remove(0);
    let half = cut.delta_json.len() / 2;
    cut.delta_json.truncate(half);
    stream.send_update(cut).await;
    stream.closed().await;
    let again = coordinator.next_watch().await;
    assert_eq!(
        again.request.known_version, 0,
        "a full snapshot is asked for"
    );
    assert_eq!(
        proxy.metric("switchyard_proxy_config_version_received"),
        4.0,
        "the cut delta was not applied"
    );
    again.send_snapshot(5, &third).await;
    coordinator.heartbeat_where(|h| h.config_version == 5).await;
}

#[test]
fn a_payload_whose_chunks_change_encoding_midway_is_refused() {
    let json = serde_json::to_vec(&with_service(7, "a")).unwrap();
    let mut parts = chunks(7, 0, Payload::Snapshot, &json, 2);
    parts[1].set_encoding(pb::PayloadEncoding::Lz4);
    let mut a = Assembler::default();
    assert_eq!(a.push(parts[0].clone()), Ok(None));
    assert!(a.push(parts[1].clone()).is_err());
    // An encoding this proxy does not know is refused outright.
    let mut unknown = parts[0].clone();
    unknown.encoding = 7;
    let why = Assembler::default().push(unknown).unwrap_err();
    assert!(why.contains("unknown payload encoding 7"), "{why}");
}

#[tokio::test]
async fn a_reconnect_names_the_version_held() {
    let _logs = Logs::capture();
    let mut coordinator = Fake::start().await;
    let _proxy = Proxy::against(&coordinator);
    let stream = coordinator.next_watch().await;
    stream.send_snapshot(3, &with_service(3, "a")).await;
    stream
        .send_update(pb::ConfigUpdate {
            version: 4,
            base_version: 3,
            ..Default::default()
        })
        .await;
    coordinator.heartbeat_where(|h| h.config_version == 4).await;
    drop(stream);
    let again = coordinator.next_watch().await;
    assert_eq!(again.request.known_version, 4);
    assert!(again.request.accepts_deltas);
}

#[tokio::test]
async fn a_burst_of_deltas_is_taken_one_after_the_other_and_ends_at_the_last() {
    let logs = Logs::capture();
    let mut coordinator = Fake::start().await;
    let _proxy = Proxy::against(&coordinator);
    let stream = coordinator.next_watch().await;
    let names: Vec<String> = (0..12).map(|i| format!("r{i:02}")).collect();
    let at = |n: usize| {
        let routes: Vec<&str> = names[..n].iter().map(String::as_str).collect();
        served(3 + n as u64, &routes, 2)
    };
    stream.send_snapshot(3, &at(0)).await;
    // Twelve deltas sent without waiting: the proxy finds several ready
    // at once and publishes when the burst is over.
    for n in 1..=names.len() {
        let delta = ConfigDelta::between(&at(n - 1), &at(n));
        let update = pb::ConfigUpdate {
            version: 3 + n as u64,
            base_version: 3 + n as u64 - 1,
            delta_json: serde_json::to_vec(&delta).unwrap().into(),
            coordinator_id: 1,
            ..Default::default()
        };
        stream.send_update(update).await;
    }
    let last = 3 + names.len() as u64;
    // Every route of the last version served: said by the version alone.
    let beat = coordinator
        .heartbeat_where(|h| h.config_version == last && h.applied_through == last)
        .await;
    assert!(
        beat.applied.is_empty(),
        "nothing served otherwise: {beat:?}"
    );
    assert!(!stream.is_closed(), "every delta was in sequence");
    assert_eq!(logs.warnings(), Vec::<String>::new());
}
