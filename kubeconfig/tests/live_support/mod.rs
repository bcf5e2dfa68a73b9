//! A fake Kubernetes API server on 127.0.0.1 for the live-cluster tests:
//! it serves lists, `?watch=true` streams (with replay from a
//! resourceVersion, `410 Gone` after compaction), single-object GETs and
//! status PATCHes, records every request, and can be stopped to play an
//! unreachable cluster. The client under test is a real `kube::Client`
//! pointed at it with `kube::Config::new(url)`, so the real HTTP and watch
//! path is exercised.
//!
//! It implements only what switchyard's watchers and status writers use;
//! it does not validate objects or implement server-side apply merging
//! (a status patch replaces `status`).

#![allow(dead_code)] // each test file uses a different part

pub mod fixtures;
mod handler;

use handler::handle;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use switchyard_kubeconfig::live::{ClusterSource, WatchSettings};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

type Body = BoxBody<Bytes, Infallible>;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `PATCH`, ...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// Query parameters.
    pub query: BTreeMap<String, String>,
    /// `Content-Type`, if any.
    pub content_type: Option<String>,
    /// `x-test-client`, to tell clients apart.
    pub client: Option<String>,
    /// The JSON body, if any.
    pub body: Option<Value>,
}

impl Recorded {
    /// Whether this is a watch request.
    pub fn is_watch(&self) -> bool {
        self.query
            .get("watch")
            .is_some_and(|w| w == "true" || w == "1")
    }

    /// Whether this is a resource request (not `/version`).
    pub fn is_resource(&self) -> bool {
        self.path.starts_with("/api/") || self.path.starts_with("/apis/")
    }

    /// `(apiGroup, resource, verb)` as RBAC sees this request; `None` for
    /// non-resource URLs (`/version`).
    pub fn permission(&self) -> Option<(String, String, String)> {
        let parts: Vec<&str> = self.path.trim_start_matches('/').split('/').collect();
        let (group, rest) = match parts.as_slice() {
            ["api", _v, rest @ ..] => (String::new(), rest.to_vec()),
            ["apis", g, _v, rest @ ..] => (g.to_string(), rest.to_vec()),
            ["version"] => return None,
            _ => panic!("not a resource path: {}", self.path),
        };
        let rest = match rest.as_slice() {
            ["namespaces", _ns, tail @ ..] if !tail.is_empty() => tail.to_vec(),
            other => other.to_vec(),
        };
        let (resource, named) = match rest.as_slice() {
            [plural] => (plural.to_string(), false),
            [plural, _name] => (plural.to_string(), true),
            [plural, _name, sub] => (format!("{plural}/{sub}"), true),
            _ => panic!("unexpected path {}", self.path),
        };
        let verb = match (self.method.as_str(), named, self.is_watch()) {
            ("GET", _, true) => "watch",
            ("GET", false, false) => "list",
            ("GET", true, false) => "get",
            ("PATCH", _, _) => "patch",
            ("PUT", _, _) => "update",
            (m, _, _) => panic!("unexpected method {m}"),
        };
        Some((group, resource, verb.to_string()))
    }
}

#[derive(Default)]
struct Collection {
    objects: BTreeMap<(String, String), Value>,
    /// (resourceVersion, type, object), for replay.
    events: Vec<(u64, &'static str, Value)>,
    /// Watches from before this version get `410 Gone`.
    compacted: u64,
    watchers: Vec<mpsc::UnboundedSender<Bytes>>,
}

#[derive(Default)]
struct State {
    rv: u64,
    collections: HashMap<String, Collection>,
    requests: Vec<Recorded>,
    /// Status patches to answer with 409 before accepting.
    conflicts: u32,
}

/// A running fake API server.
pub struct FakeApiServer {
    /// Its address.
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    server: Mutex<tokio::task::JoinHandle<()>>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.server.lock().expect("server handle").abort();
    }
}

/// The collection path (all namespaces) of an object's kind.
pub fn collection_of(api_version: &str, kind: &str) -> String {
    let plural = match kind {
        "Namespace" => "namespaces",
        "Service" => "services",
        "EndpointSlice" => "endpointslices",
        "GatewayClass" => "gatewayclasses",
        "Gateway" => "gateways",
        "HTTPRoute" => "httproutes",
        "ReferenceGrant" => "referencegrants",
        other => panic!("kind {other} not served by the fake"),
    };
    if api_version.contains('/') {
        format!("/apis/{api_version}/{plural}")
    } else {
        format!("/api/{api_version}/{plural}")
    }
}

/// Every collection the watchers read.
pub const COLLECTIONS: [&str; 7] = [
    "/api/v1/namespaces",
    "/api/v1/services",
    "/apis/discovery.k8s.io/v1/endpointslices",
    "/apis/gateway.networking.k8s.io/v1/gatewayclasses",
    "/apis/gateway.networking.k8s.io/v1/gateways",
    "/apis/gateway.networking.k8s.io/v1/httproutes",
    "/apis/gateway.networking.k8s.io/v1beta1/referencegrants",
];

fn key_of(object: &Value) -> (String, String) {
    let meta = &object["metadata"];
    (
        meta["namespace"].as_str().unwrap_or("").to_string(),
        meta["name"].as_str().expect("metadata.name").to_string(),
    )
}

