//! Strict field validation is for files only: objects a cluster serves
//! with fields these types do not know (a newer Gateway API, a newer
//! Kubernetes) were validated by that API server and are read as before,
//! while the same object in a file is refused.

mod live_support;

use live_support::{Clients, WAIT, fast};
use serde_json::json;
use switchyard_kubeconfig::live::watch_clusters_with;
use switchyard_kubeconfig::{Problem, parse_object};
use switchyard_proto::model::{CONTROLLER_NAME, Resource};
use switchyard_test_support::eventually;
use switchyard_test_support::fake_kube::FakeApiServer;
use switchyard_test_support::fixtures::shop;
use tokio::sync::watch;

#[tokio::test]
async fn a_cluster_object_with_fields_the_types_do_not_know_is_read() {
    let mut route = shop::route("blue", 1);
    route["spec"]["rules"][0]["sessionPersistence"] = json!({"sessionName": "s"});
    let mut service = shop::service("blue");
    service["spec"]["ports"][0]["futurePortField"] = json!(true);

    // From a file, both are refused.
    for object in [&route, &service] {
        let err = parse_object("file.yaml", 0, object.clone()).unwrap_err();
        assert!(
            matches!(err.problem, Problem::UnknownFields { .. }),
            "{err}"
        );
    }

    let mut objects: Vec<_> = shop::cluster()
        .into_iter()
        .filter(|o| {
            let name = o["metadata"]["name"].as_str();
            !(o["kind"] == "HTTPRoute" || (o["kind"] == "Service" && name == Some("blue")))
        })
        .collect();
    objects.push(route);
    objects.push(service);
    let server = FakeApiServer::start(objects).await;
    let (tx, rx) = watch::channel(None);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let sources = vec![server.source("east")];
    let task = tokio::spawn(async move {
        watch_clusters_with(sources, CONTROLLER_NAME, fast(), tx, async {
            let _ = stopped.await;
        })
        .await;
    });
    let state = eventually("the route and its Service", WAIT, async || {
        let state = rx.borrow().clone()?;
        let has = |kind: &str, name: &str| {
            state
                .resources
                .iter()
                .any(|r| r.kind().to_string() == kind && r.meta().name == name)
        };
        (has("HTTPRoute", "app") && has("Service", "blue")).then_some(state)
    })
    .await
    .unwrap();
    let port = state.resources.iter().find_map(|r| match r {
        Resource::Service(s) if s.meta.name == "blue" => Some(s.ports[0].port),
        _ => None,
    });
    assert_eq!(port, Some(80));
    let _ = stop.send(());
    let _ = task.await;
}
