//! [`StatusPublisher`]: computes and writes the status of every served
//! GatewayClass, Gateway, HTTPRoute, GRPCRoute and BackendTLSPolicy — and
//! of routes that could not be read at all — in every cluster that
//! defines it, skipping what it already wrote; and the cutover Events.
//!
//! **Fenced, write by write.** Before every single write it asks the
//! [`Lease`] again: no term (leadership or quorum gone) stops the publish
//! at once; the term fences the write, and a write refused because a
//! newer leader wrote the object stops the publish too
//! ([`Publication::stopped`]).
//!
//! **Repair.** What it wrote is remembered with when it was confirmed;
//! after [`StatusPublisher::verify_every`] it reads the object again (a
//! GET, no write when unchanged), so an entry another writer clobbered —
//! `parents` is an atomic list any controller may overwrite whole — is
//! written again.
//!
//! **Withdrawal.** A route (or BackendTLSPolicy) it wrote status for that
//! is no longer served gets our `parents[]` (`ancestors[]`) entries
//! removed at once; and at the first publish of a term and every
//! `verify_every` it lists each cluster's routes and policies (`sweep`)
//! and removes our entries from every one not served now — including
//! those an earlier leader wrote.
//!
//! It deliberately keeps only memory (a new leader starts empty and reads
//! each object once before writing), decides no condition (the pure
//! `conditions`, `gateway_conditions`, `class_status`) and never reads
//! proxies' state (the caller passes it).

mod sweep;

use super::ClusterSource;
use super::addresses::Fleet;
use super::conditions::{
    Condition, FallBack, RouteParentStatus, World, name_taken_parent_statuses,
    route_parent_statuses, unread_route_parent_statuses,
};
use super::desired::DesiredState;
use super::error::LiveError;
use super::events::{CutoverEvent, transitions};
use super::export_status::{export_conditions, write_export_status};
use super::fence::Fenced;
use super::gateway_conditions::{GatewayStatus, gateway_status};
use super::leader::Lease;
use super::policy_status::{PolicyAncestorStatus, backend_tls_ancestors};
use super::status::{
    WriteOutcome, write_class_status, write_gateway_status, write_policy_status,
    write_route_status, write_unread_route_status,
};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use switchyard_proto::model::{Kind, ObjectName, ProxyStatus, Resource, ResourceKey, RouteStatus};
use tokio::time::Instant;
use tracing::debug;

/// The default of [`StatusPublisher::verify_every`].
pub const DEFAULT_VERIFY_EVERY: Duration = Duration::from_secs(60);

/// Where the proxies' LoadBalancer Service is: the source of every
/// Gateway's `status.addresses`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyService {
    /// The cluster (a [`ClusterSource::name`]).
    pub cluster: String,
    /// The Service.
    pub service: ObjectName,
}

/// What one publish did.
#[derive(Debug, Default)]
pub struct Publication {
    /// Writes that failed (the next publish retries them); one failing
    /// object does not stop the others.
    pub errors: Vec<LiveError>,
    /// Why the publish stopped before the end, if it did.
    pub stopped: Option<Stopped>,
}

impl Publication {
    /// No write failed and nothing stopped the publish.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty() && self.stopped.is_none()
    }
}

/// Why a publish stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The lease said this coordinator may not write any more.
    NotLeading,
    /// An object carried a newer leader's term.
    Fenced(Fenced),
}

/// What was last written for one object in one cluster.
#[derive(Debug, Clone, PartialEq)]
enum Written {
    Class(Option<i64>),
    Route(Vec<RouteParentStatus>),
    Unread(String),
    Gateway(GatewayStatus, Option<Fleet>),
    /// A ServiceExport's `Valid` and `Conflict`. Its slot is keyed by
    /// its Service's key (Services themselves get no status).
    Export(Vec<Condition>),
    /// A BackendTLSPolicy's ancestor entries.
    Policy(Vec<PolicyAncestorStatus>),
}

type Slot = (String, ResourceKey);

