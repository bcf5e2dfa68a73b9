//! The Gateway API rules switchyard follows, in one place: which Gateways
//! are ours, which of their listeners conflict (all our Gateways share one
//! proxy fleet, merged by port and hostname: see `conflicts`), which
//! listeners a route attaches to (parentRefs, `allowedRoutes`, hostname
//! intersection, never a conflicted listener), whether a backendRef
//! resolves (kind, ReferenceGrant, Service and port), and whether the
//! proxies bound a listener's port (`programmed`).
//!
//! Pure, with typed reasons named as the Gateway API names them. The
//! proxy's router (what is served), the Kubernetes status writer (what
//! `kubectl get` shows) and the coordinators' status (`switchyard status`,
//! `apply --wait`) all ask [`Topology`], so written status and served
//! behaviour cannot disagree.
//!
//! Not here: matching requests, precedence between routes, filters (the
//! router's), readiness of backends (the cutover engine's).

mod attach;
mod backend_tls;
mod conflicts;
mod hostname;
mod programmed;
mod refs;
mod tls;

pub use attach::{Attached, NotAttached, listener_allows};
pub use backend_tls::{
    BackendTlsPolicyConditions, BackendTlsProblem, BackendTransport, Trust, UpstreamTls,
};
pub use conflicts::{
    ConflictReason, ListenerConflict, ListenerRef, gateway_precedence, listener_conflicts,
};
pub use hostname::{HostPattern, effective_hostnames};
pub use programmed::{FailedBind, PortState, listener_port_state};
pub use refs::Unresolved;
pub use tls::{
    ListenerTlsProblem, ListenerTlsResolution, ListenerTransport, ServedCertificate, certified_key,
};

use super::backend::{ReferenceGrant, Service};
use super::backend_tls::{BackendTlsPolicy, ConfigMap};
use super::gateway::{CONTROLLER_NAME, Gateway, GatewayClass, Namespace};
use super::meta::ObjectName;
use super::resource::Resource;
use super::secret::Secret;
use super::snapshot::ConfigSnapshot;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// The API group of Gateway API kinds (HTTPRoute, Gateway), as parentRefs,
/// `allowedRoutes.kinds` and ReferenceGrants name it.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// The label Kubernetes puts on every Namespace with its own name;
/// selectors commonly use it, and configurations written by hand may lack
/// it.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The objects the rules read, indexed: GatewayClasses controlled by our
/// controller, Gateways, Namespaces' labels, Services and ReferenceGrants;
/// and, computed once, the conflicted listeners of our Gateways.
#[derive(Debug, Default)]
pub struct Topology<'a> {
    our_classes: BTreeSet<&'a str>,
    gateways: BTreeMap<ObjectName, &'a Gateway>,
    namespaces: BTreeMap<&'a str, &'a BTreeMap<String, String>>,
    services: BTreeMap<(&'a str, &'a str), &'a Service>,
    grants: Vec<&'a ReferenceGrant>,
    secrets: BTreeMap<(&'a str, &'a str), &'a Secret>,
    config_maps: BTreeMap<(&'a str, &'a str), &'a ConfigMap>,
    backend_tls_policies: Vec<&'a BackendTlsPolicy>,
    conflicts: BTreeMap<ListenerRef, ListenerConflict>,
    /// How each listener of ours is served (`tls`), worked out on the
    /// first question: Secrets are parsed once per topology.
    transports: OnceLock<BTreeMap<ListenerRef, ListenerTlsResolution>>,
    /// BackendTLSPolicies worked out on the first question.
    backend_tls: OnceLock<backend_tls::BackendTlsIndex>,
}

impl<'a> Topology<'a> {
    /// An empty topology whose Gateways count as ours when their class
    /// names `controller`; fill it with [`Topology::add`].
    fn empty() -> Self {
        Topology::default()
    }

    /// Adds one object (kinds the rules do not read are ignored).
    fn add(&mut self, controller: &str, resource: Refs<'a>) {
        match resource {
            Refs::Class(c) => {
                if c.controller_name == controller {
                    self.our_classes.insert(c.meta.name.as_str());
                }
            }
            Refs::Gateway(g) => {
                self.gateways.insert(g.meta.object_name(), g);
            }
            Refs::Namespace(n) => {
                self.namespaces.insert(n.meta.name.as_str(), &n.meta.labels);
            }
            Refs::Service(s) => {
                self.services
                    .insert((s.meta.namespace.as_str(), s.meta.name.as_str()), s);
            }
            Refs::Grant(g) => self.grants.push(g),
            Refs::Secret(s) => {
                self.secrets
                    .insert((s.meta.namespace.as_str(), s.meta.name.as_str()), s);
            }
            Refs::ConfigMap(m) => {
                self.config_maps
                    .insert((m.meta.namespace.as_str(), m.meta.name.as_str()), m);
            }
            Refs::BackendTlsPolicy(p) => self.backend_tls_policies.push(p),
        }
    }

