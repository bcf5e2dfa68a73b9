//! A small fake Kubernetes API server on 127.0.0.1 for process tests of
//! `switchyard coordinator --kubernetes`: lists, `?watch=true` streams
//! replayed from a resourceVersion, object GETs and status PATCHes, every
//! request recorded.
//!
//! The request-serving core of `kubeconfig/tests/live_support` cut down
//! to what a real coordinator's watchers and status writers send; that
//! module (compaction, conflicts, stopping the server) stays the place
//! for the live-cluster tests themselves. It uses only this crate's
//! dependencies, and runs on a runtime of its own so the blocking process
//! helpers of the tests never starve it.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::mpsc;

type ResponseBody = BoxBody<Bytes, Infallible>;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `PATCH`, ...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The JSON body, if any.
    pub body: Option<Value>,
}

#[derive(Default)]
struct Collection {
    objects: BTreeMap<(String, String), Value>,
    /// (resourceVersion, event type, object), replayed to new watches.
    events: Vec<(u64, &'static str, Value)>,
    watchers: Vec<mpsc::UnboundedSender<Bytes>>,
}

#[derive(Default)]
struct State {
    rv: u64,
    collections: HashMap<String, Collection>,
    requests: Vec<Recorded>,
}

/// Every collection the coordinator's watchers read.
const COLLECTIONS: [&str; 7] = [
    "/api/v1/namespaces",
    "/api/v1/services",
    "/apis/discovery.k8s.io/v1/endpointslices",
    "/apis/gateway.networking.k8s.io/v1/gatewayclasses",
    "/apis/gateway.networking.k8s.io/v1/gateways",
    "/apis/gateway.networking.k8s.io/v1/httproutes",
    "/apis/gateway.networking.k8s.io/v1beta1/referencegrants",
];

/// A running fake API server; stops when dropped.
pub struct FakeKube {
    /// Its address.
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl FakeKube {
    /// Starts a server holding `objects` on 127.0.0.1, port 0.
    pub fn start(objects: Vec<Value>) -> FakeKube {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("fake API server runtime");
        let state = Arc::new(Mutex::new(State::default()));
        {
            let mut s = state.lock().expect("state");
            for path in COLLECTIONS {
                s.collections.entry(path.to_string()).or_default();
            }
            for o in objects {
                s.put(o);
            }
        }
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let served = state.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = served.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(handle(&state, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FakeKube {
            addr,
            state,
            runtime: Some(runtime),
        }
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

    /// Deletes an object (DELETED to watchers).
    pub fn delete(&self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let path = collection_of(api_version, kind);
        let mut s = self.state.lock().expect("state");
        let rv = s.bump();
        let c = s.collections.entry(path.clone()).or_default();
        let mut object = c
            .objects
            .remove(&(namespace.to_string(), name.to_string()))
            .expect("object to delete exists");
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        s.emit(&path, "DELETED", object);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().expect("state").requests.clone()
    }
}

/// The collection path (all namespaces) of a kind.
fn collection_of(api_version: &str, kind: &str) -> String {
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

fn line(kind: &str, object: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(&json!({"type": kind, "object": object})).expect("json");
    bytes.push(b'\n');
    Bytes::from(bytes)
}

impl State {
    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn emit(&mut self, path: &str, kind: &'static str, object: Value) {
        let rv = self.rv;
        let c = self.collections.entry(path.to_string()).or_default();
        let bytes = line(kind, &object);
        c.watchers.retain(|w| w.send(bytes.clone()).is_ok());
        c.events.push((rv, kind, object));
    }

    fn put(&mut self, mut object: Value) -> Value {
        let path = collection_of(
            object["apiVersion"].as_str().expect("apiVersion"),
            object["kind"].as_str().expect("kind"),
        );
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

fn json_response(status: StatusCode, value: &Value) -> Response<ResponseBody> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(value).expect("json"))).boxed())
        .expect("response")
}

fn not_found() -> Response<ResponseBody> {
    json_response(
        StatusCode::NOT_FOUND,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "not found", "reason": "NotFound", "code": 404}),
    )
}

/// A watch stream's body: the lines sent to its channel, until dropped.
struct Lines(mpsc::UnboundedReceiver<Bytes>);

impl Body for Lines {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

async fn handle(state: &Arc<Mutex<State>>, req: Request<Incoming>) -> Response<ResponseBody> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query: BTreeMap<String, String> = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let bytes = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Option<Value> = serde_json::from_slice(&bytes).ok();
    let mut s = state.lock().expect("state");
    s.requests.push(Recorded {
        method: method.to_string(),
        path: path.clone(),
        body: body.clone(),
    });
    if path == "/version" {
        return json_response(
            StatusCode::OK,
            &json!({"major": "1", "minor": "34", "gitVersion": "v1.34.0-fake",
                    "gitCommit": "", "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z",
                    "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"}),
        );
    }
    if COLLECTIONS.contains(&path.as_str()) && method == Method::GET {
        let rv = s.rv;
        let c = s.collections.get_mut(&path).expect("collection");
        if query.get("watch").is_some_and(|w| w == "true" || w == "1") {
            let from: u64 = query
                .get("resourceVersion")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let (tx, rx) = mpsc::unbounded_channel();
            for (at, kind, object) in &c.events {
                if *at > from {
                    let _ = tx.send(line(kind, object));
                }
            }
            c.watchers.push(tx);
            return Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/json")
                .body(Lines(rx).boxed())
                .expect("response");
        }
        let items: Vec<&Value> = c.objects.values().collect();
        return json_response(
            StatusCode::OK,
            &json!({"kind": "List", "apiVersion": "v1",
                    "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
        );
    }
    // /api[s]/GROUP/VERSION/namespaces/NS/PLURAL/NAME[/status]
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (prefix, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => (format!("/api/{v}"), rest),
        ["apis", g, v, rest @ ..] => (format!("/apis/{g}/{v}"), rest),
        _ => return not_found(),
    };
    let ["namespaces", ns, plural, name, sub @ ..] = rest else {
        return not_found();
    };
    let collection = format!("{prefix}/{plural}");
    let key = (ns.to_string(), name.to_string());
    let Some(mut object) = s
        .collections
        .get(&collection)
        .and_then(|c| c.objects.get(&key))
        .cloned()
    else {
        return not_found();
    };
    match (method, sub) {
        (Method::GET, []) => json_response(StatusCode::OK, &object),
        // Server-side apply merging is not modelled: the patch's status
        // replaces the stored one.
        (Method::PATCH, ["status"]) => {
            object["status"] = body.unwrap_or_default()["status"].clone();
            let stored = s.put(object);
            json_response(StatusCode::OK, &stored)
        }
        _ => not_found(),
    }
}
