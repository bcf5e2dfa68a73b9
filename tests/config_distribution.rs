//! Configuration distribution through the real `Watch` RPC of an
//! in-process coordinator: deltas, chunks, resuming, one encoding per
//! change shared by every watcher, and the old contract for watchers that
//! do not ask for deltas.
//!
//! - a configuration larger than one 4 MiB gRPC message reaches a watcher
//!   in chunks, and a real proxy serves a route from it;
//! - a reconnect naming the version held gets only the changes since;
//! - N watchers and M changes cost M delta encodings (and M full ones for
//!   any number of old-style watchers);
//! - a watcher that does not ask for deltas gets whole snapshots and bare
//!   versions, as before;
//! - a watcher that reads LZ4 gets large payloads compressed, each
//!   compressed once for all such watchers, and the same configuration.

#[path = "control_plane/harness.rs"]
#[allow(dead_code)] // shared with control_plane.rs, which uses all of it
mod harness;

use anyhow::Context;
use harness::{Coordinator, Proxy, WAIT, backend};
use std::net::SocketAddr;
use switchyard::demo::manifests;
use switchyard_proto::model::{ConfigDelta, ConfigSnapshot, Kind};
use switchyard_proto::pb;
use switchyard_test_support::eventually;
use switchyard_test_support::eventually::holds;
use tonic::Streaming;

/// Largest message the journal may send: its chunks are at most 256 KiB.
const MAX_MESSAGE: usize = 1024 * 1024;

