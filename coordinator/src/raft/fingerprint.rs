//! Which cluster a coordinator belongs to, and refusing Raft RPCs from any
//! other.
//!
//! Owns: the cluster fingerprint (a short, stable hash of the initial
//! membership given by `--peers` at formation), stamping it on outgoing Raft
//! RPCs as metadata, checking it on incoming ones, and adopting the leader's
//! fingerprint when a node that started in join mode is first contacted.
//! Does not own: membership itself (openraft does), nor persistence details
//! (the formation record lives in [`super::db`]).
//!
//! Why: `--peers` that disagree between nodes would otherwise form two
//! overlapping clusters that vote in each other's elections. A node formed
//! with different peers is refused with `FAILED_PRECONDITION` before
//! anything reaches openraft, so nothing is stored and no term is bumped.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tonic::metadata::MetadataValue;

use super::db::{ClusterMetaStore, Formation};
use super::types::NodeId;

/// Metadata key carrying the sender's cluster fingerprint.
pub const CLUSTER_HEADER: &str = "x-switchyard-cluster";
/// Metadata key carrying the sender's initial peer list, so a refusal can
/// name both lists.
pub const PEERS_HEADER: &str = "x-switchyard-peers";

/// `id=addr` pairs sorted by id, comma separated: the canonical peer list.
pub fn peers_string(peers: &BTreeMap<NodeId, String>) -> String {
    peers
        .iter()
        .map(|(id, addr)| format!("{id}={addr}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The fingerprint of a peer list: FNV-1a (64 bit) of [`peers_string`], in
/// hex. A fixed, documented hash rather than `std`'s `DefaultHasher`, whose
/// output may change between Rust releases — nodes built by different
/// compilers must agree, and the value is persisted.
pub fn fingerprint(peers: &BTreeMap<NodeId, String>) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = peers_string(peers)
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    format!("{hash:016x}")
}

impl Formation {
    /// The formation a node started with `--peers peers` records.
    pub fn from_peers(peers: &BTreeMap<NodeId, String>) -> Formation {
        Formation {
            fingerprint: fingerprint(peers),
            peers: peers_string(peers),
        }
    }
}

/// This node's cluster identity, shared by the network client (which stamps
/// it) and the RaftService server (which checks it).
#[derive(Clone)]
pub struct ClusterIdentity {
    node_id: NodeId,
    formation: Arc<RwLock<Option<Formation>>>,
    /// Serializes adoption so two first RPCs cannot adopt different values.
    adopting: Arc<tokio::sync::Mutex<()>>,
    store: ClusterMetaStore,
}

impl ClusterIdentity {
    /// An identity; `formation` is `None` for a node in join mode that has
    /// not been contacted yet.
    pub fn new(node_id: NodeId, formation: Option<Formation>, store: ClusterMetaStore) -> Self {
        ClusterIdentity {
            node_id,
            formation: Arc::new(RwLock::new(formation)),
            adopting: Arc::new(tokio::sync::Mutex::new(())),
            store,
        }
    }

    /// The current formation, if any.
    pub fn current(&self) -> Option<Formation> {
        // A poisoned lock only means a panic happened while the plain value
        // was being replaced; the value itself is still whole.
        match self.formation.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set(&self, formation: Formation) {
        match self.formation.write() {
            Ok(mut guard) => *guard = Some(formation),
            Err(poisoned) => *poisoned.into_inner() = Some(formation),
        }
    }

    /// Adds this node's fingerprint and peer list to an outgoing request.
    /// A node in join mode that has not adopted one yet sends none (it sends
    /// no Raft RPC before it is a member, so this happens only for `Propose`).
    pub fn stamp<T>(&self, request: &mut tonic::Request<T>) {
        let Some(formation) = self.current() else {
            return;
        };
        let metadata = request.metadata_mut();
        if let Ok(value) = MetadataValue::try_from(formation.fingerprint.as_str()) {
            metadata.insert(CLUSTER_HEADER, value);
        }
        // Addresses are ASCII in practice; if not, the peer list is only
        // missing from a possible refusal message, the check still works.
        if let Ok(value) = MetadataValue::try_from(formation.peers.as_str()) {
            metadata.insert(PEERS_HEADER, value);
        }
    }

    /// Checks an incoming request's fingerprint against this node's.
    ///
    /// With no formation yet (join mode) and `adopt` set, the caller's
    /// fingerprint is persisted and becomes this node's. A mismatch is
    /// logged at error level and answered with `FAILED_PRECONDITION`.
    pub async fn check<T>(
        &self,
        request: &tonic::Request<T>,
        rpc: &'static str,
        adopt: bool,
    ) -> Result<(), tonic::Status> {
        let header = |key| {
            request
                .metadata()
                .get(key)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let theirs = header(CLUSTER_HEADER);
        let their_peers = header(PEERS_HEADER).unwrap_or_else(|| "unknown".to_owned());
        let Some(theirs) = theirs else {
            if self.current().is_none() && !adopt {
                // An unformed node has nothing to protect for non-Raft calls.
                return Ok(());
            }
            tracing::error!(
                node_id = self.node_id,
                rpc,
                "refusing Raft RPC without a {CLUSTER_HEADER} header"
            );
            return Err(tonic::Status::failed_precondition(format!(
                "coordinator {} refuses {rpc}: the request carries no {CLUSTER_HEADER} metadata",
                self.node_id
            )));
        };
        let ours = match self.current() {
            Some(ours) => ours,
            None if adopt => return self.adopt(theirs, their_peers).await,
            None => return Ok(()),
        };
        if ours.fingerprint == theirs {
            return Ok(());
        }
        tracing::error!(
            node_id = self.node_id,
            rpc,
            our_fingerprint = %ours.fingerprint,
            our_peers = %ours.peers,
            their_fingerprint = %theirs,
            their_peers = %their_peers,
            "refusing Raft RPC from a different cluster: --peers disagree between coordinators"
        );
        Err(tonic::Status::failed_precondition(format!(
            "cluster mismatch: coordinator {} was formed with peers [{}] (fingerprint {}), \
             the caller with peers [{}] (fingerprint {}); --peers must be identical on every \
             coordinator at formation (a node formed with the wrong list needs an empty data dir)",
            self.node_id, ours.peers, ours.fingerprint, their_peers, theirs
        )))
    }

    async fn adopt(&self, fingerprint: String, peers: String) -> Result<(), tonic::Status> {
        let _guard = self.adopting.lock().await;
        if let Some(current) = self.current() {
            // Another request adopted while this one waited.
            return if current.fingerprint == fingerprint {
                Ok(())
            } else {
                Err(tonic::Status::failed_precondition(format!(
                    "cluster mismatch: coordinator {} joined the cluster with fingerprint {} \
                     (peers [{}]); the caller has fingerprint {fingerprint} (peers [{peers}])",
                    self.node_id, current.fingerprint, current.peers
                )))
            };
        }
        let formation = Formation { fingerprint, peers };
        self.store.save_formation(&formation).await.map_err(|e| {
            tracing::error!(node_id = self.node_id, error = %e, "cannot persist adopted cluster fingerprint");
            tonic::Status::unavailable(format!(
                "coordinator {} cannot persist the cluster fingerprint: {e}",
                self.node_id
            ))
        })?;
        tracing::info!(
            node_id = self.node_id,
            fingerprint = %formation.fingerprint,
            peers = %formation.peers,
            "joined cluster: adopted the leader's fingerprint"
        );
        self.set(formation);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_stable_and_order_independent() {
        let a: BTreeMap<u64, String> = [(2, "b:2".to_owned()), (1, "a:1".to_owned())].into();
        let b: BTreeMap<u64, String> = [(1, "a:1".to_owned()), (2, "b:2".to_owned())].into();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(peers_string(&a), "1=a:1,2=b:2");
        assert_eq!(fingerprint(&a).len(), 16);
        // Pinned: a change here breaks clusters formed by older builds.
        assert_eq!(fingerprint(&BTreeMap::new()), "cbf29ce484222325");
        let c: BTreeMap<u64, String> = [(1, "a:1".to_owned()), (3, "b:2".to_owned())].into();
        assert_ne!(fingerprint(&a), fingerprint(&c));
    }
}
