//! The demo's Kubernetes YAML: a Gateway, one Service plus EndpointSlice
//! per backend process, and the HTTPRoute being cut over. Generated as
//! text and parsed by the kubeconfig crate like any user file.

use std::net::SocketAddr;

/// Namespace of everything the demo creates.
pub const NAMESPACE: &str = "demo";
/// The route the demo cuts over.
pub const ROUTE: &str = "app";
/// Header the route's RequestHeaderModifier sets; the backend echoes it.
pub const VERSION_HEADER: &str = "x-demo-version";
/// The Gateway listener port the proxies serve.
pub const GATEWAY_PORT: u16 = 8080;

/// GatewayClass, Namespace and Gateway.
pub fn base() -> String {
    base_with_listener(&format!(
        "  - {{name: http, port: {GATEWAY_PORT}, protocol: HTTP}}\n"
    ))
}

/// [`base`] with another listener on the Gateway: `listener` is its YAML
/// list item (`  - name: ...`, indented two spaces, ending in a newline).
pub fn base_with_listener(listener: &str) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: switchyard}}
spec: {{controllerName: switchyard.io/gateway-controller}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {NAMESPACE}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gateway, namespace: {NAMESPACE}}}
spec:
  gatewayClassName: switchyard
  listeners:
{listener}"#
    )
}

/// A Service `name` (port 80) whose one endpoint is `address`.
pub fn backend(name: &str, address: SocketAddr) -> String {
    let (ip, port) = (address.ip(), address.port());
    format!(
        r#"---
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {NAMESPACE}}}
spec:
  ports: [{{name: http, port: 80, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}-1
  namespace: {NAMESPACE}
  labels: {{kubernetes.io/service-name: {name}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints:
- addresses: ["{ip}"]
  conditions: {{ready: true}}
"#
    )
}

/// The HTTPRoute sending everything to `backend`, setting the version
/// header to `version`, with the given cutover timeout (`30s`).
pub fn route(backend: &str, version: &str, cutover_timeout: &str) -> String {
    format!(
        r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: {ROUTE}
  namespace: {NAMESPACE}
  annotations: {{switchyard.io/cutover-timeout: {cutover_timeout}}}
spec:
  parentRefs: [{{name: gateway}}]
  rules:
  - filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{{name: {VERSION_HEADER}, value: "{version}"}}]
    backendRefs: [{{name: {backend}, port: 80}}]
"#
    )
}
