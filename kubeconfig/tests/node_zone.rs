//! `node_zone` against the fake API server through a real `kube::Client`:
//! the zone label of a labelled node, `None` for a node without it (or
//! with an empty value), errors that name the node for a missing node, a
//! forbidden read (naming the ClusterRole to grant) and an unreachable API
//! server, and no request beyond the permissions
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

/// An API server that answers every request as RBAC does when the
/// ServiceAccount lacks the right: 403 with a `Status` naming it. (The
/// fake API server grants everything, so this one-answer server stands
/// in for a cluster where `deploy/rbac.yaml` was not applied.)
async fn forbidding_server() -> anyhow::Result<std::net::SocketAddr> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = Vec::new();
            let mut buffer = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buffer[..n]),
                }
            }
            let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "Forbidden", "code": 403,
                "message": "nodes \"node-a\" is forbidden: User \"system:serviceaccount:switchyard:switchyard-proxy\" cannot get resource \"nodes\""})
            .to_string();
            let response = format!(
                "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        }
    });
    Ok(addr)
}

#[tokio::test]
async fn a_forbidden_read_names_the_node_and_the_role_to_grant() -> anyhow::Result<()> {
    let addr = forbidding_server().await?;
    let client = kube::Client::try_from(kube::Config::new(format!("http://{addr}").parse()?))?;
    let error = node_zone(&client, "node-a", ZONE_LABEL)
        .await
        .expect_err("forbidden");
    assert!(
        matches!(&error, NodeZoneError::Forbidden { node, .. } if node == "node-a"),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.starts_with("not allowed to get node \"node-a\"")
            && text.contains("switchyard-node-reader")
            && text.contains("cannot get resource"),
        "{text}"
    );
    Ok(())
}
