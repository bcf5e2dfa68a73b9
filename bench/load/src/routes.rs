//! The route generator: N HTTPRoutes, each with its own Service and a
//! one-endpoint EndpointSlice, attached to one Gateway of one
//! GatewayClass, all in namespace [`NAMESPACE`]. Deterministic: the same N
//! gives the same objects, byte for byte.
//!
//! Owns: the objects as Kubernetes YAML (what `--write-yaml` writes and
//! `switchyard apply -f` reads) and as model [`Resource`]s (parsed from that
//! same YAML by the kubeconfig crate, so what the tool applies is exactly
//! what the files say), the variants one update applies (a header value or
//! a fresh backend), and the batches an apply is cut into. Does not own:
//! sending them (`admin`).

use anyhow::Context;
use std::fmt::Write as _;
use std::path::Path;
use switchyard_proto::model::Resource;

/// The namespace every generated object lives in.
pub const NAMESPACE: &str = "load";

/// The GatewayClass, Namespace and Gateway every route attaches to.
const BASE: &str = r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: switchyard }
spec: { controllerName: switchyard.io/gateway-controller }
---
apiVersion: v1
kind: Namespace
metadata: { name: load }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gateway, namespace: load }
spec:
  gatewayClassName: switchyard
  listeners:
  - { name: http, port: 8080, protocol: HTTP, hostname: "*.load.example" }
"#;

/// Where generated EndpointSlices point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Endpoints {
    /// A distinct made-up address per Service (`10.x`, `11.x`): for the
    /// simulated agents, which never connect to them.
    #[default]
    MadeUp,
    /// Every slice lists this one address: a real backend on loopback,
    /// for real proxies, which health-check what slices list (and share
    /// one endpoint among every Service listing it).
    Shared(std::net::SocketAddr),
}

/// The name of route `i` (zero-padded so names sort by number).
pub fn route_name(i: usize) -> String {
    format!("route-{i:05}")
}

/// One version of route `i`'s spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// As generated: its own Service, no filter.
    Initial,
    /// Its own Service, with request header `x-load-change` set to the
    /// number: a new generation whose backends are already warm.
    Header(u64),
    /// Sends to the fresh Service `fresh-<n>` instead (see
    /// [`fresh_backend_yaml`]): a new generation that needs new evidence.
    Fresh(u64),
}

/// Route `i` as YAML. Every route asks for readiness policy `all`.
pub fn route_yaml(i: usize, variant: Variant) -> String {
    let name = route_name(i);
    let (backend, filter) = match variant {
        Variant::Initial => (format!("svc-{i:05}"), String::new()),
        Variant::Header(k) => (
            format!("svc-{i:05}"),
            format!(
                "    filters:\n    - type: RequestHeaderModifier\n      requestHeaderModifier:\n        set: [{{ name: x-load-change, value: \"{k}\" }}]\n"
            ),
        ),
        Variant::Fresh(n) => (format!("fresh-{n:05}"), String::new()),
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\n  annotations: {{ switchyard.io/readiness-policy: all }}\nspec:\n  parentRefs: [{{ name: gateway }}]\n  hostnames: [\"r{i}.load.example\"]\n  rules:\n  - backendRefs: [{{ name: {backend}, port: 80 }}]\n{filter}"
    )
}

/// A Service `name` with one EndpointSlice of one endpoint: with
/// [`Endpoints::MadeUp`], its address derived from `n` (distinct per `n`
/// below 2^24).
fn service_yaml(name: &str, n: usize, first_octet: u8, endpoints: Endpoints) -> String {
    let (address, port) = match endpoints {
        Endpoints::MadeUp => (
            format!(
                "{first_octet}.{}.{}.{}",
                (n >> 16) & 255,
                (n >> 8) & 255,
                n & 255
            ),
            8080,
        ),
        Endpoints::Shared(a) => (a.ip().to_string(), a.port()),
    };
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{ name: {name}, namespace: {NAMESPACE} }}\nspec:\n  ports:\n  - {{ name: http, port: 80, targetPort: {port} }}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {NAMESPACE}\n  labels: {{ kubernetes.io/service-name: {name} }}\naddressType: IPv4\nports:\n- {{ name: http, port: {port} }}\nendpoints:\n- addresses: [\"{address}\"]\n  conditions: {{ ready: true }}\n"
    )
}

/// Route `i`'s Service and EndpointSlice as YAML.
pub fn backend_yaml(i: usize, endpoints: Endpoints) -> String {
    service_yaml(&format!("svc-{i:05}"), i, 10, endpoints)
}

/// The fresh Service `fresh-<n>` and its slice (see [`Variant::Fresh`]).
pub fn fresh_backend_yaml(n: u64, endpoints: Endpoints) -> String {
    service_yaml(&format!("fresh-{n:05}"), n as usize, 11, endpoints)
}