/// Writes status for the leader.
#[derive(Debug)]
pub struct StatusPublisher {
    sources: Vec<ClusterSource>,
    controller_name: String,
    proxy_service: Option<ProxyService>,
    verify_every: Duration,
    last: HashMap<Slot, (Written, Instant)>,
    swept: Option<Instant>,
    rows: HashMap<ObjectName, RouteStatus>,
}

impl StatusPublisher {
    /// A publisher for the clusters that were watched.
    pub fn new(sources: Vec<ClusterSource>, controller_name: impl Into<String>) -> StatusPublisher {
        StatusPublisher {
            sources,
            controller_name: controller_name.into(),
            proxy_service: None,
            verify_every: DEFAULT_VERIFY_EVERY,
            last: HashMap::new(),
            swept: None,
            rows: HashMap::new(),
        }
    }

    /// Reads Gateway addresses from `service` (without one, every
    /// Gateway is `Programmed` `False`, `AddressNotAssigned`).
    pub fn with_proxy_service(mut self, service: Option<ProxyService>) -> StatusPublisher {
        self.proxy_service = service;
        self
    }

    /// How long a written status is trusted before it is read again (and
    /// repaired if another writer changed it), and how often routes no
    /// longer served are swept. Zero: every publish reads everything.
    pub fn verify_every(mut self, every: Duration) -> StatusPublisher {
        self.verify_every = every;
        self
    }

    /// Computes every served object's status from `desired`, the
    /// coordinators' `routes` rows and `proxies` (liveness and the listener
    /// sockets each last reported), and
    /// writes what changed, asking `lease` before each write.
    pub async fn publish(
        &mut self,
        desired: &DesiredState,
        routes: &[RouteStatus],
        proxies: &[ProxyStatus],
        lease: &impl Lease,
    ) -> Publication {
        let mut run = Run {
            lease,
            out: Publication::default(),
            visited: HashSet::new(),
        };
        if lease.current_term().is_none() {
            run.out.stopped = Some(Stopped::NotLeading);
            return run.out;
        }
        let fleet = self.read_fleet().await;
        let world = World::new(&desired.resources, &self.controller_name);
        let served: HashSet<ResourceKey> = desired.resources.iter().map(Resource::key).collect();
        for resource in &desired.resources {
            if run.out.stopped.is_some() {
                break;
            }
            if let Resource::GatewayClass(class) = resource {
                let key = resource.key();
                for i in 0..self.sources.len() {
                    let slot = (self.sources[i].name.clone(), key.clone());
                    let wanted = Written::Class(class.meta.k8s_generation);
                    self.write(&mut run, slot, wanted, &world).await;
                }
                continue;
            }
            let key = resource.key();
            let Some(origins) = desired.origins.get(&key) else {
                continue;
            };
            for origin in origins {
                let wanted = match resource {
                    Resource::HttpRoute(route) => {
                        let rejected = desired
                            .rejected
                            .iter()
                            .find(|r| r.key == key && r.cluster == origin.cluster);
                        let mut route = route.clone();
                        let fall_back = match rejected {
                            // Served from its last good version, whose
                            // generation it keeps.
                            Some(r) => Some(FallBack {
                                why: &r.message,
                                newest_generation: origin.generation,
                            }),
                            None => {
                                route.meta.k8s_generation = origin.generation;
                                None
                            }
                        };
                        let row = routes.iter().find(|r| {
                            r.namespace == route.meta.namespace && r.name == route.meta.name
                        });
                        Written::Route(route_parent_statuses(
                            &route,
                            &world,
                            row,
                            fall_back,
                            &self.controller_name,
                        ))
                    }
                    Resource::Gateway(gateway) => {
                        let mut gateway = gateway.clone();
                        gateway.meta.k8s_generation = origin.generation;
                        Written::Gateway(gateway_status(&gateway, &world, proxies), fleet.clone())
                    }
                    Resource::BackendTlsPolicy(policy) => {
                        let mut policy = policy.clone();
                        let rejected = desired
                            .rejected
                            .iter()
                            .any(|r| r.key == key && r.cluster == origin.cluster);
                        // Served from its last good version when the newest
                        // cannot be read: report that version's generation,
                        // never one whose spec is not what is served.
                        if !rejected {
                            policy.meta.k8s_generation = origin.generation;
                        }
                        let controller = &self.controller_name;
                        Written::Policy(backend_tls_ancestors(&policy, &world, controller))
                    }
                    _ => continue,
                };
                let slot = (origin.cluster.clone(), key.clone());
                self.write(&mut run, slot, wanted, &world).await;
            }
        }
        for export in &desired.exports {
            if run.out.stopped.is_some() {
                break;
            }
            let conflict = desired
                .export_conflicts
                .iter()
                .find(|c| c.cluster == export.cluster && c.service == export.name);
            let wanted = Written::Export(export_conditions(conflict, export.generation));
            let key = ResourceKey {
                kind: Kind::Service,
                name: export.name.clone(),
            };
            self.write(&mut run, (export.cluster.clone(), key), wanted, &world)
                .await;
        }
        for r in &desired.rejected {
            if run.out.stopped.is_some() {
                break;
            }
            if r.key.kind.is_route() && !served.contains(&r.key) {
                let slot = (r.cluster.clone(), r.key.clone());
                self.write(&mut run, slot, Written::Unread(r.message.clone()), &world)
                    .await;
            }
        }
        // GRPCRoutes left out for their name: why, where they are defined.
        for collision in &desired.route_name_collisions {
            let key = ResourceKey {
                kind: Kind::GRPCRoute,
                name: collision.route.meta.object_name(),
            };
            for origin in &collision.origins {
                if run.out.stopped.is_some() {
                    break;
                }
                let mut route = collision.route.clone();
                route.meta.k8s_generation = origin.generation;
                let parents = name_taken_parent_statuses(&route, &world, &self.controller_name);
                let slot = (origin.cluster.clone(), key.clone());
                self.write(&mut run, slot, Written::Route(parents), &world)
                    .await;
            }
        }
        self.cutover_events(&mut run, desired, routes, &world).await;
        self.withdraw(&mut run).await;
        self.sweep(&mut run).await;
        run.out
    }

