//! The watchers against a fake API server: the exact requests for an
//! initial list, a watch that carries an update and a delete, and a
//! re-list after `410 Gone` that replaces the set.

mod live_support;

use live_support::{Clients, WAIT, fast};
use switchyard_kubeconfig::live::{
    DesiredState, Plan, REQUIRED_PERMISSIONS, Stored, plan, watch_clusters_with,
};
use switchyard_proto::model::{CONTROLLER_NAME, Resource};
use switchyard_test_support::eventually;
use switchyard_test_support::fake_kube::{COLLECTIONS, FakeApiServer};
use switchyard_test_support::fixtures::{GW, shop};
use tokio::sync::watch;

fn keys(state: &DesiredState) -> Vec<String> {
    state
        .resources
        .iter()
        .map(|r| r.key().to_string())
        .collect()
}

fn assert_rbac_covers(server: &FakeApiServer) {
    for r in server.requests() {
        let Some((g, res, verb)) = r.permission() else {
            continue;
        };
        assert!(
            REQUIRED_PERMISSIONS.contains(&(g.as_str(), res.as_str(), verb.as_str())),
            "request {} {} needs ({g:?}, {res:?}, {verb:?}), not in REQUIRED_PERMISSIONS",
            r.method,
            r.path
        );
    }
}

/// Starts the watchers on one cluster; returns the receiver and a stop.
fn spawn_watchers(
    server: &FakeApiServer,
) -> (
    watch::Receiver<Option<DesiredState>>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = watch::channel(None);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let sources = vec![server.source("east")];
    let task = tokio::spawn(async move {
        watch_clusters_with(sources, CONTROLLER_NAME, fast(), tx, async {
            let _ = stopped.await;
        })
        .await;
    });
    (rx, stop, task)
}

fn current(rx: &watch::Receiver<Option<DesiredState>>) -> Option<DesiredState> {
    rx.borrow().clone()
}

#[tokio::test]
async fn initial_list_then_watch_mirror_updates_and_deletes() {
    let server = FakeApiServer::start(shop::cluster()).await;
    let (rx, stop, task) = spawn_watchers(&server);
    let state = eventually("first desired state", WAIT, async || current(&rx))
        .await
        .unwrap();
    assert_eq!(
        keys(&state),
        [
            "Namespace shop",
            "GatewayClass switchyard",
            "Gateway shop/gw",
            "Service shop/blue",
            "EndpointSlice shop/blue-a1",
            "HTTPRoute shop/app",
        ],
        "only what our GatewayClass serves"
    );
    assert!(state.clusters[0].reachable);
    assert_eq!(state.clusters[0].contributed, ["shop/blue"]);

    // Exactly: per collection one list, then one watch from the list's
    // resourceVersion; nothing else. (ServiceExports are not installed in
    // this cluster: only lists, answered 404, retried with back-off.)
    let exports = "/apis/multicluster.x-k8s.io/v1alpha1/serviceexports";
    let requests = eventually("a watch per collection", WAIT, async || {
        let r: Vec<_> = server
            .requests()
            .into_iter()
            .filter(|r| r.is_resource() && r.path != exports)
            .collect();
        (r.iter().filter(|r| r.is_watch()).count() == COLLECTIONS.len()).then_some(r)
    })
    .await
    .unwrap();
    assert_eq!(requests.len(), 2 * COLLECTIONS.len(), "{requests:#?}");
    for path in COLLECTIONS {
        let of_path: Vec<_> = requests.iter().filter(|r| r.path == path).collect();
        assert_eq!(of_path.len(), 2, "{path}");
        assert_eq!(of_path[0].method, "GET");
        assert!(!of_path[0].is_watch(), "{path}: list first");
        assert!(of_path[1].is_watch(), "{path}: then watch");
        assert!(of_path[1].query.contains_key("resourceVersion"), "{path}");
        let selector = of_path[1].query.get("labelSelector").map(String::as_str);
        if path.ends_with("/endpointslices") {
            assert_eq!(
                selector,
                Some("kubernetes.io/service-name"),
                "slices of Services only"
            );
        } else {
            assert_eq!(selector, None, "{path}");
        }
    }
    assert!(
        server
            .requests()
            .iter()
            .filter(|r| r.path == exports)
            .all(|r| !r.is_watch()),
        "an uninstalled kind is never watched"
    );

    // An update: the endpoint stops being ready.
    server.apply(shop::slice("blue-a1", "blue", "10.0.0.1", "zone-a", false));
    eventually("the endpoint update", WAIT, async || {
        let s = current(&rx)?;
        s.resources.iter().find_map(|r| match r {
            Resource::EndpointSlice(e) if !e.endpoints[0].ready => Some(()),
            _ => None,
        })
    })
    .await
    .unwrap();

    // A delete of the route: the route, and the backend only it used, go;
    // plan turns that into deletes.
    let before = current(&rx).expect("state");
    server.delete(GW, "HTTPRoute", "shop", "app");
    let after = eventually("the route delete", WAIT, async || {
        current(&rx).filter(|s| !keys(s).contains(&"HTTPRoute shop/app".to_string()))
    })
    .await
    .unwrap();
    let before = Stored {
        resources: before.resources.clone(),
        specless_routes: Vec::new(),
    };
    let Plan { apply, delete } = plan(&after.resources, &before);
    assert!(apply.is_empty(), "{apply:?}");
    let deleted: Vec<String> = delete.iter().map(|k| k.to_string()).collect();
    assert_eq!(
        deleted,
        [
            "HTTPRoute shop/app",
            "EndpointSlice shop/blue-a1",
            "Service shop/blue"
        ]
    );

    // No list was repeated: updates came over the watch.
    let lists = server
        .requests()
        .iter()
        .filter(|r| r.is_resource() && r.path != exports && r.method == "GET" && !r.is_watch())
        .count();
    assert_eq!(lists, COLLECTIONS.len());
    assert_rbac_covers(&server);
    stop.send(()).expect("watchers running");
    task.await.expect("watchers stop cleanly");
}

