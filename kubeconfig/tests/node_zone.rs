//! `node_zone` against the fake API server through a real `kube::Client`:
//! the zone label of a labelled node, `None` for a node without it (or
//! with an empty value), errors that name the node for a missing node and
//! an unreachable API server, and no request beyond the permissions
//! `deploy/rbac.yaml` grants for it.

mod live_support;

use live_support::Clients;
use serde_json::{Value, json};
use switchyard_kubeconfig::node_zone::{
    NodeZoneError, REQUIRED_PERMISSIONS, ZONE_LABEL, node_zone,
};
use switchyard_test_support::fake_kube::FakeApiServer;

fn node(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
}

async fn cluster() -> FakeApiServer {
    FakeApiServer::start(vec![
        node(
            "node-a",
            json!({ZONE_LABEL: "eu-west-1a", "kubernetes.io/hostname": "node-a"}),
        ),
        node("bare", json!({"kubernetes.io/hostname": "bare"})),
        node("blank", json!({ZONE_LABEL: ""})),
        node("racked", json!({"example.com/rack": "r7"})),
    ])
    .await
}

#[tokio::test]
async fn a_labelled_node_gives_its_zone() -> anyhow::Result<()> {
    let kube = cluster().await;
    let client = kube.client("node-zone");
    assert_eq!(
        node_zone(&client, "node-a", ZONE_LABEL).await?.as_deref(),
        Some("eu-west-1a")
    );
    // Another label when asked for one.
    assert_eq!(
        node_zone(&client, "racked", "example.com/rack")
            .await?
            .as_deref(),
        Some("r7")
    );
    // One GET of the named node per call, and nothing the role lacks.
    let requests = kube.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/api/v1/nodes/node-a", "/api/v1/nodes/racked"]);
    for request in &requests {
        let (g, r, v) = request.permission().expect("a resource request");
        assert!(
            REQUIRED_PERMISSIONS.contains(&(g.as_str(), r.as_str(), v.as_str())),
            "{} {} needs ({g:?}, {r:?}, {v:?})",
            request.method,
            request.path
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_node_without_the_label_or_with_an_empty_one_has_no_zone() -> anyhow::Result<()> {
    let kube = cluster().await;
    let client = kube.client("node-zone");
    assert_eq!(node_zone(&client, "bare", ZONE_LABEL).await?, None);
    assert_eq!(node_zone(&client, "blank", ZONE_LABEL).await?, None);
    assert_eq!(
        node_zone(&client, "node-a", "example.com/rack").await?,
        None
    );
    Ok(())
}

#[tokio::test]
async fn a_missing_node_is_an_error_naming_it() {
    let kube = cluster().await;
    let client = kube.client("node-zone");
    let error = node_zone(&client, "node-z", ZONE_LABEL)
        .await
        .expect_err("no such node");
    assert!(
        matches!(&error, NodeZoneError::NotFound { node } if node == "node-z"),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("\"node-z\"") && text.contains("spec.nodeName"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unreachable_api_server_is_an_error_naming_the_node() {
    let kube = cluster().await;
    let client = kube.client("node-zone");
    kube.stop();
    let error = node_zone(&client, "node-a", ZONE_LABEL)
        .await
        .expect_err("the server is down");
    assert!(
        matches!(&error, NodeZoneError::Read { node, .. } if node == "node-a"),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("cannot read node \"node-a\": "),
        "{error}"
    );
}
