//! `Service`, `EndpointSlice` and `ReferenceGrant` into the model.
//!
//! - A Service port without `targetPort` targets the same number (the API
//!   server's default); a named `targetPort` becomes `None`, resolved later
//!   through EndpointSlice port names.
//! - EndpointSlice conditions follow the Kubernetes reading: absent `ready`
//!   is ready, absent `serving` is the same as `ready`, absent
//!   `terminating` is not terminating.
//! - Unnamed ports are `None` whether written as `""` or left out.
//!
//! k8s-openapi fills absent required fields with zero values, which would
//! turn a forgotten `port` into "port 0"; so the few required fields that
//! matter are checked against the raw document first, to say "required".
//!
//! It deliberately does not match slices to Services or check that a
//! Service exists: the control plane joins them.

use crate::convert::{indexed, object_meta, port, port_name};
use crate::error::Problem;
use gateway_api::apis::standard::referencegrants::ReferenceGrant as K8sReferenceGrant;
use k8s_openapi::api::core::v1::{Service as K8sService, ServicePort as K8sServicePort};
use k8s_openapi::api::discovery::v1::{
    Endpoint as K8sEndpoint, EndpointPort as K8sEndpointPort, EndpointSlice as K8sEndpointSlice,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use switchyard_proto::model::{
    Endpoint, EndpointPort, EndpointSlice, GrantFrom, GrantTo, Kind, ReferenceGrant, Resource,
    Service, ServicePort,
};

/// Translates a Service; `raw` is the same document, undecoded.
pub(crate) fn service(o: K8sService, raw: &Value) -> Result<Resource, Problem> {
    let meta = object_meta(o.metadata, Kind::Service)?;
    let ports = o.spec.and_then(|s| s.ports);
    if let Some(ports) = &ports {
        for i in 0..ports.len() {
            if raw.pointer(&format!("/spec/ports/{i}/port")).is_none() {
                return Err(Problem::missing(format!("spec.ports[{i}].port")));
            }
        }
    }
    Ok(Resource::Service(Service {
        meta,
        ports: indexed(ports, "spec.ports", service_port)?,
    }))
}

fn service_port(f: &str, p: K8sServicePort) -> Result<ServicePort, Problem> {
    let number = port(&format!("{f}.port"), p.port)?;
    let target_port = match p.target_port {
        None => Some(number),
        Some(IntOrString::Int(n)) => Some(port(&format!("{f}.targetPort"), n)?),
        Some(IntOrString::String(name)) if name.parse::<i64>().is_ok() => {
            return Err(Problem::invalid(
                format!("{f}.targetPort"),
                format!("{name:?} is a quoted number; write the port unquoted, or use a port name"),
            ));
        }
        Some(IntOrString::String(_)) => None,
    };
    Ok(ServicePort {
        name: port_name(p.name),
        port: number,
        target_port,
        app_protocol: p.app_protocol.filter(|a| !a.is_empty()),
    })
}

/// Translates an EndpointSlice; `raw` is the same document, undecoded.
pub(crate) fn endpoint_slice(o: K8sEndpointSlice, raw: &Value) -> Result<Resource, Problem> {
    if raw.get("addressType").is_none() {
        return Err(Problem::missing("addressType"));
    }
    Ok(Resource::EndpointSlice(EndpointSlice {
        meta: object_meta(o.metadata, Kind::EndpointSlice)?,
        address_type: o.address_type,
        ports: indexed(o.ports, "ports", endpoint_port)?,
        endpoints: o.endpoints.into_iter().map(endpoint).collect(),
        cluster: None,
    }))
}

fn endpoint_port(f: &str, p: K8sEndpointPort) -> Result<EndpointPort, Problem> {
    let number = p.port.ok_or_else(|| {
        Problem::invalid(
            format!("{f}.port"),
            "required: switchyard does not support slices that leave the port open (\"all ports\")",
        )
    })?;
    Ok(EndpointPort {
        name: port_name(p.name),
        port: port(&format!("{f}.port"), number)?,
    })
}

fn endpoint(e: K8sEndpoint) -> Endpoint {
    let conditions = e.conditions.unwrap_or_default();
    let ready = conditions.ready.unwrap_or(true);
    Endpoint {
        addresses: e.addresses,
        ready,
        serving: conditions.serving.unwrap_or(ready),
        terminating: conditions.terminating.unwrap_or(false),
        zone: e.zone,
    }
}

/// Translates a ReferenceGrant (v1beta1 and v1 share the schema).
pub(crate) fn reference_grant(o: K8sReferenceGrant) -> Result<Resource, Problem> {
    Ok(Resource::ReferenceGrant(ReferenceGrant {
        meta: object_meta(o.metadata, Kind::ReferenceGrant)?,
        from: o
            .spec
            .from
            .into_iter()
            .map(|f| GrantFrom {
                group: f.group,
                kind: f.kind,
                namespace: f.namespace,
            })
            .collect(),
        to: o
            .spec
            .to
            .into_iter()
            .map(|t| GrantTo {
                group: t.group,
                kind: t.kind,
                name: t.name.filter(|n| !n.is_empty()),
            })
            .collect(),
    }))
}
