//! The resource kinds other than routes, and any resource at all.

use super::{hostname, labels, meta, name, namespace, pick, port};
use super::{http_route, valid_route};
use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use switchyard_proto::model::*;

/// A Gateway: listeners with any protocol, hostname and allowed namespaces.
pub fn gateway() -> BoxedStrategy<Gateway> {
    let expression = (
        pick(&["team", ""]),
        pick(&["In", "NotIn", "Exists", "DoesNotExist", "Bogus"]),
        prop::collection::vec(pick(&["a", ""]), 0..2),
    )
        .prop_map(|(key, operator, values)| LabelExpression {
            key,
            operator,
            values,
        });
    let selector = (labels(), prop::collection::vec(expression, 0..2)).prop_map(
        |(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        },
    );
    let namespaces = prop_oneof![
        Just(RouteNamespaces::Same),
        Just(RouteNamespaces::All),
        selector.prop_map(RouteNamespaces::Selector),
    ];
    let protocol = prop_oneof![
        Just(ListenerProtocol::Http),
        Just(ListenerProtocol::Https),
        pick(&["TCP", ""]).prop_map(ListenerProtocol::Other),
    ];
    let listener = (
        pick(&["http", "https", "Bad", ""]),
        port(),
        protocol,
        prop::option::of(hostname()),
        namespaces,
    )
        .prop_map(|(name, port, protocol, hostname, namespaces)| Listener {
            name,
            port,
            protocol,
            hostname,
            allowed_routes: AllowedRoutes {
                namespaces,
                kinds: Vec::new(),
            },
            tls: None,
        });
    (
        meta(false),
        pick(&["switchyard", "other", ""]),
        prop::collection::vec(listener, 0..3),
    )
        .prop_map(|(meta, gateway_class_name, listeners)| Gateway {
            meta,
            gateway_class_name,
            listeners,
        })
        .boxed()
}

/// A Service with up to two ports.
pub fn service() -> BoxedStrategy<Service> {
    let service_port = (
        prop::option::of(pick(&["http", ""])),
        port(),
        prop::option::of(port()),
    )
        .prop_map(|(name, port, target_port)| ServicePort {
            name,
            port,
            target_port,
            app_protocol: None,
        });
    (meta(false), prop::collection::vec(service_port, 0..3))
        .prop_map(|(meta, ports)| Service { meta, ports })
        .boxed()
}

/// An EndpointSlice: addresses good and bad, any conditions, a cluster tag.
pub fn endpoint_slice() -> BoxedStrategy<EndpointSlice> {
    let endpoint = (
        prop::collection::vec(pick(&["10.0.0.1", "::1", "not-an-ip", ""]), 0..2),
        any::<(bool, bool, bool)>(),
        prop::option::of(pick(&["zone-a", ""])),
    )
        .prop_map(
            |(addresses, (ready, serving, terminating), zone)| Endpoint {
                addresses,
                ready,
                serving,
                terminating,
                zone,
            },
        );
    let endpoint_port = (prop::option::of(pick(&["http"])), port())
        .prop_map(|(name, port)| EndpointPort { name, port });
    (
        meta(false),
        pick(&["IPv4", "IPv6", "FQDN", "ipv4"]),
        prop::collection::vec(endpoint_port, 0..2),
        prop::collection::vec(endpoint, 0..3),
        prop::option::of(pick(&["east", ""])),
    )
        .prop_map(
            |(meta, address_type, ports, endpoints, cluster)| EndpointSlice {
                meta,
                address_type,
                ports,
                endpoints,
                cluster,
            },
        )
        .boxed()
}

/// A ReferenceGrant from HTTPRoutes in some namespace to Services.
pub fn reference_grant() -> BoxedStrategy<ReferenceGrant> {
    let from = (namespace(), pick(&["HTTPRoute", ""])).prop_map(|(namespace, kind)| GrantFrom {
        group: "gateway.networking.k8s.io".into(),
        kind,
        namespace,
    });
    let to = prop::option::of(name()).prop_map(|name| GrantTo {
        group: String::new(),
        kind: "Service".into(),
        name,
    });
    (
        meta(false),
        prop::collection::vec(from, 0..2),
        prop::collection::vec(to, 0..2),
    )
        .prop_map(|(meta, from, to)| ReferenceGrant { meta, from, to })
        .boxed()
}

/// Any resource kind, weighted towards routes (well-formed ones most).
pub fn resource() -> BoxedStrategy<Resource> {
    prop_oneof![
        6 => valid_route(),
        3 => http_route().prop_map(Resource::HttpRoute),
        1 => gateway().prop_map(Resource::Gateway),
        1 => service().prop_map(Resource::Service),
        1 => endpoint_slice().prop_map(Resource::EndpointSlice),
        1 => reference_grant().prop_map(Resource::ReferenceGrant),
        1 => (meta(true), pick(&[CONTROLLER_NAME, "other", ""]))
            .prop_map(|(meta, controller_name)| Resource::GatewayClass(GatewayClass {
                meta,
                controller_name,
            })),
        1 => meta(true).prop_map(|meta| Resource::Namespace(Namespace { meta })),
    ]
    .boxed()
}
