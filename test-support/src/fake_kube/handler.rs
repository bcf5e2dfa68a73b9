//! The fake server's request handling: lists, watch streams, object GETs,
//! status PATCHes (server-side apply, [`super::apply`]), Event creates
//! and `/version`, each request recorded first.

use super::{Recorded, State, gone, watch_line};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::mpsc;

type ResponseBody = BoxBody<Bytes, Infallible>;

fn json_response(status: StatusCode, value: &Value) -> Response<ResponseBody> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(value).expect("json"))).boxed())
        .expect("response")
}

fn status_response(code: u16, reason: &str, message: &str) -> Response<ResponseBody> {
    let status = StatusCode::from_u16(code).expect("status code");
    json_response(
        status,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "code": code}),
    )
}

/// A watch stream's body: the lines sent to its channel, until every
/// sender is gone (the server stopped, or the watch expired).
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

pub(super) async fn handle(
    state: &Arc<Mutex<State>>,
    req: Request<Incoming>,
) -> Response<ResponseBody> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query: BTreeMap<String, String> = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.replace("%2F", "/"))
        })
        .collect();
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header("content-type");
    let client = header("x-test-client");
    let bytes = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Option<Value> = serde_json::from_slice(&bytes).ok();
    let recorded = Recorded {
        method: method.to_string(),
        path: path.clone(),
        query,
        content_type,
        client,
        body,
    };
    let mut s = state.lock().expect("fake server state");
    s.requests.push(recorded.clone());
    if path == "/version" {
        return json_response(
            StatusCode::OK,
            &json!({"major": "1", "minor": "34", "gitVersion": "v1.34.0-fake",
                    "gitCommit": "", "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z",
                    "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"}),
        );
    }
    if s.collections.contains_key(&path) && method == Method::GET {
        return if recorded.is_watch() {
            watch(&mut s, &path, &recorded)
        } else {
            list(&s, &path)
        };
    }
    if let Some(namespace) = events_namespace(&path) {
        return match method {
            Method::POST => create_event(&mut s, namespace, &recorded),
            _ => status_response(405, "MethodNotAllowed", "not served by the fake"),
        };
    }
    let Some((collection, namespace, name, sub)) = parse_object_path(&path) else {
        return status_response(404, "NotFound", "no such path");
    };
    match (method, sub.as_deref()) {
        (Method::GET, None) => match s
            .collections
            .get(&collection)
            .and_then(|c| c.objects.get(&(namespace.clone(), name.clone())))
        {
            Some(o) => json_response(StatusCode::OK, o),
            None => status_response(404, "NotFound", "not found"),
        },
        (Method::PATCH, Some("status")) => {
            patch_status(&mut s, &collection, namespace, name, &recorded)
        }
        _ => status_response(405, "MethodNotAllowed", "not served by the fake"),
    }
}

/// The namespace of an `events.k8s.io/v1` collection path.
fn events_namespace(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["apis", "events.k8s.io", "v1", "namespaces", ns, "events"] => Some(ns.to_string()),
        _ => None,
    }
}

/// Creates an Event; a name already taken is `409 AlreadyExists`, as the
/// API server answers a second create of a deterministic name.
fn create_event(s: &mut State, namespace: String, req: &Recorded) -> Response<ResponseBody> {
    let mut event = req.body.clone().unwrap_or_default();
    let Some(name) = event["metadata"]["name"].as_str().map(str::to_string) else {
        return status_response(422, "Invalid", "metadata.name is required by the fake");
    };
    if s.events.contains_key(&(namespace.clone(), name.clone())) {
        return status_response(
            409,
            "AlreadyExists",
            &format!("events.events.k8s.io \"{name}\" already exists"),
        );
    }
    let rv = s.bump();
    event["metadata"]["namespace"] = json!(namespace);
    event["metadata"]["resourceVersion"] = json!(rv.to_string());
    s.events.insert((namespace, name), event.clone());
    json_response(StatusCode::CREATED, &event)
}

