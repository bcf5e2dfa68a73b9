//! The zone of a Kubernetes node: one `GET /api/v1/nodes/NAME` and its
//! `topology.kubernetes.io/zone` label (or another label the caller names).
//!
//! Why a read of the Node rather than the pod's own labels: the
//! `PodTopologyLabelsAdmission` plugin that copies the node's topology
//! labels onto pods is alpha (Kubernetes 1.33) and off by default, so on
//! today's clusters a pod cannot learn its zone through the downward API.
//! `switchyard node-zone` (an init container) calls [`node_zone`] and
//! writes the answer to a file the proxy reads (`--zone-file`).
//!
//! Owns: the read, its errors (naming the node and the label), and the one
//! permission it needs ([`REQUIRED_PERMISSIONS`], which `deploy/rbac.yaml`
//! grants and a test compares). Does not own: what a missing label means
//! (the CLI decides: fail, or a fallback zone it was given), connecting
//! (`live::connect`, `live::connect_in_cluster`), or writing the file.

use k8s_openapi::api::core::v1::Node;

/// The well-known label cloud providers and most installers set on every
/// node of a zoned cluster.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// `(apiGroup, resource, verb)` of every request [`node_zone`] makes:
/// exactly what the `switchyard-node-reader` ClusterRole in
/// `deploy/rbac.yaml` grants (a test compares them).
pub const REQUIRED_PERMISSIONS: &[(&str, &str, &str)] = &[("", "nodes", "get")];

/// Why a node's zone could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeZoneError {
    /// The API server has no node of that name.
    #[error("node {node:?} does not exist (the name should be the pod's spec.nodeName)")]
    NotFound {
        /// The node asked for.
        node: String,
    },
    /// The ServiceAccount may not read nodes.
    #[error(
        "not allowed to get node {node:?}: the ServiceAccount needs `get` on `nodes` \
         (ClusterRole switchyard-node-reader in deploy/rbac.yaml): {cause}"
    )]
    Forbidden {
        /// The node asked for.
        node: String,
        /// The API server's answer (boxed: kube's error is large).
        cause: Box<kube::Error>,
    },
    /// Any other failure (unreachable API server, bad certificate, ...).
    #[error("cannot read node {node:?}: {cause}")]
    Read {
        /// The node asked for.
        node: String,
        /// kube's reason (boxed: kube's error is large).
        cause: Box<kube::Error>,
    },
}

/// The value of `label` on node `node`; `Ok(None)` when the node has no
/// such label or its value is empty (an empty zone names no failure
/// domain). One GET, no retry: an init container that fails is restarted
/// by the kubelet with back-off, which is the retry.
pub async fn node_zone(
    client: &kube::Client,
    node: &str,
    label: &str,
) -> Result<Option<String>, NodeZoneError> {
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let found = match nodes.get_opt(node).await {
        Ok(Some(found)) => found,
        Ok(None) => {
            return Err(NodeZoneError::NotFound {
                node: node.to_string(),
            });
        }
        Err(kube::Error::Api(status)) if status.is_forbidden() => {
            return Err(NodeZoneError::Forbidden {
                node: node.to_string(),
                cause: Box::new(kube::Error::Api(status)),
            });
        }
        Err(cause) => {
            return Err(NodeZoneError::Read {
                node: node.to_string(),
                cause: Box::new(cause),
            });
        }
    };
    Ok(found
        .metadata
        .labels
        .and_then(|mut labels| labels.remove(label))
        .filter(|zone| !zone.is_empty()))
}
