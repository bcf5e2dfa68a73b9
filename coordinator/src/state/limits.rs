//! Store-wide size limits: how many HTTPRoutes and endpoint addresses the
//! replicated state may hold, how large one object and the whole
//! configuration proxies receive may be, and the check an apply must pass.
//!
//! Why a configuration size limit: proxies receive the configuration as
//! one gRPC message; one that does not fit stops configuration for the
//! whole fleet (every watch fails and no later change arrives). So an
//! apply that would make it undeliverable is refused, and so is any single
//! object larger than `--max-object-bytes` (anyone who may write one
//! HTTPRoute in a watched cluster could otherwise stop the fleet).
//!
//! Cost: the route count is the map's length and the endpoint address
//! count comes from the state's derived index (`super::derived`, kept by
//! `apply`), so the check costs in proportion to the apply. Only the
//! configuration size (checked when an entry carries
//! `max_config_bytes`, which goes with the single-message design) is
//! still recomputed per apply, in proportion to the store.
//!
//! Owns: [`StoreLimits`] (carried inside `Command::Apply`), the counting of
//! routes and endpoint addresses, and the refuse-or-accept decision. Does
//! not own: where the numbers come from (the proposing coordinator's flags,
//! see `crate::server::Limits`) or counting refusals in metrics (the server
//! does that on the answer).
//!
//! Why the limits travel in the command rather than being read from each
//! coordinator's flags at apply time: coordinators of one group may run
//! with different flags (during a rolling change of `--max-routes`, say).
//! If each replica checked against its own flags, one could accept an
//! entry another refuses and their states would diverge. With the limits
//! in the entry, the decision is a function of the log alone, like the
//! leader's clock reading in `now_ms`.

use super::ReplicatedState;
use super::command::CommandError;
use super::derived::addresses;
use serde::{Deserialize, Serialize};
use switchyard_proto::model::Resource;

/// The limits one apply is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreLimits {
    /// Most HTTPRoutes stored at once.
    pub max_routes: usize,
    /// Most endpoint addresses stored at once, summed over every stored
    /// EndpointSlice (an endpoint listing two addresses counts twice).
    pub max_endpoints: usize,
    /// Largest object, as JSON bytes. `None` in entries written before
    /// size limits existed.
    #[serde(default)]
    pub max_object_bytes: Option<usize>,
    /// Largest configuration proxies can receive, as JSON bytes. `None` in
    /// entries written before size limits existed.
    #[serde(default)]
    pub max_config_bytes: Option<usize>,
}

/// Which store-wide limit an apply ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoreLimit {
    /// `--max-routes`.
    Routes,
    /// `--max-endpoints`.
    Endpoints,
    /// `--max-message-bytes`: the configuration proxies receive.
    ConfigBytes,
}

impl StoreLimit {
    /// What is counted, plural, for error messages.
    pub fn noun(self) -> &'static str {
        match self {
            StoreLimit::Routes => "HTTPRoutes",
            StoreLimit::Endpoints => "endpoint addresses",
            StoreLimit::ConfigBytes => "bytes of configuration for proxies",
        }
    }

    /// The coordinator flag that sets it.
    pub fn flag(self) -> &'static str {
        match self {
            StoreLimit::Routes => "--max-routes",
            StoreLimit::Endpoints => "--max-endpoints",
            StoreLimit::ConfigBytes => "--max-message-bytes",
        }
    }

    /// Its `limit` label value in `switchyard_coordinator_limit_hits_total`.
    pub fn label(self) -> &'static str {
        match self {
            StoreLimit::Routes => "routes",
            StoreLimit::Endpoints => "endpoints",
            StoreLimit::ConfigBytes => "config_bytes",
        }
    }
}

impl ReplicatedState {
    /// Refuses `resources` (already validated, without duplicates) if
    /// storing them would take the route or endpoint count past `limits`.
    ///
    /// Only growth past a limit is refused: an apply that keeps a count
    /// where it is, or lowers it, is accepted even when the store is
    /// already over (it got there under higher limits, or before limits
    /// existed). Otherwise lowering a limit would freeze every object until
    /// enough were deleted.
    pub(super) fn check_limits(
        &self,
        resources: &[Resource],
        limits: &StoreLimits,
    ) -> Result<(), CommandError> {
        let routes = self.routes.len();
        let new_routes = resources
            .iter()
            .filter(|r| match r {
                Resource::HttpRoute(route) => !self.routes.contains_key(&route.meta.object_name()),
                _ => false,
            })
            .count();
        check(
            StoreLimit::Routes,
            routes,
            routes + new_routes,
            limits.max_routes,
        )?;

        // Kept by the derived index: O(1), not a walk of the store.
        let endpoints = self.endpoint_count();
        let (mut added, mut removed) = (0, 0);
        for resource in resources {
            if let Resource::EndpointSlice(slice) = resource {
                added += addresses(slice);
                if let Some(Resource::EndpointSlice(old)) = self.resources.get(&resource.key()) {
                    removed += addresses(old);
                }
            }
        }
        // `removed` is part of `endpoints`, so this cannot underflow.
        let after = endpoints - removed + added;
        check(
            StoreLimit::Endpoints,
            endpoints,
            after,
            limits.max_endpoints,
        )?;
        if let Some(max) = limits.max_object_bytes {
            for resource in resources {
                let bytes = json_len(resource);
                if bytes > max {
                    return Err(CommandError::ObjectTooLarge {
                        object: resource.key().to_string(),
                        bytes,
                        max,
                    });
                }
            }
        }
        if let Some(max) = limits.max_config_bytes {
            let current = self.config_bytes();
            let mut after = current;
            for resource in resources {
                let grown = json_len(resource);
                let replaced = match resource {
                    // A route's record keeps its active spec and gains (or
                    // replaces) the pending one.
                    Resource::HttpRoute(route) => self
                        .routes
                        .get(&route.meta.object_name())
                        .and_then(|r| r.pending.as_ref())
                        .map_or(0, |p| json_len(&p.target.spec)),
                    other => self.resources.get(&other.key()).map_or(0, json_len),
                };
                after = (after + grown).saturating_sub(replaced);
            }
            check(StoreLimit::ConfigBytes, current, after, max)?;
        }
        Ok(())
    }

    /// The size of the configuration proxies receive, as JSON bytes
    /// (within a few bytes per object of the snapshot's encoding).
    pub fn config_bytes(&self) -> usize {
        self.resources.values().map(json_len).sum::<usize>()
            + self.routes.values().map(json_len).sum::<usize>()
            + json_len(&self.endpoint_generations)
    }
}

fn check(limit: StoreLimit, current: usize, after: usize, max: usize) -> Result<(), CommandError> {
    if after > max && after > current {
        return Err(CommandError::OverLimit {
            limit,
            current,
            after,
            max,
        });
    }
    Ok(())
}

/// The length of `value`'s JSON, without building it.
fn json_len<T: Serialize>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Model types always serialize (no non-string map keys, no failing
    // impls); a failure would only make the estimate smaller.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}
