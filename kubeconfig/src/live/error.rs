//! [`LiveError`]: what can go wrong talking to a cluster.
//!
//! Configuration errors ([`LiveError::Kubeconfig`], [`LiveError::InCluster`],
//! [`LiveError::Client`])
//! are fatal for the source: retrying cannot fix them. Status writes fail
//! for transient reasons and are retried by the caller on the next publish
//! ([`LiveError::is_retryable`]). Watch errors are not here: the watchers
//! retry by themselves and report them as [`super::ClusterHealth`].

/// An error from the live-cluster side.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    /// The kubeconfig file cannot be read, or the context is missing or
    /// unusable.
    #[error("kubeconfig {path} (context {context:?}): {cause}")]
    Kubeconfig {
        /// The file as given.
        path: String,
        /// The context asked for; `None` is the file's current context.
        context: Option<String>,
        /// kube's reason.
        cause: kube::config::KubeconfigError,
    },
    /// Not running in a pod, or the pod has no ServiceAccount token.
    #[error("in-cluster configuration: {cause}")]
    InCluster {
        /// kube's reason.
        cause: kube::config::InClusterError,
    },
    /// A client could not be built from a valid configuration.
    #[error("cluster {cluster}: cannot build a client: {cause}")]
    Client {
        /// The cluster's name.
        cluster: String,
        /// kube's reason (boxed: kube's error is large).
        cause: Box<kube::Error>,
    },
    /// Reading or server-side-applying an object's status failed.
    #[error("cluster {cluster}: status of {kind} {object}: {cause}")]
    Status {
        /// The cluster's name.
        cluster: String,
        /// `HTTPRoute` or `Gateway`.
        kind: &'static str,
        /// `namespace/name`.
        object: String,
        /// kube's reason (boxed: kube's error is large).
        cause: Box<kube::Error>,
    },
    /// The object changed between our read and our write every time we
    /// tried; the next publish tries again.
    #[error(
        "cluster {cluster}: status of {kind} {object}: still conflicting after {attempts} attempts"
    )]
    Conflict {
        /// The cluster's name.
        cluster: String,
        /// `HTTPRoute` or `Gateway`.
        kind: &'static str,
        /// `namespace/name`.
        object: String,
        /// How many writes were tried.
        attempts: u32,
    },
}

impl LiveError {
    /// Whether trying the same thing later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, LiveError::Status { .. } | LiveError::Conflict { .. })
    }
}