/// A Service `name` in the demo namespace, its annotation `v` set to
/// `value`.
fn service(name: &str, value: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {}, annotations: {{example.com/v: \"{value}\"}}}}\nspec:\n  ports: [{{port: 80}}]\n",
        manifests::NAMESPACE
    )
}

async fn watch(
    coordinator: &Coordinator,
    id: &str,
    known_version: u64,
    accepts_deltas: bool,
) -> anyhow::Result<Streaming<pb::ConfigUpdate>> {
    watch_with(
        coordinator,
        pb::WatchRequest {
            proxy_id: id.into(),
            known_version,
            accepts_deltas,
            accepts_lz4: false,
        },
    )
    .await
}

async fn watch_with(
    coordinator: &Coordinator,
    request: pb::WatchRequest,
) -> anyhow::Result<Streaming<pb::ConfigUpdate>> {
    Ok(coordinator
        .fleet_client()
        .watch(request)
        .await?
        .into_inner())
}

#[derive(Debug, PartialEq, Eq)]
enum Carries {
    Snapshot,
    Delta,
    Bare,
}

/// One whole update as read off the wire: its chunks joined.
#[derive(Debug)]
struct Whole {
    version: u64,
    base: u64,
    kind: Carries,
    payload: Vec<u8>,
    messages: usize,
    /// Whether it came as one message without chunk fields (the old
    /// contract).
    unchunked: bool,
    /// Whether its payload came compressed.
    lz4: bool,
}

/// Reads the next whole update: the chunks of one payload, in order, each
/// under [`MAX_MESSAGE`].
async fn next_whole(stream: &mut Streaming<pb::ConfigUpdate>) -> anyhow::Result<Whole> {
    let mut whole: Option<Whole> = None;
    loop {
        let update = tokio::time::timeout(WAIT, stream.message())
            .await
            .context("an update in time")??
            .context("the stream ended")?;
        let kind = match (
            update.snapshot_json.is_empty(),
            update.delta_json.is_empty(),
        ) {
            (false, true) => Carries::Snapshot,
            (true, false) => Carries::Delta,
            (true, true) => Carries::Bare,
            (false, false) => anyhow::bail!("both payloads in one message"),
        };
        let lz4 = update.encoding() == pb::PayloadEncoding::Lz4;
        let payload = [update.snapshot_json, update.delta_json].concat();
        anyhow::ensure!(
            payload.len() < MAX_MESSAGE,
            "a {} byte message",
            payload.len()
        );
        let w = whole.get_or_insert(Whole {
            version: update.version,
            base: update.base_version,
            kind,
            payload: Vec::new(),
            messages: 0,
            unchunked: update.chunk_count == 0,
            lz4,
        });
        anyhow::ensure!(
            w.version == update.version
                && update.chunk_index as usize == w.messages
                && w.lz4 == lz4,
            "chunk {} of version {} after {} chunks of version {}",
            update.chunk_index,
            update.version,
            w.messages,
            w.version
        );
        w.payload.extend_from_slice(&payload);
        w.messages += 1;
        if update.chunk_count <= 1 || update.chunk_index + 1 == update.chunk_count {
            return whole.context("a whole update");
        }
    }
}

/// Reads whole updates until one of at least `version`.
async fn until(
    stream: &mut Streaming<pb::ConfigUpdate>,
    version: u64,
) -> anyhow::Result<Vec<Whole>> {
    let mut out = Vec::new();
    loop {
        let whole = next_whole(stream).await?;
        let done = whole.version >= version;
        out.push(whole);
        if done {
            return Ok(out);
        }
    }
}

// The coordinator's store is dropped with the runtime at the end: with the
// whole state as one sled value it used to block for good in sled's flush
// at this size; kept per object, it closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_larger_than_one_grpc_message_reaches_a_proxy_that_serves_a_route_from_it()
-> anyhow::Result<()> {
    large_configuration().await
}

async fn large_configuration() -> anyhow::Result<()> {
    // Before: the store refused applies past 90% of one 4 MiB message
    // (and without that limit no proxy would have received anything).
    let coordinator = Coordinator::start().await?;
    let blue = tokio::task::block_in_place(backend)?;
    let address: SocketAddr = blue.address("http")?.parse()?;
    coordinator.apply(&manifests::base()).await?;
    let blob = "x".repeat(500_000);
    for pair in 0..5 {
        let yaml = format!(
            "{}{}",
            service(&format!("filler-{}", 2 * pair), &blob),
            service(&format!("filler-{}", 2 * pair + 1), &blob)
        );
        coordinator.apply(&yaml).await?;
    }
    let proxy = Proxy::start("p1", &coordinator).await?;
    let yaml = format!(
        "{}{}",
        manifests::backend("blue", address),
        manifests::route("blue", "v1", "30s")
    );
    coordinator.apply(&yaml).await?;
    eventually("the route served by the proxy", WAIT, async || {
        let code = proxy.get().await;
        holds(code == 200, || format!("answered {code}"))
    })
    .await?;
    // What that proxy received, as a watcher sees it: over 4 MiB, in
    // chunks each far below one message.
    let mut stream = watch(&coordinator, "raw", 0, true).await?;
    let full = next_whole(&mut stream).await?;
    assert_eq!(full.kind, Carries::Snapshot);
    assert!(
        full.payload.len() > 4 * 1024 * 1024,
        "{} bytes",
        full.payload.len()
    );
    assert!(full.messages >= 17, "{} chunks", full.messages);
    let mut snapshot: ConfigSnapshot = serde_json::from_slice(&full.payload)?;
    assert_eq!(snapshot.version, full.version);
    // The snapshot encoded for the proxy before blue was applied may be
    // the one served (kept while the deltas after it are small): blue
    // then follows as deltas.
    while snapshot.services.len() < 11 {
        let next = next_whole(&mut stream).await?;
        match next.kind {
            Carries::Delta => {
                let delta: ConfigDelta = serde_json::from_slice(&next.payload)?;
                snapshot.apply_delta(&delta)?;
            }
            Carries::Bare => snapshot.version = next.version,
            Carries::Snapshot => anyhow::bail!("a second snapshot on one stream"),
        }
    }
    assert_eq!(snapshot.services.len(), 11, "ten fillers and blue");
    assert_eq!(snapshot.routes.len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_with_a_known_version_gets_only_the_changes_since() -> anyhow::Result<()> {
    // Before: every (re)connect downloaded the whole configuration.
    let coordinator = Coordinator::start().await?;
    let many: String = (0..200).map(|i| service(&format!("s-{i}"), "1")).collect();
    let stored = coordinator
        .apply(&format!("{}{many}", manifests::base()))
        .await?;
    // The journal follows the state machine a moment behind the apply's
    // answer: watch until the first snapshot shows the 200 Services.
    let mut full = None;
    for _ in 0..1_000 {
        let mut first = watch(&coordinator, "p1", 0, true).await?;
        let whole = next_whole(&mut first).await?;
        assert_eq!(whole.kind, Carries::Snapshot);
        if whole.version >= stored {
            full = Some(whole);
            break;
        }
        tokio::task::yield_now().await;
    }
    let full = full.ok_or_else(|| anyhow::anyhow!("no snapshot at version {stored}"))?;
    let index = coordinator.apply(&service("s-7", "2")).await?;
    let mut again = watch(&coordinator, "p1", full.version, true).await?;
    let updates = until(&mut again, index).await?;
    assert_eq!(updates[0].base, full.version, "{updates:?}");
    let mut delta_bytes = 0;
    for update in &updates {
        assert_ne!(update.kind, Carries::Snapshot, "a full snapshot on resume");
        delta_bytes += update.payload.len();
    }
    let deltas: Vec<ConfigDelta> = updates
        .iter()
        .filter(|u| u.kind == Carries::Delta)
        .map(|u| serde_json::from_slice(&u.payload))
        .collect::<Result<_, _>>()?;
    let changed: Vec<_> = deltas
        .iter()
        .flat_map(|d| d.upserted.iter().map(|r| r.key()))
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(
        (changed[0].kind, changed[0].name.name.as_str()),
        (Kind::Service, "s-7")
    );
    assert!(
        delta_bytes * 50 < full.payload.len(),
        "{delta_bytes} bytes of deltas against a {} byte snapshot",
        full.payload.len()
    );
    // Named at the newest version, a watcher gets just a bare version.
    let mut current = watch(&coordinator, "p1", index, true).await?;
    let live = next_whole(&mut current).await?;
    assert_eq!((live.kind, live.version), (Carries::Bare, index));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_watchers_and_many_changes_cost_one_encoding_per_change() -> anyhow::Result<()> {
    // Before: every stream cloned, compared and serialised the whole
    // snapshot per change: N × M encodings.
    const WATCHERS: usize = 6;
    const OLD_STYLE: usize = 2;
    const CHANGES: u64 = 4;
    let coordinator = Coordinator::start().await?;
    let base = coordinator
        .apply(&format!("{}{}", manifests::base(), service("s", "0")))
        .await?;
    let mut streams = Vec::new();
    for i in 0..WATCHERS + OLD_STYLE {
        let mut stream = watch(&coordinator, &format!("w{i}"), 0, i < WATCHERS).await?;
        until(&mut stream, base).await?;
        streams.push(stream);
    }
    let metrics = &coordinator.metrics;
    let (deltas, fulls) = (
        metrics.config_encodings("delta"),
        metrics.config_encodings("full"),
    );
    for change in 1..=CHANGES {
        let index = coordinator
            .apply(&service("s", &change.to_string()))
            .await?;
        for (i, stream) in streams.iter_mut().enumerate() {
            let updates = until(stream, index).await?;
            let last = updates.last().context("an update")?;
            if i < WATCHERS {
                assert!(
                    updates.iter().all(|u| u.kind != Carries::Snapshot),
                    "watcher {i}: {updates:?}"
                );
                assert_eq!(last.kind, Carries::Delta);
            } else {
                // The old contract: one message, the whole snapshot.
                assert!(last.unchunked && last.messages == 1, "{last:?}");
                let snapshot: ConfigSnapshot = serde_json::from_slice(&last.payload)?;
                let value = snapshot.services[0].meta.annotations.get("example.com/v");
                assert_eq!(value, Some(&change.to_string()));
            }
        }
    }
    assert_eq!(metrics.config_encodings("delta") - deltas, CHANGES);
    assert_eq!(
        metrics.config_encodings("full") - fulls,
        CHANGES,
        "one full encoding per version, shared by {OLD_STYLE} old-style watchers"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_reads_lz4_gets_large_payloads_compressed_once_for_all() -> anyhow::Result<()>
{
    // Before: 200 proxies resyncing at 10,000 routes were sent 14 MB of
    // JSON each.
    let coordinator = Coordinator::start().await?;
    let many: String = (0..300).map(|i| service(&format!("s-{i}"), "1")).collect();
    let stored = coordinator
        .apply(&format!("{}{many}", manifests::base()))
        .await?;
    let lz4 = |id: &str, known_version| pb::WatchRequest {
        proxy_id: id.into(),
        known_version,
        accepts_deltas: true,
        accepts_lz4: true,
    };
    // The plain snapshot first, once the journal shows the apply.
    let mut plain = None;
    for _ in 0..1_000 {
        let mut stream = watch(&coordinator, "plain", 0, true).await?;
        let whole = next_whole(&mut stream).await?;
        if whole.version >= stored {
            plain = Some(whole);
            break;
        }
        tokio::task::yield_now().await;
    }
    let plain = plain.ok_or_else(|| anyhow::anyhow!("no snapshot at version {stored}"))?;
    assert!(!plain.lz4);
    let metrics = &coordinator.metrics;
    let before = metrics.config_encodings("full-lz4");
    for i in 0..3 {
        let mut stream = watch_with(&coordinator, lz4(&format!("lz4-{i}"), 0)).await?;
        let full = next_whole(&mut stream).await?;
        assert_eq!(
            (full.kind, full.version),
            (Carries::Snapshot, plain.version)
        );
        assert!(full.lz4, "watcher {i} got plain JSON");
        assert!(
            full.payload.len() * 3 < plain.payload.len(),
            "{} compressed bytes for {} of JSON",
            full.payload.len(),
            plain.payload.len()
        );
        let json = switchyard_proto::compressed::decompress(&full.payload)
            .map_err(|e| anyhow::anyhow!(e))?;
        assert_eq!(json, plain.payload, "watcher {i}: another configuration");
    }
    assert_eq!(
        metrics.config_encodings("full-lz4") - before,
        1,
        "one compression shared by three watchers"
    );
    // A large change comes compressed too, a small one plain.
    let renamed: String = (0..300).map(|i| service(&format!("s-{i}"), "2")).collect();
    let large = coordinator.apply(&renamed).await?;
    let small = coordinator.apply(&service("s-0", "3")).await?;
    let mut stream = watch_with(&coordinator, lz4("lz4-resume", plain.version)).await?;
    let updates = until(&mut stream, small).await?;
    let deltas: Vec<&Whole> = updates
        .iter()
        .filter(|u| u.kind == Carries::Delta)
        .collect();
    let large_delta = deltas
        .iter()
        .find(|u| u.version == large)
        .context("the large change")?;
    let small_delta = deltas
        .iter()
        .find(|u| u.version == small)
        .context("the small change")?;
    assert!(large_delta.lz4 && !small_delta.lz4, "{updates:?}");
    let json = switchyard_proto::compressed::decompress(&large_delta.payload)
        .map_err(|e| anyhow::anyhow!(e))?;
    let delta: ConfigDelta = serde_json::from_slice(&json)?;
    assert_eq!(delta.upserted.len(), 300);
    Ok(())
}