#[tokio::test]
async fn a_410_gone_relists_and_the_relist_replaces_the_set() {
    let mut objects = shop::cluster();
    objects.push(shop::slice("blue-a2", "blue", "10.0.0.2", "zone-a", true));
    let server = FakeApiServer::start(objects).await;
    let (rx, stop, _task) = spawn_watchers(&server);
    eventually("first state with both slices", WAIT, async || {
        current(&rx).filter(|s| keys(s).contains(&"EndpointSlice shop/blue-a2".to_string()))
    })
    .await
    .unwrap();
    eventually("watches open", WAIT, async || {
        (server.open_watches() == COLLECTIONS.len()).then_some(())
    })
    .await
    .unwrap();
    let slices = "/apis/discovery.k8s.io/v1/endpointslices";
    let lists_before = server
        .requests()
        .iter()
        .filter(|r| r.path == slices && !r.is_watch())
        .count();

    // The slice goes while the watch is broken; the watch then gets 410.
    server.delete_unseen_then_expire("discovery.k8s.io/v1", "EndpointSlice", "shop", "blue-a2");
    let state = eventually("the re-listed set", WAIT, async || {
        current(&rx).filter(|s| !keys(s).contains(&"EndpointSlice shop/blue-a2".to_string()))
    })
    .await
    .unwrap();
    assert!(keys(&state).contains(&"EndpointSlice shop/blue-a1".to_string()));
    assert!(state.clusters[0].reachable, "{:?}", state.clusters[0]);

    let after: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.path == slices)
        .collect();
    let lists_after = after.iter().filter(|r| !r.is_watch()).count();
    assert_eq!(
        lists_after,
        lists_before + 1,
        "exactly one re-list: {after:#?}"
    );
    // ... followed by a fresh watch from the new list's version.
    eventually("a new watch after the re-list", WAIT, async || {
        let r: Vec<_> = server
            .requests()
            .into_iter()
            .filter(|r| r.path == slices)
            .collect();
        r.last().filter(|l| l.is_watch()).map(|_| ())
    })
    .await
    .unwrap();
    assert_rbac_covers(&server);
    drop(stop);
}