    /// Writes `wanted` at `slot` unless it was written and confirmed
    /// within `verify_every`.
    async fn write(
        &mut self,
        run: &mut Run<'_, impl Lease>,
        slot: Slot,
        wanted: Written,
        world: &World<'_>,
    ) {
        run.visited.insert(slot.clone());
        if let Some((last, at)) = self.last.get(&slot)
            && *last == wanted
            && at.elapsed() < self.verify_every
        {
            return;
        }
        let Some(term) = run.term() else { return };
        let Some(source) = self.sources.iter().find(|s| s.name == slot.0) else {
            return;
        };
        let (client, cluster, name) = (&source.client, source.name.as_str(), &slot.1.name);
        let controller = self.controller_name.as_str();
        let result = match &wanted {
            Written::Class(_) => {
                write_class_status(client, cluster, &name.name, controller, term).await
            }
            Written::Route(parents) => {
                write_route_status(
                    client,
                    cluster,
                    slot.1.kind,
                    name,
                    controller,
                    parents,
                    term,
                )
                .await
            }
            Written::Unread(why) => {
                let statuses =
                    |stub: &_| unread_route_parent_statuses(stub, world, why, controller);
                write_unread_route_status(
                    client,
                    cluster,
                    slot.1.kind,
                    name,
                    controller,
                    statuses,
                    term,
                )
                .await
            }
            Written::Gateway(status, fleet) => {
                write_gateway_status(client, cluster, name, status, fleet.as_ref(), term).await
            }
            Written::Export(conditions) => {
                write_export_status(client, cluster, name, conditions, term).await
            }
            Written::Policy(ancestors) => {
                write_policy_status(client, cluster, name, controller, ancestors, term).await
            }
        };
        if run.settle(cluster, &slot.1, result) {
            self.last.insert(slot, (wanted, Instant::now()));
        }
    }