    /// The topology of a configuration snapshot, for switchyard's
    /// controller ([`CONTROLLER_NAME`]).
    pub fn of_snapshot(snapshot: &'a ConfigSnapshot) -> Self {
        let mut t = Topology::empty();
        let refs = snapshot
            .gateway_classes
            .iter()
            .map(Refs::Class)
            .chain(snapshot.gateways.iter().map(Refs::Gateway))
            .chain(snapshot.namespaces.iter().map(Refs::Namespace))
            .chain(snapshot.services.iter().map(Refs::Service))
            .chain(snapshot.reference_grants.iter().map(Refs::Grant))
            .chain(snapshot.secrets.iter().map(Refs::Secret))
            .chain(snapshot.config_maps.iter().map(Refs::ConfigMap))
            .chain(
                snapshot
                    .backend_tls_policies
                    .iter()
                    .map(Refs::BackendTlsPolicy),
            );
        for r in refs {
            t.add(CONTROLLER_NAME, r);
        }
        t.finish();
        t
    }

    /// The topology of a list of resources, for `controller`.
    pub fn of_resources(
        resources: impl IntoIterator<Item = &'a Resource>,
        controller: &str,
    ) -> Self {
        let mut t = Topology::empty();
        for resource in resources {
            let r = match resource {
                Resource::GatewayClass(c) => Refs::Class(c),
                Resource::Gateway(g) => Refs::Gateway(g),
                Resource::Namespace(n) => Refs::Namespace(n),
                Resource::Service(s) => Refs::Service(s),
                Resource::ReferenceGrant(g) => Refs::Grant(g),
                Resource::Secret(s) => Refs::Secret(s),
                Resource::ConfigMap(m) => Refs::ConfigMap(m),
                Resource::BackendTlsPolicy(p) => Refs::BackendTlsPolicy(p),
                Resource::HttpRoute(_) | Resource::EndpointSlice(_) => continue,
            };
            t.add(controller, r);
        }
        t.finish();
        t
    }

    /// Computes what depends on every object: the listener conflicts
    /// among our Gateways.
    fn finish(&mut self) {
        let ours: Vec<&Gateway> = self.gateways().filter(|g| self.is_ours(g)).collect();
        self.conflicts = listener_conflicts(ours);
    }

    /// Every conflicted listener of our Gateways, with its `Conflicted`
    /// reason and the listener that keeps the port; a listener absent
    /// from the map is not conflicted. Conflicted listeners are not
    /// served and no route attaches to them. See the `conflicts` module
    /// for the rule (oldest Gateway first, then spec order).
    pub fn listener_conflicts(&self) -> &BTreeMap<ListenerRef, ListenerConflict> {
        &self.conflicts
    }

    /// Why `gateway`'s listener `listener` is conflicted, or `None` when
    /// it is not (or is not one of our Gateways' listeners).
    pub fn listener_conflict(
        &self,
        gateway: &ObjectName,
        listener: &str,
    ) -> Option<&ListenerConflict> {
        self.conflicts
            .get(&ListenerRef::new(gateway.clone(), listener))
    }

    /// Every Gateway, ours or not.
    pub fn gateways(&self) -> impl Iterator<Item = &'a Gateway> + '_ {
        self.gateways.values().copied()
    }

    /// Whether `gateway`'s class is controlled by our controller.
    pub fn is_ours(&self, gateway: &Gateway) -> bool {
        self.our_classes
            .contains(gateway.gateway_class_name.as_str())
    }

    /// A namespace's labels, with `kubernetes.io/metadata.name` always set.
    fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String> {
        let mut labels = self
            .namespaces
            .get(namespace)
            .map(|l| (*l).clone())
            .unwrap_or_default();
        labels
            .entry(NAMESPACE_NAME_LABEL.to_string())
            .or_insert_with(|| namespace.to_string());
        labels
    }
}

/// One object the rules read.
enum Refs<'a> {
    Class(&'a GatewayClass),
    Gateway(&'a Gateway),
    Namespace(&'a Namespace),
    Service(&'a Service),
    Grant(&'a ReferenceGrant),
    Secret(&'a Secret),
    ConfigMap(&'a ConfigMap),
    BackendTlsPolicy(&'a BackendTlsPolicy),
}