fn path_of(object: &Value) -> String {
    collection_of(
        object["apiVersion"].as_str().expect("apiVersion"),
        object["kind"].as_str().expect("kind"),
    )
}

impl State {
    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn emit(&mut self, path: &str, kind: &'static str, object: Value) {
        let rv = self.rv;
        let c = self.collections.entry(path.to_string()).or_default();
        let line = json!({"type": kind, "object": object});
        let mut bytes = serde_json::to_vec(&line).expect("json");
        bytes.push(b'\n');
        let bytes = Bytes::from(bytes);
        c.watchers.retain(|w| w.send(bytes.clone()).is_ok());
        c.events.push((rv, kind, object));
    }

    fn put(&mut self, mut object: Value) -> Value {
        let path = path_of(&object);
        let rv = self.bump();
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let c = self.collections.entry(path.clone()).or_default();
        let kind = match c.objects.insert(key_of(&object), object.clone()) {
            Some(_) => "MODIFIED",
            None => "ADDED",
        };
        self.emit(&path, kind, object.clone());
        object
    }
}

impl FakeApiServer {
    /// Starts a server on 127.0.0.1 port 0 holding `objects`.
    pub async fn start(objects: Vec<Value>) -> FakeApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State::default()));
        {
            let mut s = state.lock().unwrap();
            for path in COLLECTIONS {
                s.collections.entry(path.to_string()).or_default();
            }
            for o in objects {
                s.put(o);
            }
        }
        let server = Mutex::new(serve(listener, state.clone()));
        FakeApiServer {
            addr,
            state,
            server,
        }
    }

    /// Serves again on the same address, with the same objects and
    /// history, after [`FakeApiServer::stop`]: the cluster is back.
    pub async fn resume(&self) {
        let listener = TcpListener::bind(self.addr).await.expect("bind again");
        *self.server.lock().expect("server handle") = serve(listener, self.state.clone());
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("fake server state")
    }

    /// A client for this server, sending `x-test-client: <tag>`.
    pub fn client(&self, tag: &str) -> kube::Client {
        let url = format!("http://{}", self.addr).parse().expect("url");
        let mut config = kube::Config::new(url);
        config.headers.push((
            "x-test-client".parse().expect("header name"),
            tag.parse().expect("header value"),
        ));
        kube::Client::try_from(config).expect("client")
    }

    /// A cluster source named `name` for this server.
    pub fn source(&self, name: &str) -> ClusterSource {
        ClusterSource {
            name: name.to_string(),
            client: self.client(name),
        }
    }

    /// Adds or replaces an object (ADDED / MODIFIED to watchers).
    pub fn apply(&self, object: Value) -> Value {
        self.lock().put(object)
    }

    /// Deletes an object (DELETED to watchers).
    pub fn delete(&self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let path = collection_of(api_version, kind);
        let mut s = self.lock();
        let rv = s.bump();
        let c = s.collections.entry(path.clone()).or_default();
        let mut object = c
            .objects
            .remove(&(namespace.to_string(), name.to_string()))
            .expect("object to delete exists");
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        s.emit(&path, "DELETED", object);
    }

    /// Deletes an object while every watch of its kind is "broken": no
    /// DELETED event is ever sent; instead the history is compacted and
    /// the watches get `410 Gone`, as after a long disconnection. Only a
    /// re-list can notice the deletion.
    pub fn delete_unseen_then_expire(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) {
        let path = collection_of(api_version, kind);
        let mut s = self.lock();
        let rv = s.bump();
        let c = s.collections.entry(path).or_default();
        c.objects
            .remove(&(namespace.to_string(), name.to_string()))
            .expect("object to delete exists");
        c.compacted = rv;
        c.events.clear();
        let gone = json!({"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version", "reason": "Expired", "code": 410}});
        let mut bytes = serde_json::to_vec(&gone).expect("json");
        bytes.push(b'\n');
        for w in c.watchers.drain(..) {
            let _ = w.send(Bytes::from(bytes.clone()));
        }
    }

    /// The stored object, if any.
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let path = collection_of(api_version, kind);
        self.lock().collections.get(&path).and_then(|c| {
            c.objects
                .get(&(namespace.to_string(), name.to_string()))
                .cloned()
        })
    }

    /// Answer the next `n` status patches with 409 Conflict.
    pub fn conflict_next_patches(&self, n: u32) {
        self.lock().conflicts = n;
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// Watch streams whose client is still connected.
    pub fn open_watches(&self) -> usize {
        let mut s = self.lock();
        s.collections
            .values_mut()
            .map(|c| {
                c.watchers.retain(|w| !w.is_closed());
                c.watchers.len()
            })
            .sum()
    }

    /// Stops serving: the listener closes and every connection is cut.
    pub fn stop(&self) {
        self.server.lock().expect("server handle").abort();
    }
}

fn serve(listener: TcpListener, state: Arc<Mutex<State>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // Connections live in this set: aborting the server task drops it,
        // which aborts every connection — an unreachable cluster.
        let mut connections = JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let state = state.clone();
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(handle(&state, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
            while connections.try_join_next().is_some() {}
        }
    })
}

/// Watch settings for tests: fast retries.
pub fn fast() -> WatchSettings {
    WatchSettings {
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
        watch_timeout_secs: 60,
        probe_interval: Duration::from_millis(100),
    }
}

/// Polls `check` every 10 ms until it holds or `what` times out (10 s).
pub async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
