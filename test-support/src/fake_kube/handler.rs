//! The fake server's request handling: lists, watch streams, object GETs,
//! status PATCHes and `/version`, each request recorded first.

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

/// `/apis/g/v/namespaces/ns/plural/name[/sub]` into (collection, ns, name, sub).
fn parse_object_path(path: &str) -> Option<(String, String, String, Option<String>)> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (prefix, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => (format!("/api/{v}"), rest),
        ["apis", g, v, rest @ ..] => (format!("/apis/{g}/{v}"), rest),
        _ => return None,
    };
    match rest {
        ["namespaces", ns, plural, name, sub @ ..] => Some((
            format!("{prefix}/{plural}"),
            ns.to_string(),
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

/// Server-side apply of `status`, as far as the fake models it: the
/// patch's `status` replaces the stored one. A `metadata.resourceVersion`
/// in the patch must match the stored object's (409 otherwise), and
/// injected conflicts come first.
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
    let Some(mut object) = s
        .collections
        .get(collection)
        .and_then(|c| c.objects.get(&(namespace, name)))
        .cloned()
    else {
        return status_response(404, "NotFound", "not found");
    };
    let body = req.body.clone().unwrap_or_default();
    let wanted = body["metadata"]["resourceVersion"].as_str();
    if wanted.is_some() && wanted != object["metadata"]["resourceVersion"].as_str() {
        return status_response(409, "Conflict", "the object has been modified");
    }
    object["status"] = body["status"].clone();
    let stored = s.put(object);
    json_response(StatusCode::OK, &stored)
}
