//! Builds [`ClusterStatus`]: replicated facts from this coordinator's state
//! machine, plus — on the leader — leases, evidence, applied generations
//! and the proxies' listener sockets from the cutover engine.

use super::{Coordinator, now_ms};
use std::collections::BTreeSet;
use switchyard_proto::model::{ClusterStatus, ObjectName};
use switchyard_proto::pb;
use tonic::Status;

/// What a status request asks for: the route rows of `routes` (every
/// route for `None`), and the proxy rows unless `without_proxies`.
#[derive(Debug, Clone, Default)]
pub(crate) struct StatusScope {
    pub routes: Option<BTreeSet<ObjectName>>,
    pub without_proxies: bool,
}

/// The status as this coordinator sees it, with a row for each route in
/// the scope: the work per route (its verdict, its applied generation on
/// every live proxy) is O(proxies), so a filtered status costs what its
/// routes cost; the proxy rows cost O(proxies) more, unless left out.
pub(crate) fn cluster_status(c: &Coordinator, scope: &StatusScope) -> ClusterStatus {
    let state = c.node.state().borrow().clone();
    let metrics = c.node.metrics().borrow().clone();
    let now = now_ms();
    let mut routes = state.route_statuses_of(scope.routes.as_ref());
    let mut proxies = if scope.without_proxies {
        Vec::new()
    } else {
        state.proxy_statuses()
    };
    // A copy (O(1): the engine's per-proxy maps are shared): the per-route
    // work below runs without the engine lock, which heartbeats take too.
    if let Some(engine) = c.with_engine(|engine| engine.clone()) {
        let live = engine.live_proxies(&state, now);
        for proxy in &mut proxies {
            proxy.live = live.contains_key(proxy.id.as_str());
            proxy.listeners = engine.sockets_of(&proxy.id).map(<[_]>::to_vec);
        }
        for row in &mut routes {
            let name = ObjectName::new(row.namespace.clone(), row.name.clone());
            row.evidence = engine.verdict(&state, &name, now).map(|v| v.summary);
            if let Some((applied, ready)) = engine.applied_summary_among(&live, &state, &name) {
                row.applied = Some(applied);
                // A route served nowhere is never Ready, whatever the
                // proxies have applied.
                row.ready = ready && row.not_served.is_none();
            }
        }
    }
    let election_timeout = c.config.node.raft.election_timeout_max;
    let stale = if c.node.is_leader() && !c.leads_with_quorum() {
        Some(format!(
            "coordinator {} leads but has not reached a quorum within {election_timeout:?}: proxies, leases and evidence shown may be stale",
            c.config.node.id
        ))
    } else if !c.node.is_leader() {
        match c.node.since_leader_contact() {
            Some(since) if since > election_timeout => Some(format!(
                "coordinator {} has not heard from a leader for {:.1}s: it may be cut off from a quorum, and what it shows may be stale",
                c.config.node.id,
                since.as_secs_f64()
            )),
            None if metrics.current_leader.is_none() => {
                Some(format!("coordinator {} knows no leader", c.config.node.id))
            }
            _ => None,
        }
    } else {
        None
    };
    ClusterStatus {
        answered_by: c.config.node.id,
        leader: metrics.current_leader,
        term: metrics.current_term,
        applied_index: state.last_index,
        members: metrics
            .membership_config
            .membership()
            .nodes()
            .map(|(id, node)| (*id, node.addr.clone()))
            .collect(),
        routes,
        proxies,
        stale,
    }
}

/// The scope of a status request: every route or the names asked for
/// (`namespace/name`), with or without proxy rows; or why a name does not
/// parse.
pub(crate) fn scope(request: &pb::StatusRequest) -> Result<StatusScope, Status> {
    Ok(StatusScope {
        routes: route_filter(request)?,
        without_proxies: request.without_proxies,
    })
}

/// The route filter of a status request: `None` for every route.
fn route_filter(request: &pb::StatusRequest) -> Result<Option<BTreeSet<ObjectName>>, Status> {
    if !request.only_routes {
        return Ok(None);
    }
    request
        .routes
        .iter()
        .map(|r| {
            r.split_once('/')
                .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
                .map(|(ns, name)| ObjectName::new(ns, name))
                .ok_or_else(|| {
                    Status::invalid_argument(format!("route {r:?} is not namespace/name"))
                })
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// The status as a gRPC reply.
pub(crate) fn reply(c: &Coordinator, scope: &StatusScope) -> Result<pb::StatusReply, Status> {
    let status_json = serde_json::to_vec(&cluster_status(c, scope))
        .map_err(|e| Status::internal(format!("status does not serialize: {e}")))?;
    Ok(pb::StatusReply { status_json })
}
