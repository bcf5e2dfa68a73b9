//! `GatewayClass`, `Gateway` and `Namespace` into the model, with the
//! Gateway API defaults for listeners (`allowedRoutes.namespaces.from:
//! Same`, route kind group `gateway.networking.k8s.io`).
//!
//! It deliberately does not check whether a listener's certificates
//! resolve nor whether a Gateway's class exists: references between
//! objects are the control plane's business (`gateway_api`).

use crate::convert::{GATEWAY_GROUP, object_meta, port};
use crate::error::Problem;
use gateway_api::apis::standard::gatewayclasses::GatewayClass as K8sGatewayClass;
use gateway_api::apis::standard::gateways::{
    Gateway as K8sGateway, GatewayListeners, GatewayListenersAllowedRoutes,
    GatewayListenersAllowedRoutesNamespacesFrom as From,
    GatewayListenersAllowedRoutesNamespacesSelector, GatewayListenersTls, GatewayListenersTlsMode,
};
use k8s_openapi::api::core::v1::Namespace as K8sNamespace;
use switchyard_proto::model::{
    AllowedRoutes, CertificateRef, Gateway, GatewayClass, GroupKind, Kind, LabelExpression,
    LabelSelector, Listener, ListenerProtocol, ListenerTls, Namespace, Resource, RouteNamespaces,
    TlsMode,
};

/// Translates a GatewayClass.
pub(crate) fn gateway_class(o: K8sGatewayClass) -> Result<Resource, Problem> {
    Ok(Resource::GatewayClass(GatewayClass {
        meta: object_meta(o.metadata, Kind::GatewayClass)?,
        controller_name: o.spec.controller_name,
    }))
}

/// Translates a Namespace (only its metadata matters).
pub(crate) fn namespace(o: K8sNamespace) -> Result<Resource, Problem> {
    Ok(Resource::Namespace(Namespace {
        meta: object_meta(o.metadata, Kind::Namespace)?,
    }))
}

/// Translates a Gateway.
pub(crate) fn gateway(o: K8sGateway) -> Result<Resource, Problem> {
    let listeners = o
        .spec
        .listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| listener(&format!("spec.listeners[{i}]"), l))
        .collect::<Result<_, _>>()?;
    Ok(Resource::Gateway(Gateway {
        meta: object_meta(o.metadata, Kind::Gateway)?,
        gateway_class_name: o.spec.gateway_class_name,
        listeners,
    }))
}

fn listener(f: &str, l: GatewayListeners) -> Result<Listener, Problem> {
    Ok(Listener {
        port: port(&format!("{f}.port"), l.port)?,
        protocol: match l.protocol.as_str() {
            "HTTP" => ListenerProtocol::Http,
            "HTTPS" => ListenerProtocol::Https,
            _ => ListenerProtocol::Other(l.protocol),
        },
        hostname: l.hostname,
        allowed_routes: allowed_routes(f, l.allowed_routes)?,
        tls: l.tls.map(listener_tls),
        name: l.name,
    })
}

/// A listener's `tls`; `options` are implementation-specific and none is
/// read.
fn listener_tls(t: GatewayListenersTls) -> ListenerTls {
    ListenerTls {
        mode: match t.mode {
            None | Some(GatewayListenersTlsMode::Terminate) => TlsMode::Terminate,
            Some(GatewayListenersTlsMode::Passthrough) => TlsMode::Passthrough,
        },
        certificate_refs: t
            .certificate_refs
            .unwrap_or_default()
            .into_iter()
            .map(|r| CertificateRef {
                group: r.group.unwrap_or_default(),
                // The Gateway API default.
                kind: r.kind.unwrap_or_else(|| "Secret".into()),
                name: r.name,
                namespace: r.namespace,
            })
            .collect(),
    }
}

fn allowed_routes(
    f: &str,
    allowed: Option<GatewayListenersAllowedRoutes>,
) -> Result<AllowedRoutes, Problem> {
    let Some(allowed) = allowed else {
        return Ok(AllowedRoutes::default());
    };
    let namespaces = match allowed.namespaces {
        None => RouteNamespaces::Same,
        Some(ns) => match ns.from.unwrap_or(From::Same) {
            From::Same => RouteNamespaces::Same,
            From::All => RouteNamespaces::All,
            From::Selector => {
                let selector = ns.selector.ok_or_else(|| {
                    Problem::invalid(
                        format!("{f}.allowedRoutes.namespaces.selector"),
                        "required when namespaces.from is Selector",
                    )
                })?;
                RouteNamespaces::Selector(label_selector(selector))
            }
        },
    };
    let kinds = allowed
        .kinds
        .unwrap_or_default()
        .into_iter()
        .map(|k| GroupKind {
            group: k.group.unwrap_or_else(|| GATEWAY_GROUP.to_string()),
            kind: k.kind,
        })
        .collect();
    Ok(AllowedRoutes { namespaces, kinds })
}

fn label_selector(s: GatewayListenersAllowedRoutesNamespacesSelector) -> LabelSelector {
    LabelSelector {
        match_labels: s.match_labels.unwrap_or_default(),
        match_expressions: s
            .match_expressions
            .unwrap_or_default()
            .into_iter()
            .map(|e| LabelExpression {
                key: e.key,
                operator: e.operator,
                values: e.values.unwrap_or_default(),
            })
            .collect(),
    }
}