/// Parses generated YAML into model resources.
pub fn parse(source: &str, yaml: &str) -> anyhow::Result<Vec<Resource>> {
    switchyard_kubeconfig::parse_documents(source, yaml)
        .map_err(|e| anyhow::anyhow!("generated YAML does not parse: {e}"))
}

/// Joins YAML documents into one stream.
fn stream<'a>(documents: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for d in documents {
        if !out.is_empty() {
            out.push_str("---\n");
        }
        out.push_str(d);
    }
    out
}

/// Every object of an N-route store, in apply order: the base, then per
/// route its Service, EndpointSlice and HTTPRoute (a route's backend is
/// stored before or with it).
pub fn all_yaml(routes: usize, endpoints: Endpoints) -> Vec<String> {
    let mut docs = vec![BASE.to_string()];
    for i in 0..routes {
        docs.push(backend_yaml(i, endpoints));
        docs.push(route_yaml(i, Variant::Initial));
    }
    docs
}

/// The model resources of an N-route store (3 + 3 × N objects).
pub fn resources(routes: usize, endpoints: Endpoints) -> anyhow::Result<Vec<Resource>> {
    let docs = all_yaml(routes, endpoints);
    // Parsed in slices so one parse error names a small stream.
    let mut out = Vec::with_capacity(3 + 3 * routes);
    for (k, chunk) in docs.chunks(500).enumerate() {
        let text = stream(chunk.iter().map(String::as_str));
        out.extend(parse(&format!("generated part {k}"), &text)?);
    }
    Ok(out)
}

/// The resources one update of route `i` applies: the route, plus the
/// fresh Service and slice a [`Variant::Fresh`] needs.
pub fn update(i: usize, variant: Variant, endpoints: Endpoints) -> anyhow::Result<Vec<Resource>> {
    let mut text = String::new();
    if let Variant::Fresh(n) = variant {
        text.push_str(&fresh_backend_yaml(n, endpoints));
        text.push_str("---\n");
    }
    text.push_str(&route_yaml(i, variant));
    parse(&route_name(i), &text)
}

/// Cuts `resources` into applies of at most `batch` objects each.
pub fn batches(resources: &[Resource], batch: usize) -> Vec<&[Resource]> {
    resources.chunks(batch.max(1)).collect()
}

/// The JSON size of `resources` as applied: the tool's measure of "live
/// state" (what the store must hold at the least).
pub fn json_bytes(resources: &[Resource]) -> anyhow::Result<u64> {
    let mut total = 0u64;
    for r in resources {
        total += serde_json::to_vec(r).context("encoding a resource")?.len() as u64;
    }
    Ok(total)
}

/// Writes the N-route store as YAML files into `dir`, `batch` objects per
/// file at most (so `switchyard apply -f` of each file fits one apply):
/// `00000.yaml`, `00001.yaml`, ... in apply order. Returns the files.
pub fn write_yaml(dir: &Path, routes: usize, batch: usize) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Documents per object: the base is 3 objects, each route 3.
    let per_file = (batch / 3).max(1);
    let docs = all_yaml(routes, Endpoints::MadeUp);
    let mut written = Vec::new();
    let (base, rest) = docs.split_at(1);
    let mut files: Vec<String> = vec![stream(base.iter().map(String::as_str))];
    for chunk in rest.chunks(2 * per_file) {
        files.push(stream(chunk.iter().map(String::as_str)));
    }
    for (k, text) in files.iter().enumerate() {
        let mut name = String::new();
        let _ = write!(name, "{k:05}.yaml");
        let path = dir.join(&name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(name);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_proto::model::Kind;

    #[test]
    fn n_routes_make_three_objects_each_plus_the_base() {
        let r = resources(7, Endpoints::MadeUp).unwrap();
        assert_eq!(r.len(), 3 + 3 * 7);
        let routes = r.iter().filter(|r| r.kind() == Kind::HTTPRoute).count();
        assert_eq!(routes, 7);
        assert_eq!(resources(7, Endpoints::MadeUp).unwrap(), r, "deterministic");
    }

    #[test]
    fn an_update_changes_the_route_and_a_fresh_one_brings_its_backend() {
        let header = update(3, Variant::Header(1), Endpoints::MadeUp).unwrap();
        assert_eq!(header.len(), 1);
        assert_ne!(
            header,
            update(3, Variant::Header(2), Endpoints::MadeUp).unwrap()
        );
        let fresh = update(3, Variant::Fresh(9), Endpoints::MadeUp).unwrap();
        let kinds: Vec<Kind> = fresh.iter().map(Resource::kind).collect();
        assert_eq!(kinds, [Kind::Service, Kind::EndpointSlice, Kind::HTTPRoute]);
    }

    #[test]
    fn written_files_hold_every_object_within_the_batch() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_yaml(dir.path(), 10, 9).unwrap();
        let mut total = 0;
        for f in &files {
            let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
            let n = parse(f, &text).unwrap().len();
            assert!(n <= 9, "{f} holds {n} objects");
            total += n;
        }
        assert_eq!(total, 3 + 3 * 10);
    }
}
