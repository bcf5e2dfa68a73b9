//! Test-only builders for model values and requests, so router tests read
//! as the scenario they check. Not compiled outside tests.

use super::{Decision, DirectResponse, ForwardPlan, ListenerKey, RouteTable};
use std::collections::BTreeMap;
use switchyard_proto::model::*;

/// The namespace most tests live in.
pub(crate) const INFRA: &str = "infra";
/// A GatewayClass switchyard serves.
pub(crate) const OUR_CLASS: &str = "switchyard";

/// A snapshot under construction plus the routes to serve.
pub(crate) struct World {
    pub(crate) snapshot: ConfigSnapshot,
    pub(crate) routes: Vec<HttpRoute>,
}

impl World {
    /// Our class, another controller's class, Gateway `infra/gw` with one
    /// HTTP listener `http` on :80 allowing `Same`, and Services
    /// `infra/v1|v2|v3:8080`.
    pub(crate) fn new() -> World {
        let class = |name: &str, controller: &str| GatewayClass {
            meta: ObjectMeta::named("", name),
            controller_name: controller.into(),
        };
        let mut w = World {
            snapshot: ConfigSnapshot {
                gateway_classes: vec![
                    class(OUR_CLASS, CONTROLLER_NAME),
                    class("other", "example.com/other"),
                ],
                ..Default::default()
            },
            routes: Vec::new(),
        };
        w.gateway(INFRA, "gw", OUR_CLASS, vec![listener("http", 80, None)]);
        for name in ["v1", "v2", "v3"] {
            w.service(INFRA, name, &[8080]);
        }
        w
    }

    /// [`World::new`] without its Gateway `infra/gw`: for tests whose own
    /// Gateways would otherwise clash with it on port 80 (all our Gateways
    /// are merged on the fleet's ports, so a second catch-all listener on
    /// :80 is `Conflicted`).
    pub(crate) fn bare() -> World {
        let mut w = World::new();
        w.snapshot.gateways.clear();
        w
    }

    /// Adds a Gateway.
    pub(crate) fn gateway(
        &mut self,
        ns: &str,
        name: &str,
        class: &str,
        listeners: Vec<Listener>,
    ) -> &mut Self {
        self.snapshot.gateways.push(Gateway {
            meta: ObjectMeta::named(ns, name),
            gateway_class_name: class.into(),
            listeners,
        });
        self
    }

    /// Adds a Service with these ports.
    pub(crate) fn service(&mut self, ns: &str, name: &str, ports: &[u16]) -> &mut Self {
        self.snapshot.services.push(Service {
            meta: ObjectMeta::named(ns, name),
            ports: ports
                .iter()
                .map(|&port| ServicePort {
                    name: None,
                    port,
                    target_port: None,
                    app_protocol: None,
                })
                .collect(),
        });
        self
    }

    /// Adds a Namespace with labels.
    pub(crate) fn namespace(&mut self, name: &str, labels: &[(&str, &str)]) -> &mut Self {
        let mut meta = ObjectMeta::named("", name);
        meta.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>();
        self.snapshot.namespaces.push(Namespace { meta });
        self
    }

    /// Adds a route to serve.
    pub(crate) fn route(&mut self, r: HttpRoute) -> &mut Self {
        self.routes.push(r);
        self
    }

    /// Compiles.
    pub(crate) fn table(&self) -> RouteTable {
        RouteTable::compile(&self.snapshot, &self.routes)
    }
}

/// An HTTP listener allowing routes from the same namespace.
pub(crate) fn listener(name: &str, port: u16, hostname: Option<&str>) -> Listener {
    Listener {
        name: name.into(),
        port,
        protocol: ListenerProtocol::Http,
        hostname: hostname.map(Into::into),
        allowed_routes: AllowedRoutes::default(),
        tls: None,
    }
}

/// A parentRef to a Gateway by namespace and name.
pub(crate) fn parent(ns: &str, name: &str) -> ParentRef {
    ParentRef {
        group: "gateway.networking.k8s.io".into(),
        kind: "Gateway".into(),
        namespace: Some(ns.into()),
        name: name.into(),
        section_name: None,
        port: None,
    }
}

/// A route attached to `infra/gw` with these rules.
pub(crate) fn route(ns: &str, name: &str, rules: Vec<RouteRule>) -> HttpRoute {
    HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named(ns, name),
        parent_refs: vec![parent(INFRA, "gw")],
        hostnames: Vec::new(),
        rules,
    }
}

/// A rule with one match and these backends.
pub(crate) fn rule(m: RouteMatch, backends: Vec<BackendRef>) -> RouteRule {
    RouteRule {
        matches: vec![m],
        backend_refs: backends,
        ..Default::default()
    }
}

/// A PathPrefix match.
pub(crate) fn prefix(p: &str) -> RouteMatch {
    RouteMatch {
        path: Some(PathMatch::PathPrefix(p.into())),
        ..Default::default()
    }
}

/// An Exact path match.
pub(crate) fn exact(p: &str) -> RouteMatch {
    RouteMatch {
        path: Some(PathMatch::Exact(p.into())),
        ..Default::default()
    }
}

/// An exact header condition.
pub(crate) fn header(name: &str, value: &str) -> HeaderMatch {
    HeaderMatch {
        match_type: StringMatchType::Exact,
        name: name.into(),
        value: value.into(),
    }
}

/// A Service backendRef with a weight.
pub(crate) fn svc(name: &str, weight: u32) -> BackendRef {
    BackendRef {
        weight,
        ..BackendRef::service(name, 8080)
    }
}

/// A request.
pub(crate) fn req(
    method: &str,
    host: Option<&str>,
    path: &str,
    headers: &[(&str, &str)],
) -> http::request::Parts {
    let mut b = http::Request::builder().method(method).uri(path);
    if let Some(h) = host {
        b = b.header("host", h);
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).expect("valid test request").into_parts().0
}

/// A GET with a Host.
pub(crate) fn get(host: &str, path: &str) -> http::request::Parts {
    req("GET", Some(host), path, &[])
}

/// The key for `infra/gw:80`.
pub(crate) fn gw80() -> ListenerKey {
    ListenerKey {
        gateway: Some(ObjectName::new(INFRA, "gw")),
        port: 80,
    }
}

/// The forward plan, or a panic naming the response.
pub(crate) fn forward(d: Decision) -> ForwardPlan {
    match d {
        Decision::Forward(p) => p,
        Decision::Respond(r) => panic!("expected a forward, got {} ({})", r.status, r.reason),
    }
}

/// The direct response, or a panic naming the backend.
pub(crate) fn respond(d: Decision) -> DirectResponse {
    match d {
        Decision::Respond(r) => r,
        Decision::Forward(p) => panic!("expected a direct response, got forward to {}", p.backend),
    }
}

/// The Service name a request is forwarded to, or the status as text.
pub(crate) fn outcome(d: Decision) -> String {
    match d {
        Decision::Forward(p) => p.backend.service.name.clone(),
        Decision::Respond(r) => r.status.as_u16().to_string(),
    }
}
