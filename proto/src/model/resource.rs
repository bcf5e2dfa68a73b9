//! [`Resource`]: one stored object of any kind, the unit of `apply` and
//! `delete`.

use super::backend::{EndpointSlice, ReferenceGrant, Service};
use super::backend_tls::{BackendTlsPolicy, ConfigMap};
use super::gateway::{Gateway, GatewayClass, Namespace};
use super::meta::{Kind, ObjectMeta, ResourceKey};
use super::route::HttpRoute;
use super::secret::Secret;
use serde::{Deserialize, Serialize};

/// One object of a kind switchyard stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Resource {
    /// A GatewayClass.
    GatewayClass(GatewayClass),
    /// A Gateway.
    Gateway(Gateway),
    /// An HTTPRoute or a GRPCRoute (`HttpRoute::kind` says which).
    HttpRoute(HttpRoute),
    /// A ReferenceGrant.
    ReferenceGrant(ReferenceGrant),
    /// A Namespace.
    Namespace(Namespace),
    /// A Service.
    Service(Service),
    /// An EndpointSlice.
    EndpointSlice(EndpointSlice),
    /// A Secret (a listener certificate).
    Secret(Secret),
    /// A ConfigMap (authorities a BackendTLSPolicy trusts).
    ConfigMap(ConfigMap),
    /// A BackendTLSPolicy.
    BackendTlsPolicy(BackendTlsPolicy),
}

impl Resource {
    /// The object's metadata.
    pub fn meta(&self) -> &ObjectMeta {
        match self {
            Resource::GatewayClass(o) => &o.meta,
            Resource::Gateway(o) => &o.meta,
            Resource::HttpRoute(o) => &o.meta,
            Resource::ReferenceGrant(o) => &o.meta,
            Resource::Namespace(o) => &o.meta,
            Resource::Service(o) => &o.meta,
            Resource::EndpointSlice(o) => &o.meta,
            Resource::Secret(o) => &o.meta,
            Resource::ConfigMap(o) => &o.meta,
            Resource::BackendTlsPolicy(o) => &o.meta,
        }
    }

    /// The object's metadata, to change (the coordinator stamps
    /// `revision`).
    pub fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Resource::GatewayClass(o) => &mut o.meta,
            Resource::Gateway(o) => &mut o.meta,
            Resource::HttpRoute(o) => &mut o.meta,
            Resource::ReferenceGrant(o) => &mut o.meta,
            Resource::Namespace(o) => &mut o.meta,
            Resource::Service(o) => &mut o.meta,
            Resource::EndpointSlice(o) => &mut o.meta,
            Resource::Secret(o) => &mut o.meta,
            Resource::ConfigMap(o) => &mut o.meta,
            Resource::BackendTlsPolicy(o) => &mut o.meta,
        }
    }

    /// The object's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Resource::GatewayClass(_) => Kind::GatewayClass,
            Resource::Gateway(_) => Kind::Gateway,
            Resource::HttpRoute(route) => route.kind.kind(),
            Resource::ReferenceGrant(_) => Kind::ReferenceGrant,
            Resource::Namespace(_) => Kind::Namespace,
            Resource::Service(_) => Kind::Service,
            Resource::EndpointSlice(_) => Kind::EndpointSlice,
            Resource::Secret(_) => Kind::Secret,
            Resource::ConfigMap(_) => Kind::ConfigMap,
            Resource::BackendTlsPolicy(_) => Kind::BackendTLSPolicy,
        }
    }

    /// The key the object is stored under.
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            kind: self.kind(),
            name: self.meta().object_name(),
        }
    }
}
