//! A fake Kubernetes API server on 127.0.0.1, port 0, for the tests of
//! live-cluster sync: the library's watchers and status writers
//! (`kubeconfig/tests/live_*.rs`, with a real `kube::Client` pointed at
//! it) and a real `switchyard coordinator --kubernetes` process
//! (`tests/kube_wiring.rs`, through [`FakeApiServer::kubeconfig`]).
//!
//! Owns: lists, `?watch=true` streams (replayed from a resourceVersion,
//! `410 Gone` after compaction, so a client must re-list), single-object
//! GETs (namespaced and cluster-scoped), status PATCHes (server-side
//! apply of `status` with field managers and the CRDs' list types, see
//! `apply`; optimistic concurrency on `metadata.resourceVersion`,
//! injected `409 Conflict`s), `events.k8s.io/v1` Event creates (`409
//! AlreadyExists` for a taken name), `/version`, a record of every
//! request (with the RBAC permission it needs), and stopping and resuming
//! the server to play an unreachable cluster. Every object change is an
//! event to open watches. Objects get a `metadata.uid` derived from their
//! name.
//!
//! Does not own: validation or pruning of objects; the kube client (each
//! test suite builds its own from [`FakeApiServer::addr`]); the objects
//! themselves ([`crate::fixtures`]).

mod apply;
mod handler;

use bytes::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::net::TcpListener;
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `PATCH`, ...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// Query parameters (`%2F` decoded).
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
            ("POST", false, _) => "create",
            ("PUT", _, _) => "update",
            (m, _, _) => panic!("unexpected method {m}"),
        };
        Some((group, resource, verb.to_string()))
    }
}

#[derive(Default)]
struct Collection {
    objects: BTreeMap<(String, String), Value>,
    /// (resourceVersion, event type, object), replayed to new watches.
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
    /// Field ownership of each object's status, by (collection, namespace,
    /// name): what server-side apply merges by.
    ownership: HashMap<(String, String, String), apply::Ownership>,
    /// `events.k8s.io/v1` Events by (namespace, name), as created.
    events: BTreeMap<(String, String), Value>,
}

/// Every collection switchyard's watchers read (all namespaces).
pub const COLLECTIONS: [&str; 11] = [
    "/api/v1/namespaces",
    "/api/v1/services",
    "/api/v1/secrets",
    "/api/v1/configmaps",
    "/apis/discovery.k8s.io/v1/endpointslices",
    "/apis/gateway.networking.k8s.io/v1/gatewayclasses",
    "/apis/gateway.networking.k8s.io/v1/gateways",
    "/apis/gateway.networking.k8s.io/v1/httproutes",
    "/apis/gateway.networking.k8s.io/v1/grpcroutes",
    "/apis/gateway.networking.k8s.io/v1/backendtlspolicies",
    "/apis/gateway.networking.k8s.io/v1beta1/referencegrants",
];

/// The collection path (all namespaces) of an object's kind.
pub fn collection_of(api_version: &str, kind: &str) -> String {
    let plural = match kind {
        "Namespace" => "namespaces",
        "Service" => "services",
        "Secret" => "secrets",
        "ConfigMap" => "configmaps",
        "EndpointSlice" => "endpointslices",
        "GatewayClass" => "gatewayclasses",
        "Gateway" => "gateways",
        "HTTPRoute" => "httproutes",
        "GRPCRoute" => "grpcroutes",
        "ReferenceGrant" => "referencegrants",
        "BackendTLSPolicy" => "backendtlspolicies",
        // Cluster-scoped, read one at a time (`switchyard node-zone`).
        "Node" => "nodes",
        "ServiceExport" => "serviceexports",
        other => panic!("kind {other} not served by the fake"),
    };
    let root = if api_version.contains('/') {
        "apis"
    } else {
        "api"
    };
    format!("/{root}/{api_version}/{plural}")
}

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

/// One line of a watch stream.
fn watch_line(event: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(event).expect("json");
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// The `ERROR` event of an expired resourceVersion.
fn gone() -> Bytes {
    watch_line(&json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "too old resource version", "reason": "Expired", "code": 410}}))
}

impl State {
    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn emit(&mut self, path: &str, kind: &'static str, object: Value) {
        let rv = self.rv;
        let c = self.collections.entry(path.to_string()).or_default();
        let line = watch_line(&json!({"type": kind, "object": object}));
        c.watchers.retain(|w| w.send(line.clone()).is_ok());
        c.events.push((rv, kind, object));
    }

    fn put(&mut self, mut object: Value) -> Value {
        let path = path_of(&object);
        let rv = self.bump();
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        if object["metadata"]["uid"].is_null() {
            // Stable for a name, as a test needs to predict it; a real
            // server's uid is random.
            let (ns, name) = key_of(&object);
            object["metadata"]["uid"] = json!(format!("uid-{ns}-{name}"));
        }
        let c = self.collections.entry(path.clone()).or_default();
        let kind = match c.objects.insert(key_of(&object), object.clone()) {
            Some(_) => "MODIFIED",
            None => "ADDED",
        };
        self.emit(&path, kind, object.clone());
        object
    }
}

