//! Leadership: only the leader watches; when it loses leadership its
//! watchers stop (their connections close), and the new leader's first
//! plan against what the old leader stored applies nothing again.

mod live_support;

use live_support::{Clients, WAIT, fast};
use std::sync::{Arc, Mutex};
use switchyard_kubeconfig::live::{
    ClusterSource, DesiredState, Plan, Stored, plan, run_while_leader, watch_clusters_with,
};
use switchyard_proto::model::{CONTROLLER_NAME, Resource};
use switchyard_test_support::eventually;
use switchyard_test_support::fake_kube::{COLLECTIONS, FakeApiServer};
use switchyard_test_support::fixtures::shop;
use tokio::sync::watch;

/// A coordinator as far as this module is concerned: a leadership flag and
/// the desired states its watchers publish.
struct Coordinator {
    leader: watch::Sender<bool>,
    desired: watch::Receiver<Option<DesiredState>>,
    task: tokio::task::JoinHandle<()>,
}

fn coordinator(source: ClusterSource) -> Coordinator {
    let (leader, is_leader) = watch::channel(false);
    let (out, desired) = watch::channel(None);
    let out = Arc::new(out);
    let task = tokio::spawn(run_while_leader(is_leader, move || {
        let (source, out) = (source.clone(), out.clone());
        async move {
            // A new term starts from "nothing listed yet".
            out.send_replace(None);
            let (tx, mut rx) = watch::channel(None);
            let forward = async {
                while rx.changed().await.is_ok() {
                    out.send_replace(rx.borrow_and_update().clone());
                }
            };
            let watchers = watch_clusters_with(
                vec![source],
                CONTROLLER_NAME,
                fast(),
                tx,
                std::future::pending::<()>(),
            );
            tokio::join!(watchers, forward);
        }
    }));
    Coordinator {
        leader,
        desired,
        task,
    }
}

/// What the state machine would hold after applying: revisions stamped.
fn store(stored: &Mutex<Vec<Resource>>, apply: Vec<Resource>, index: u64) {
    let mut s = stored.lock().expect("store");
    for mut r in apply {
        r.meta_mut().revision = index;
        s.retain(|o| o.key() != r.key());
        s.push(r);
    }
}

fn watches_by(server: &FakeApiServer, client: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.is_watch() && r.client.as_deref() == Some(client))
        .count()
}

#[tokio::test]
async fn only_the_leader_watches_and_a_new_leader_reapplies_nothing() {
    let server = FakeApiServer::start(shop::cluster()).await;
    // The same cluster name on both (it is stored in EndpointSlices), told
    // apart on the wire by the client tag.
    let source = |tag: &str| ClusterSource::new("east", server.client(tag));
    let a = coordinator(source("a"));
    let b = coordinator(source("b"));
    let stored = Mutex::new(Vec::new());

    a.leader.send_replace(true);
    let state = eventually("a's desired state", WAIT, async || {
        a.desired.borrow().clone()
    })
    .await
    .unwrap();
    eventually("a's watches open", WAIT, async || {
        (server.open_watches() == COLLECTIONS.len()).then_some(())
    })
    .await
    .unwrap();
    let Plan { apply, delete } = plan(&state.resources, &stored_view(&stored));
    assert_eq!(apply.len(), state.resources.len());
    assert!(delete.is_empty());
    store(&stored, apply, 10);
    assert!(b.desired.borrow().is_none(), "a follower publishes nothing");
    assert_eq!(watches_by(&server, "b"), 0, "a follower does not watch");
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.client.as_deref() == Some("a"))
    );

    // Failover: a loses leadership, its watchers stop...
    a.leader.send_replace(false);
    eventually("a's watches closed", WAIT, async || {
        (server.open_watches() == 0).then_some(())
    })
    .await
    .unwrap();
    let a_watches = watches_by(&server, "a");
    // ... b wins and lists for itself.
    b.leader.send_replace(true);
    let state = eventually("b's desired state", WAIT, async || {
        b.desired.borrow().clone()
    })
    .await
    .unwrap();
    let Plan { apply, delete } = plan(&state.resources, &stored_view(&stored));
    assert!(apply.is_empty(), "nothing re-applied: {apply:?}");
    assert!(delete.is_empty(), "nothing deleted: {delete:?}");
    eventually("b's watches open", WAIT, async || {
        (server.open_watches() == COLLECTIONS.len()).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(watches_by(&server, "a"), a_watches, "a stays quiet");

    // A change while b leads reaches b's plan only as that change.
    server.apply(shop::slice("blue-a1", "blue", "10.0.0.1", "zone-a", false));
    let state = eventually("b sees the change", WAIT, async || {
        b.desired.borrow().clone().filter(|s| {
            s.resources
                .iter()
                .any(|r| matches!(r, Resource::EndpointSlice(e) if !e.endpoints[0].ready))
        })
    })
    .await
    .unwrap();
    let apply = plan(&state.resources, &stored_view(&stored)).apply;
    let keys: Vec<String> = apply.iter().map(|r| r.key().to_string()).collect();
    assert_eq!(keys, ["EndpointSlice shop/blue-a1"]);
    drop(a.leader);
    drop(b.leader);
    a.task.await.expect("a ends");
    b.task.await.expect("b ends");
}

/// What the test's store holds, as `plan` reads it.
fn stored_view(stored: &Mutex<Vec<Resource>>) -> Stored {
    Stored {
        resources: stored.lock().expect("store").clone(),
        specless_routes: Vec::new(),
    }
}
