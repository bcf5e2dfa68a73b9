//! [`StatusPublisher`]: computes and writes the status of every served
//! HTTPRoute and Gateway, in every cluster that defines it, skipping what
//! it already wrote.
//!
//! A route it wrote status for that is no longer served (detached from our
//! Gateways, or its Gateway left our class) gets our `parents[]` entries
//! removed, as the Gateway API asks of a controller that stops serving a
//! parent.
//!
//! It deliberately keeps only an in-memory record of what it last wrote:
//! a new leader starts empty and reads each object once before writing
//! (the writers skip unchanged statuses), so nothing is persisted. The
//! price: entries written by an earlier leader on a route that stopped
//! being served during the failover are not removed.

use super::ClusterSource;
use super::conditions::{RouteParentStatus, World, route_parent_statuses};
use super::desired::DesiredState;
use super::error::LiveError;
use super::gateway_conditions::{GatewayStatus, gateway_status};
use super::status::{write_gateway_status, write_route_status};
use std::collections::HashMap;
use switchyard_proto::model::{Resource, ResourceKey, RouteStatus};
use tracing::debug;

/// What was last written for one object in one cluster.
#[derive(Debug, Clone, PartialEq)]
enum Written {
    Route(Vec<RouteParentStatus>),
    Gateway(GatewayStatus),
}

/// Writes route and Gateway status for the leader.
#[derive(Debug)]
pub struct StatusPublisher {
    sources: Vec<ClusterSource>,
    controller_name: String,
    last: HashMap<(String, ResourceKey), Written>,
}

impl StatusPublisher {
    /// A publisher for the clusters that were watched.
    pub fn new(sources: Vec<ClusterSource>, controller_name: impl Into<String>) -> StatusPublisher {
        StatusPublisher {
            sources,
            controller_name: controller_name.into(),
            last: HashMap::new(),
        }
    }

    /// Computes every served object's status from `desired`, the
    /// coordinators' `routes` rows and the number of live proxies, and
    /// writes what changed. Returns the failures (the next call retries
    /// them); one failing object does not stop the others.
    pub async fn publish(
        &mut self,
        desired: &DesiredState,
        routes: &[RouteStatus],
        live_proxies: usize,
    ) -> Vec<LiveError> {
        let world = World::new(&desired.resources, &self.controller_name);
        let mut errors = Vec::new();
        let mut visited = std::collections::HashSet::new();
        for resource in &desired.resources {
            let key = resource.key();
            let Some(origins) = desired.origins.get(&key) else {
                continue;
            };
            for origin in origins {
                let Some(source) = self.sources.iter().find(|s| s.name == origin.cluster) else {
                    continue;
                };
                let wanted = match resource {
                    Resource::HttpRoute(route) => {
                        let mut route = route.clone();
                        route.meta.k8s_generation = origin.generation;
                        let row = routes.iter().find(|r| {
                            r.namespace == route.meta.namespace && r.name == route.meta.name
                        });
                        let rejected = desired
                            .rejected
                            .iter()
                            .find(|r| r.key == key && r.cluster == origin.cluster)
                            .map(|r| r.message.as_str());
                        Written::Route(route_parent_statuses(
                            &route,
                            &world,
                            row,
                            rejected,
                            &self.controller_name,
                        ))
                    }
                    Resource::Gateway(gateway) => {
                        let mut gateway = gateway.clone();
                        gateway.meta.k8s_generation = origin.generation;
                        Written::Gateway(gateway_status(&gateway, &world, live_proxies))
                    }
                    _ => continue,
                };
                let slot = (origin.cluster.clone(), key.clone());
                visited.insert(slot.clone());
                if self.last.get(&slot) == Some(&wanted) {
                    continue;
                }
                let result = match &wanted {
                    Written::Route(parents) => {
                        write_route_status(
                            &source.client,
                            &source.name,
                            &key.name,
                            &self.controller_name,
                            parents,
                        )
                        .await
                    }
                    Written::Gateway(status) => {
                        write_gateway_status(&source.client, &source.name, &key.name, status).await
                    }
                };
                match result {
                    Ok(outcome) => {
                        debug!(cluster = %source.name, object = %key, ?outcome, "status published");
                        self.last.insert(slot, wanted);
                    }
                    Err(e) => errors.push(e),
                }
            }
        }
        self.withdraw(&visited, &mut errors).await;
        errors
    }

    /// Removes our entries from routes written before but not served now.
    async fn withdraw(
        &mut self,
        visited: &std::collections::HashSet<(String, ResourceKey)>,
        errors: &mut Vec<LiveError>,
    ) {
        let stale: Vec<(String, ResourceKey)> = self
            .last
            .keys()
            .filter(|slot| !visited.contains(*slot))
            .cloned()
            .collect();
        for slot in stale {
            let (cluster, key) = &slot;
            let Some(source) = self.sources.iter().find(|s| s.name == *cluster) else {
                self.last.remove(&slot);
                continue;
            };
            if key.kind != switchyard_proto::model::Kind::HTTPRoute {
                // A Gateway that left our class is the new controller's to
                // report on; ours are overwritten by it.
                self.last.remove(&slot);
                continue;
            }
            match write_route_status(
                &source.client,
                &source.name,
                &key.name,
                &self.controller_name,
                &[],
            )
            .await
            {
                Ok(outcome) => {
                    debug!(%cluster, object = %key, ?outcome, "status withdrawn");
                    self.last.remove(&slot);
                }
                Err(e) => errors.push(e),
            }
        }
    }
}
