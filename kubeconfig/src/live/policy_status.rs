//! BackendTLSPolicy status: which of our Gateways a served policy is
//! reported on (its `status.ancestors`), and the write of those entries.
//!
//! **Ancestors.** A policy targets Services; the Gateway API reports it on
//! the Gateways whose routes send to them (GEP-1897, and the
//! `PolicyAncestorStatus` docs: "the relevant object for status is the
//! Gateway"). So a policy gets one entry per Gateway of ours that a served
//! route attaches to (at least one listener bound) and whose rules — or
//! mirror filters — resolve to a Service port the policy targets: the
//! whole Service, or the port named by `sectionName`.
//!
//! **Conditions.** `Accepted` and `ResolvedRefs` are not decided here:
//! they are [`Topology::backend_tls_policy_conditions`], the rule the
//! proxy follows to choose TLS, refuse a port or fall back to nothing, so
//! what `kubectl get` shows and what is served cannot disagree. They are
//! the policy's, the same on every ancestor.
//!
//! **The write.** `status.ancestors` is an atomic list shared by every
//! controller (entries keyed by `ancestorRef` and `controllerName` only by
//! convention), so it is written like a route's `parents`: read, replace
//! our entries, force-apply guarded by the resourceVersion, fenced by the
//! Raft term ([`super::write_policy_status`]).
//!
//! It deliberately does not decide which policies are served (the merge
//! keeps those targeting a served Service) nor when to write (the
//! publisher).
//!
//! [`Topology::backend_tls_policy_conditions`]:
//! switchyard_proto::model::gateway_api::Topology::backend_tls_policy_conditions

use super::conditions::{Condition, ConditionStatus, World};
use super::merge::service_refs;
use std::collections::BTreeSet;
use switchyard_proto::model::{BackendTlsPolicy, ObjectName, Resource};

/// One entry of a policy's `status.ancestors`: a Gateway of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyAncestorStatus {
    /// The Gateway (reported as group `gateway.networking.k8s.io`, kind
    /// `Gateway`).
    pub gateway: ObjectName,
    /// Our controller name: the entries we own.
    pub controller_name: String,
    /// `Accepted` and `ResolvedRefs`.
    pub conditions: Vec<Condition>,
}

/// The ancestor entries of `policy` in the served set `world`, their
/// conditions at the policy's `meta.k8s_generation`; empty when no served
/// route of ours sends to a Service port it targets (or the policy is not
/// in `world`).
pub fn backend_tls_ancestors(
    policy: &BackendTlsPolicy,
    world: &World<'_>,
    controller_name: &str,
) -> Vec<PolicyAncestorStatus> {
    let topology = &world.topology;
    let Some(verdict) = topology.backend_tls_policy_conditions(&policy.meta.object_name()) else {
        return Vec::new();
    };
    let mut gateways: BTreeSet<ObjectName> = BTreeSet::new();
    for route in &world.routes {
        let sends_to_target = service_refs(route)
            .filter_map(|b| topology.resolve(route, b).ok())
            .any(|backend| targets(policy, world.resources, &backend.service, backend.port));
        if !sends_to_target {
            continue;
        }
        let (attached, _) = topology.attach_route(route);
        gateways.extend(attached.iter().map(|a| a.gateway.meta.object_name()));
    }
    let generation = policy.meta.k8s_generation;
    let condition = |type_: &str, verdict: &Result<(), (&str, String)>, ok: &str| match verdict {
        Ok(()) => Condition {
            type_: type_.to_string(),
            status: ConditionStatus::True,
            reason: type_.to_string(),
            message: ok.to_string(),
            observed_generation: generation,
        },
        Err((reason, message)) => Condition {
            type_: type_.to_string(),
            status: ConditionStatus::False,
            reason: reason.to_string(),
            message: message.clone(),
            observed_generation: generation,
        },
    };
    let conditions = vec![
        condition(
            "Accepted",
            &verdict.accepted,
            "the policy applies to the Service ports it targets",
        ),
        condition(
            "ResolvedRefs",
            &verdict.resolved_refs,
            "every CA certificate reference resolved",
        ),
    ];
    gateways
        .into_iter()
        .map(|gateway| PolicyAncestorStatus {
            gateway,
            controller_name: controller_name.to_string(),
            conditions: conditions.clone(),
        })
        .collect()
}

/// Whether `policy` targets port `port` of `service`: a core Service of
/// its own namespace, whole or by the port's name (`sectionName`).
fn targets(
    policy: &BackendTlsPolicy,
    resources: &[Resource],
    service: &ObjectName,
    port: u16,
) -> bool {
    policy.target_services().any(|(target, section)| {
        target == *service
            && section.is_none_or(|section| {
                resources.iter().any(|r| match r {
                    Resource::Service(s) if s.meta.object_name() == *service => s
                        .ports
                        .iter()
                        .any(|p| p.port == port && p.name.as_deref() == Some(section)),
                    _ => false,
                })
            })
    })
}

#[cfg(test)]
mod tests;