/// `/apis/g/v/namespaces/ns/plural/name[/sub]` (or a cluster-scoped
/// `/apis/g/v/plural/name[/sub]`) into (collection, ns, name, sub); the
/// namespace of a cluster-scoped object is empty.
fn parse_object_path(path: &str) -> Option<(String, String, String, Option<String>)> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (prefix, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => (format!("/api/{v}"), rest),
        ["apis", g, v, rest @ ..] => (format!("/apis/{g}/{v}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, rest @ ..] => (ns.to_string(), (plural, rest)),
        [plural, rest @ ..] if *plural != "namespaces" || rest.len() == 1 => {
            (String::new(), (plural, rest))
        }
        _ => return None,
    };
    match rest {
        (plural, [name, sub @ ..]) if sub.len() <= 1 => Some((
            format!("{prefix}/{plural}"),
            namespace,
            name.to_string(),
            sub.first().map(|s| s.to_string()),
        )),
        _ => None,
    }
}

fn list(s: &State, path: &str) -> Response<ResponseBody> {
    let c = &s.collections[path];
    let items: Vec<&Value> = c.objects.values().collect();
    let (api_version, kind) = match path.rsplit_once('/') {
        Some((prefix, plural)) => (
            prefix
                .trim_start_matches("/apis/")
                .trim_start_matches("/api/")
                .to_string(),
            format!("{plural}List"),
        ),
        None => unreachable!("collection paths have slashes"),
    };
    json_response(
        StatusCode::OK,
        &json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"resourceVersion": s.rv.to_string()}, "items": items}),
    )
}

fn watch(s: &mut State, path: &str, req: &Recorded) -> Response<ResponseBody> {
    let from: u64 = req
        .query
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let c = s.collections.get_mut(path).expect("collection");
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    if from < c.compacted {
        // The one line, then the stream ends (the sender is dropped).
        let _ = tx.send(gone());
    } else {
        for (rv, kind, object) in &c.events {
            if *rv > from {
                let _ = tx.send(watch_line(&json!({"type": kind, "object": object})));
            }
        }
        c.watchers.push(tx);
    }
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Lines(rx).boxed())
        .expect("response")
}

/// Server-side apply of `status` ([`super::apply`]): the field manager
/// from `?fieldManager=`, `?force=true` taking fields from other managers.
/// A `metadata.resourceVersion` in the patch must match the stored
/// object's (409 otherwise), and injected conflicts come first.
fn patch_status(
    s: &mut State,
    collection: &str,
    namespace: String,
    name: String,
    req: &Recorded,
) -> Response<ResponseBody> {
    if s.conflicts > 0 {
        s.conflicts -= 1;
        return status_response(409, "Conflict", "the object has been modified");
    }
    let key = (namespace, name);
    let Some(mut object) = s
        .collections
        .get(collection)
        .and_then(|c| c.objects.get(&key))
        .cloned()
    else {
        return status_response(404, "NotFound", "not found");
    };
    let body = req.body.clone().unwrap_or_default();
    let wanted = body["metadata"]["resourceVersion"].as_str();
    if wanted.is_some() && wanted != object["metadata"]["resourceVersion"].as_str() {
        return status_response(409, "Conflict", "the object has been modified");
    }
    if req.content_type.as_deref() != Some("application/apply-patch+yaml") {
        return status_response(
            415,
            "UnsupportedMediaType",
            "the fake serves apply patches only",
        );
    }
    let Some(manager) = req.query.get("fieldManager").filter(|m| !m.is_empty()) else {
        return status_response(422, "Invalid", "fieldManager is required for apply patch");
    };
    let force = req.query.get("force").is_some_and(|f| f == "true");
    let status = body.get("status").cloned().unwrap_or_else(|| json!({}));
    let owners = s
        .ownership
        .entry((collection.to_string(), key.0.clone(), key.1.clone()))
        .or_default();
    if let Err(conflicts) = owners.apply_status(&mut object, manager, &status, force) {
        return status_response(409, "Conflict", &conflicts.message());
    }
    let stored = s.put(object);
    json_response(StatusCode::OK, &stored)
}
