//! Clusters fail alone (issue 13, items 5 and 6), through the real
//! reconcile loop ([`lead_term_with`]) of two coordinators sharing one
//! store, against two fake API servers:
//!
//! - `east` holds the Gateway API configuration and exports Service
//!   `shop/blue`;
//! - `west` has no Gateway API CRDs at all (its lists are answered `404`)
//!   and exports its own `shop/blue`.
//!
//! The route sends to the clusterset `ServiceImport` `blue`, so both
//! clusters' endpoints serve it. Then the leader changes while `east` is
//! unreachable: the new leader never lists `east`, keeps every object the
//! previous leader stored from it, and keeps publishing `west`'s changes.

mod live_support;

use live_support::mcs::{export, exporting_shop};
use live_support::{Clients, WAIT, fast};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_kubeconfig::live::{
    ClusterSource, Store, Stored, SyncSettings, lead_term_with, run_while_leader,
};
use switchyard_proto::model::{CONTROLLER_NAME, ClusterStatus, Resource, ResourceKey};
use switchyard_test_support::eventually;
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::shop;
use tokio::sync::watch;

/// The coordinators' replicated state, as far as the sync sees it: what
/// is stored, and every key it was ever asked to delete.
struct SharedStore {
    stored: Mutex<Vec<Resource>>,
    deleted: Mutex<Vec<ResourceKey>>,
    index: Mutex<u64>,
    /// The Raft term of whoever leads now.
    term: AtomicU64,
    status: watch::Sender<u64>,
}

impl SharedStore {
    fn new() -> SharedStore {
        SharedStore {
            stored: Mutex::new(Vec::new()),
            deleted: Mutex::new(Vec::new()),
            index: Mutex::new(0),
            term: AtomicU64::new(1),
            status: watch::channel(0).0,
        }
    }

    fn keys(&self) -> Vec<String> {
        let stored = self.stored.lock().expect("store");
        stored.iter().map(|r| r.key().to_string()).collect()
    }

    /// The addresses of the import's slices, by cluster.
    fn import_endpoints(&self) -> Vec<(String, String)> {
        let stored = self.stored.lock().expect("store");
        let mut out: Vec<(String, String)> = stored
            .iter()
            .filter_map(|r| match r {
                Resource::EndpointSlice(s) if s.service_name() == Some("blue.clusterset") => {
                    Some((
                        s.cluster.clone().unwrap_or_default(),
                        s.endpoints[0].addresses[0].clone(),
                    ))
                }
                _ => None,
            })
            .collect();
        out.sort();
        out
    }
}

impl Store for SharedStore {
    type Error = String;

    fn stored(&self) -> Stored {
        Stored {
            resources: self.stored.lock().expect("store").clone(),
            specless_routes: Vec::new(),
        }
    }

    fn may_write(&self) -> bool {
        true
    }

    fn term(&self) -> u64 {
        self.term.load(Ordering::SeqCst)
    }

    fn max_objects_per_request(&self) -> usize {
        100
    }

    async fn apply(&self, resources: Vec<Resource>) -> Result<Result<Vec<String>, String>, String> {
        let mut index = self.index.lock().expect("index");
        *index += 1;
        let mut stored = self.stored.lock().expect("store");
        let mut changes = Vec::new();
        for mut r in resources {
            r.meta_mut().revision = *index;
            changes.push(r.key().to_string());
            stored.retain(|o| o.key() != r.key());
            stored.push(r);
        }
        Ok(Ok(changes))
    }

    async fn delete(&self, keys: Vec<ResourceKey>) -> Result<Result<Vec<String>, String>, String> {
        self.stored
            .lock()
            .expect("store")
            .retain(|r| !keys.contains(&r.key()));
        self.deleted.lock().expect("deleted").extend(keys);
        Ok(Ok(Vec::new()))
    }

    fn status(&self) -> ClusterStatus {
        ClusterStatus::default()
    }

    fn status_changes(&self) -> watch::Receiver<u64> {
        self.status.subscribe()
    }
}