    /// Emits the Events of the cutover transitions seen since the last
    /// publish, in every cluster defining the route.
    async fn cutover_events(
        &mut self,
        run: &mut Run<'_, impl Lease>,
        desired: &DesiredState,
        routes: &[RouteStatus],
        world: &World<'_>,
    ) {
        for row in routes {
            let name = ObjectName::new(row.namespace.clone(), row.name.clone());
            let events: Vec<CutoverEvent> = transitions(self.rows.get(&name), row);
            // One served route per name, of either kind (the merge leaves
            // out a GRPCRoute named like an HTTPRoute).
            let route = desired.resources.iter().find_map(|r| match r {
                Resource::HttpRoute(route) if route.meta.object_name() == name => Some(route),
                _ => None,
            });
            let key = ResourceKey {
                kind: route.map_or(Kind::HTTPRoute, |r| r.kind.kind()),
                name: name.clone(),
            };
            let origins = desired.origins.get(&key).map_or(&[][..], Vec::as_slice);
            let mut done = true;
            for event in &events {
                for origin in origins {
                    if run.term().is_none() {
                        return;
                    }
                    let Some(source) = self.sources.iter().find(|s| s.name == origin.cluster)
                    else {
                        continue;
                    };
                    let emitted = super::events::emit(
                        source,
                        key.kind,
                        &name,
                        route,
                        world,
                        event,
                        &self.controller_name,
                    )
                    .await;
                    if let Err(e) = emitted {
                        done = false;
                        run.out.errors.push(e);
                    }
                }
            }
            if done {
                self.rows.insert(name, row.clone());
            }
        }
    }

    /// The proxies' addresses, read once per publish.
    async fn read_fleet(&self) -> Option<Fleet> {
        let wanted = self.proxy_service.as_ref()?;
        let label = format!("{}/{}", wanted.cluster, wanted.service);
        let Some(source) = self.sources.iter().find(|s| s.name == wanted.cluster) else {
            return Some(Fleet {
                service: label,
                addresses: Vec::new(),
                problem: Some(format!("no cluster named {:?} is watched", wanted.cluster)),
            });
        };
        let api: kube::Api<k8s_openapi::api::core::v1::Service> =
            kube::Api::namespaced(source.client.clone(), &wanted.service.namespace);
        Some(match api.get(&wanted.service.name).await {
            Ok(service) => Fleet::of_service(&label, &service),
            Err(e) => Fleet {
                service: label,
                addresses: Vec::new(),
                problem: Some(e.to_string()),
            },
        })
    }
}

/// The state of one publish.
struct Run<'a, L> {
    lease: &'a L,
    out: Publication,
    visited: HashSet<Slot>,
}

impl<L: Lease> Run<'_, L> {
    /// The term to write with, or `None` (and the publish stops) when
    /// this coordinator may not write now.
    fn term(&mut self) -> Option<u64> {
        if self.out.stopped.is_some() {
            return None;
        }
        let term = self.lease.current_term();
        if term.is_none() {
            debug!("leadership gone: status publish stopped");
            self.out.stopped = Some(Stopped::NotLeading);
        }
        term
    }

    /// Records a write's result; true when what was wanted is stored.
    fn settle(
        &mut self,
        cluster: &str,
        key: &ResourceKey,
        result: Result<WriteOutcome, LiveError>,
    ) -> bool {
        match result {
            Ok(WriteOutcome::Fenced(fenced)) => {
                debug!(%cluster, object = %key, %fenced, "status write fenced: publish stopped");
                self.out.stopped = Some(Stopped::Fenced(fenced));
                false
            }
            Ok(outcome) => {
                debug!(%cluster, object = %key, ?outcome, "status published");
                true
            }
            Err(e) => {
                self.out.errors.push(e);
                false
            }
        }
    }
}