/// A running fake API server; it stops when dropped.
pub struct FakeApiServer {
    /// Its address.
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// Where the server task runs.
    handle: Handle,
    server: Mutex<JoinHandle<()>>,
    /// The server's own runtime, if it has one
    /// ([`FakeApiServer::start_on_own_runtime`]).
    runtime: Option<Runtime>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.server.lock().expect("server handle").abort();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl FakeApiServer {
    /// Starts a server holding `objects` on the current tokio runtime.
    pub async fn start(objects: Vec<Value>) -> FakeApiServer {
        FakeApiServer::start_on(Handle::current(), None, objects)
    }

    /// Starts a server holding `objects` on a runtime of its own (one
    /// worker thread), for tests whose own threads block — a process test
    /// waiting on the CLI must never starve the API server it talks to.
    pub fn start_on_own_runtime(objects: Vec<Value>) -> FakeApiServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("fake API server runtime");
        FakeApiServer::start_on(runtime.handle().clone(), Some(runtime), objects)
    }

    fn start_on(handle: Handle, runtime: Option<Runtime>, objects: Vec<Value>) -> FakeApiServer {
        let state = Arc::new(Mutex::new(State::default()));
        {
            let mut s = state.lock().expect("fake server state");
            for path in COLLECTIONS {
                s.collections.entry(path.to_string()).or_default();
            }
            for o in objects {
                s.put(o);
            }
        }
        let listener = listen(&handle, "127.0.0.1:0".parse().expect("an address"));
        let addr = listener.local_addr().expect("addr");
        let server = Mutex::new(serve(&handle, listener, state.clone()));
        FakeApiServer {
            addr,
            state,
            handle,
            server,
            runtime,
        }
    }

    /// Serves again on the same address, with the same objects and
    /// history, after [`FakeApiServer::stop`]: the cluster is back.
    pub async fn resume(&self) {
        let listener = listen(&self.handle, self.addr);
        *self.server.lock().expect("server handle") =
            serve(&self.handle, listener, self.state.clone());
    }

    /// Stops serving: the listener closes and every connection is cut.
    pub fn stop(&self) {
        self.server.lock().expect("server handle").abort();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("fake server state")
    }

    /// A kubeconfig whose one context, `context`, points at this server
    /// (plain HTTP, no credentials).
    pub fn kubeconfig(&self, context: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: fake\n  cluster: {{server: \"http://{}\"}}\n\
             users:\n- name: fake\n  user: {{}}\n\
             contexts:\n- name: {context}\n  context: {{cluster: fake, user: fake}}\n\
             current-context: {context}\n",
            self.addr
        )
    }

    /// Adds or replaces an object (ADDED / MODIFIED to watchers), status
    /// included, as a writer that ignores field management would (field
    /// ownership is left as it was); returns it as stored, with its new
    /// resourceVersion.
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
        for w in c.watchers.drain(..) {
            let _ = w.send(gone());
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

    /// Uninstalls every kind of API `group` (a cluster without those
    /// CRDs): their lists and watches are answered `404`, open watches
    /// end. Kinds outside [`COLLECTIONS`] (`ServiceExport`) are served
    /// only once an object of theirs has been applied.
    pub fn remove_api_group(&self, group: &str) {
        let prefix = format!("/apis/{group}/");
        self.lock()
            .collections
            .retain(|path, _| !path.starts_with(&prefix));
    }

    /// Uninstalls one kind (a cluster whose Gateway API release predates
    /// it, e.g. without BackendTLSPolicy): its list and watches are
    /// answered `404`, open watches end.
    pub fn remove_kind(&self, api_version: &str, kind: &str) {
        let path = collection_of(api_version, kind);
        self.lock().collections.remove(&path);
    }

    /// Answer the next `n` status patches with 409 Conflict.
    pub fn conflict_next_patches(&self, n: u32) {
        self.lock().conflicts = n;
    }

    /// The field managers owning `field` (object fields, dotted: e.g.
    /// `status.parents`) of an object's status, or anything beneath it.
    pub fn field_owners(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        field: &str,
    ) -> Vec<String> {
        let key = (
            collection_of(api_version, kind),
            namespace.to_string(),
            name.to_string(),
        );
        self.lock()
            .ownership
            .get(&key)
            .map(|o| o.owners(field))
            .unwrap_or_default()
    }

    /// Every Event created so far, in (namespace, name) order.
    pub fn events(&self) -> Vec<Value> {
        self.lock().events.values().cloned().collect()
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
}

/// A listener on `addr`, registered with `handle`'s runtime. With
/// `SO_REUSEADDR` (as `TcpListener::bind` sets it), so [`FakeApiServer::resume`]
/// can bind the address again while the connections cut by
/// [`FakeApiServer::stop`] linger in `TIME_WAIT`.
fn listen(handle: &Handle, addr: SocketAddr) -> TcpListener {
    let _runtime = handle.enter();
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.set_reuseaddr(true).expect("SO_REUSEADDR");
    socket
        .bind(addr)
        .unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    socket.listen(1024).expect("listen")
}

fn serve(handle: &Handle, listener: TcpListener, state: Arc<Mutex<State>>) -> JoinHandle<()> {
    handle.spawn(async move {
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
                    async move { Ok::<_, Infallible>(handler::handle(&state, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
            while connections.try_join_next().is_some() {}
        }
    })
}
