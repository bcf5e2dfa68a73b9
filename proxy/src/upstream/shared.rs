//! The proxy's endpoints by address, health path and protocol, shared by
//! every backend that lists them.
//!
//! Services often share pods (a Service per port, per version label, per
//! route): keyed by Service, a proxy ran one health check and kept one
//! connection pool per Service for the same `ip:port`. Here each
//! `(ip:port, health path, protocol, transport)` is one [`Endpoint`] however many backends use
//! it; the map holds them weakly, so it never keeps an endpoint alive that
//! no backend lists. An endpoint retired by its last user is never handed
//! out again (a user arriving a moment later gets a fresh one).
//!
//! Cost: O(1) per endpoint of an endpoint-set change; the map is swept of
//! dead entries on each sync, O(endpoints).

use super::discovery::EndpointSet;
use super::endpoint::Endpoint;
use super::{BackendInfo, Context, health};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use switchyard_proto::model::UpstreamProtocol;
use switchyard_proto::model::gateway_api::BackendTransport;

/// What makes two backends' endpoints the same one: address, health
/// path, protocol and transport (plaintext, or TLS with one policy's
/// trust: two policies for one address are two data paths).
type EndpointKey = (SocketAddr, String, UpstreamProtocol, BackendTransport);

/// Endpoints by [`EndpointKey`].
#[derive(Debug, Default)]
pub(crate) struct SharedEndpoints {
    by_key: Mutex<HashMap<EndpointKey, Weak<Endpoint>>>,
}

impl SharedEndpoints {
    /// The endpoint for `addr` probed at `set`'s health path and spoken to
    /// in its protocol over its transport, with `user` among
    /// its users: the shared one if some backend already uses it, else a
    /// new one whose health check starts now. `seed` is an endpoint at the
    /// same address the user is leaving (its health path changed): a new
    /// endpoint starts as healthy as it was.
    pub(crate) fn acquire(
        &self,
        ctx: &Arc<Context>,
        addr: SocketAddr,
        set: &EndpointSet,
        user: &Arc<BackendInfo>,
        seed: Option<&Endpoint>,
    ) -> Arc<Endpoint> {
        let mut map = self.by_key.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (
            addr,
            set.health_path.clone(),
            set.protocol,
            set.transport.clone(),
        );
        if let Some(existing) = map.get(&key).and_then(Weak::upgrade)
            && existing.add_user(user)
        {
            return existing;
        }
        let endpoint = Arc::new(Endpoint::new(
            addr,
            set.health_path.clone(),
            set.protocol,
            set.transport.clone(),
            Arc::clone(ctx),
        ));
        if let Some(seed) = seed {
            endpoint.seed_health_from(seed);
        }
        // A fresh endpoint is not retired: adding its first user succeeds.
        endpoint.add_user(user);
        let handle = ctx.spawn(health::run(Arc::downgrade(&endpoint)));
        endpoint.set_checker(handle);
        map.insert(key, Arc::downgrade(&endpoint));
        endpoint
    }

    /// Forgets endpoints nobody holds any more.
    pub(crate) fn sweep(&self) {
        let mut map = self.by_key.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, e| e.strong_count() > 0);
    }

    /// Endpoints alive (shared ones once).
    pub(crate) fn len(&self) -> usize {
        let map = self.by_key.lock().unwrap_or_else(PoisonError::into_inner);
        map.values().filter(|e| e.strong_count() > 0).count()
    }
}
