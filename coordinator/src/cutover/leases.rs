//! Proxy leases: when each proxy was last heard from.

use imbl::OrdMap;

/// Last-seen times of proxies, in ms since the Unix epoch. A persistent
/// map: copies of the engine share it (see `CutoverEngine`).
#[derive(Debug, Clone, Default)]
pub struct Leases {
    last_seen: OrdMap<String, (String, u64)>,
}

impl Leases {
    /// Records that `proxy` (in `zone`) was heard from at `now_ms`. Time
    /// never goes backwards for a lease, even if the caller's clock does.
    pub fn renew(&mut self, proxy: &str, zone: &str, now_ms: u64) {
        // The common case, a known proxy in its zone, allocates nothing.
        match self.last_seen.get_mut(proxy) {
            Some((known_zone, seen)) => {
                if known_zone != zone {
                    *known_zone = zone.to_string();
                }
                *seen = (*seen).max(now_ms);
            }
            None => {
                self.last_seen
                    .insert(proxy.to_string(), (zone.to_string(), now_ms));
            }
        }
    }

    /// Whether the proxy has a lease at all.
    pub fn knows(&self, proxy: &str) -> bool {
        self.last_seen.contains_key(proxy)
    }

    /// Every proxy with a lease.
    pub fn ids(&self) -> impl Iterator<Item = &String> {
        self.last_seen.keys()
    }

    /// When the proxy was last heard from, if it has a lease.
    pub fn last_seen_ms(&self, proxy: &str) -> Option<u64> {
        self.last_seen.get(proxy).map(|(_, seen)| *seen)
    }

    /// Renews every lease at `now_ms` (a leader that was cut off from its
    /// quorum and is back: nobody could reach it meanwhile).
    pub fn renew_all(&mut self, now_ms: u64) {
        let ids: Vec<String> = self.last_seen.keys().cloned().collect();
        for id in ids {
            if let Some((_, seen)) = self.last_seen.get_mut(&id) {
                *seen = (*seen).max(now_ms);
            }
        }
    }

    /// Forgets a proxy.
    pub fn remove(&mut self, proxy: &str) {
        self.last_seen.remove(proxy);
    }

    /// Heard from within `ttl_ms` of `now_ms`.
    pub fn is_live(&self, proxy: &str, now_ms: u64, ttl_ms: u64) -> bool {
        self.last_seen
            .get(proxy)
            .is_some_and(|(_, seen)| now_ms.saturating_sub(*seen) < ttl_ms)
    }

    /// Known and silent for at least `ttl_ms`. A proxy the engine has never
    /// heard of is not expired by this (it has no lease to expire; the
    /// engine gives every registered proxy a lease when it starts).
    pub fn is_expired(&self, proxy: &str, now_ms: u64, ttl_ms: u64) -> bool {
        self.last_seen
            .get(proxy)
            .is_some_and(|(_, seen)| now_ms.saturating_sub(*seen) >= ttl_ms)
    }

    /// Heard from strictly after `since_ms`.
    pub fn seen_since(&self, proxy: &str, since_ms: u64) -> bool {
        self.last_seen
            .get(proxy)
            .is_some_and(|(_, seen)| *seen > since_ms)
    }
}