/// One coordinator: a leadership flag driving the real term loop.
fn coordinator(
    sources: Vec<ClusterSource>,
    store: Arc<SharedStore>,
) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let (leader, is_leader) = watch::channel(false);
    let mut settings = SyncSettings::with_status_interval(Duration::from_millis(200));
    settings.status_coalesce = Duration::from_millis(10);
    settings.retry = (Duration::from_millis(20), Duration::from_millis(200));
    let task = tokio::spawn(async move {
        run_while_leader(is_leader, || {
            let (sources, store, settings) = (sources.clone(), store.clone(), settings.clone());
            async move {
                lead_term_with(&sources, CONTROLLER_NAME, settings, fast(), &*store).await;
            }
        })
        .await;
    });
    (leader, task)
}

#[tokio::test]
async fn a_cluster_without_crds_and_an_unreachable_one_during_a_leader_change_do_not_stop_the_rest()
{
    let east = FakeApiServer::start(exporting_shop("2026-01-01T00:00:00Z")).await;
    let west = FakeApiServer::start(vec![
        shop::service("blue"),
        shop::slice("blue-w1", "blue", "10.1.0.1", "zone-b", true),
        export("blue", "2026-01-02T00:00:00Z"),
    ])
    .await;
    west.remove_api_group("gateway.networking.k8s.io");
    let store = Arc::new(SharedStore::new());
    let sources = |tag: &str| {
        vec![
            ClusterSource::new("east", east.client(&format!("{tag}-east"))),
            ClusterSource::new("west", west.client(&format!("{tag}-west"))),
        ]
    };
    let (a, a_task) = coordinator(sources("a"), store.clone());
    let (b, b_task) = coordinator(sources("b"), store.clone());

    // A leads: west's missing CRDs hold nothing back; both clusters'
    // endpoints serve the import.
    a.send_replace(true);
    eventually("both clusters' endpoints stored", WAIT, async || {
        (store.import_endpoints()
            == [
                ("east".to_string(), "10.0.0.1".to_string()),
                ("west".to_string(), "10.1.0.1".to_string()),
            ])
        .then_some(())
    })
    .await
    .unwrap();
    let before = store.keys();
    for key in [
        "Gateway shop/gw",
        "HTTPRoute shop/app",
        "Service shop/blue.clusterset",
    ] {
        assert!(before.contains(&key.to_string()), "{key} in {before:?}");
    }
    assert!(
        west.requests()
            .iter()
            .any(|r| r.path.contains("/gateway.networking.k8s.io/")),
        "west was asked for the Gateway API kinds and answered 404"
    );

    // East becomes unreachable, and leadership moves to b meanwhile.
    east.stop();
    a.send_replace(false);
    store.term.store(2, Ordering::SeqCst);
    b.send_replace(true);
    eventually("b lists west", WAIT, async || {
        west.requests()
            .iter()
            .any(|r| r.client.as_deref() == Some("b-west") && r.is_watch())
            .then_some(())
    })
    .await
    .unwrap();

    // West keeps publishing through b...
    west.apply(shop::slice("blue-w1", "blue", "10.1.0.2", "zone-b", true));
    eventually("west's change stored by b", WAIT, async || {
        (store.import_endpoints()
            == [
                ("east".to_string(), "10.0.0.1".to_string()),
                ("west".to_string(), "10.1.0.2".to_string()),
            ])
        .then_some(())
    })
    .await
    .unwrap();
    // ... and nothing east contributed was deleted or lost.
    assert!(
        store.deleted.lock().expect("deleted").is_empty(),
        "{:?}",
        store.deleted.lock().expect("deleted")
    );
    assert_eq!(store.keys().len(), before.len(), "{:?}", store.keys());
    for key in &before {
        assert!(store.keys().contains(key), "{key} kept");
    }

    // East is back: b lists it, and its changes flow again.
    east.resume().await;
    east.apply(shop::slice("blue-a1", "blue", "10.0.0.5", "zone-a", true));
    eventually("east's change stored by b", WAIT, async || {
        store
            .import_endpoints()
            .contains(&("east".to_string(), "10.0.0.5".to_string()))
            .then_some(())
    })
    .await
    .unwrap();
    assert!(store.deleted.lock().expect("deleted").is_empty());
    drop(a);
    drop(b);
    a_task.await.expect("a ends");
    b_task.await.expect("b ends");
}
