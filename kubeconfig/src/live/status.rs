//! Writing status: the server-side-apply writers for HTTPRoute, Gateway,
//! GatewayClass and BackendTLSPolicy status. What they apply is built by
//! the pure `patch` and `ancestors` modules.
//!
//! **Why read, merge, then force-apply with a resourceVersion.** An
//! HTTPRoute's `status.parents` (like a BackendTLSPolicy's
//! `status.ancestors`) is an *atomic* list in the Gateway API schema (no list-map keys), so server-side apply cannot split it between
//! controllers by field manager: whoever applies it owns all of it. Each
//! controller must therefore write the whole list, keeping the other
//! controllers' entries exactly as they are and replacing only its own
//! (those with its `controllerName`). We read the object, merge, and apply
//! with our own field manager ([`super::FIELD_MANAGER`]) and `force: true`
//! — without force every write after another controller's would conflict
//! forever — guarded by `metadata.resourceVersion` in the applied object:
//! if anyone wrote in between, the API server answers 409 and we read
//! again, so another controller's fresh entries are never lost.
//!
//! Gateway and GatewayClass status belong to the class controller (us)
//! alone; their `conditions` and `listeners` are list-maps keyed by type
//! and name, so the same apply only touches the entries we set. Reading
//! first also lets the writers keep `lastTransitionTime` when a
//! condition's status did not change, skip the write entirely when
//! nothing changed, and check the Raft term fence: the read and the
//! guarded apply are one compare-and-swap, so a deposed leader's write
//! either sees the newer term and is refused ([`WriteOutcome::Fenced`])
//! or gets 409 and reads it on the next round.
//!
//! It deliberately does not decide *what* the conditions are
//! ([`super::route_parent_statuses`], [`super::gateway_status`],
//! `class_status`) nor when to publish ([`super::StatusPublisher`]).

mod ancestors;
mod patch;

pub(crate) use patch::{
    class_status_patch, conditions_patch, gateway_status_patch, route_parents_patch,
};

use super::addresses::{Fleet, assign};
use super::class_status::class_status;
use super::conditions::RouteParentStatus;
use super::error::LiveError;
use super::fence::Fenced;
use super::gateway_conditions::{GatewayStatus, with_addresses};
use super::kinds::{FIELD_MANAGER, GATEWAY_GROUP, Watched, watched_api_resource};
use super::policy_status::PolicyAncestorStatus;
use ancestors::policy_ancestors_patch;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};
use switchyard_proto::model::{HttpRoute, Kind, ObjectMeta, ObjectName, ParentRef};
use tracing::debug;

/// How many read-merge-apply rounds a write tries before giving up on
/// conflicts (the next publish tries again).
const ATTEMPTS: u32 = 3;

/// What a status write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The status was applied.
    Written,
    /// The stored status already said the same (or the object is not
    /// ours to report on); nothing was sent.
    Unchanged,
    /// The object no longer exists; nothing was sent.
    Gone,
    /// A newer leader wrote the object: nothing was sent, and this
    /// coordinator should stop writing.
    Fenced(Fenced),
}

/// Replaces our entries of a route's (`kind`: HTTPRoute or GRPCRoute, whose
/// `status.parents` have one shape) `status.parents` in `cluster`
/// with `parents` (all of them carrying `controller_name`), keeping every
/// other controller's entry, as the leader of Raft term `term`. Empty
/// `parents` removes our entries.
pub async fn write_route_status(
    client: &kube::Client,
    cluster: &str,
    kind: Kind,
    route: &ObjectName,
    controller_name: &str,
    parents: &[RouteParentStatus],
    term: u64,
) -> Result<WriteOutcome, LiveError> {
    let now = now();
    write(client, cluster, kind, route, |current| {
        let existing = current.data.pointer("/status/parents");
        route_parents_patch(existing, parents, controller_name, term, &now)
            .map(|p| p.map(|parents| json!({ "parents": parents })))
    })
    .await
}

/// Replaces our entries of BackendTLSPolicy `policy`'s `status.ancestors`
/// in `cluster` with `ancestors` (all carrying `controller_name`), keeping
/// every other controller's entry, as the leader of Raft term `term`.
/// Empty `ancestors` removes our entries. `ancestors` is an atomic list
/// like a route's `parents`, written the same way (see the module docs).
pub async fn write_policy_status(
    client: &kube::Client,
    cluster: &str,
    policy: &ObjectName,
    controller_name: &str,
    ancestors: &[PolicyAncestorStatus],
    term: u64,
) -> Result<WriteOutcome, LiveError> {
    let now = now();
    write(client, cluster, Kind::BackendTLSPolicy, policy, |current| {
        let existing = current.data.pointer("/status/ancestors");
        policy_ancestors_patch(existing, ancestors, controller_name, term, &now)
            .map(|p| p.map(|ancestors| json!({ "ancestors": ancestors })))
    })
    .await
}

/// Writes the status of an HTTPRoute switchyard could not read at all
/// (no version of it ever translated): `statuses` computes our entries
/// from the route's parentRefs, read leniently from the stored object.
pub async fn write_unread_route_status(
    client: &kube::Client,
    cluster: &str,
    kind: Kind,
    route: &ObjectName,
    controller_name: &str,
    statuses: impl Fn(&HttpRoute) -> Vec<RouteParentStatus>,
    term: u64,
) -> Result<WriteOutcome, LiveError> {
    let now = now();
    write(client, cluster, kind, route, |current| {
        let parents = statuses(&unread_route(current, route));
        let existing = current.data.pointer("/status/parents");
        route_parents_patch(existing, &parents, controller_name, term, &now)
            .map(|p| p.map(|parents| json!({ "parents": parents })))
    })
    .await
}

/// Applies a Gateway's conditions, listener statuses and addresses in
/// `cluster`. `status` is computed without addresses; the Gateway's
/// `spec.addresses`, read here, and the proxies' addresses (`fleet`,
/// `None` when no proxy Service is configured) complete it
/// ([`with_addresses`]).
pub async fn write_gateway_status(
    client: &kube::Client,
    cluster: &str,
    gateway: &ObjectName,
    status: &GatewayStatus,
    fleet: Option<&Fleet>,
    term: u64,
) -> Result<WriteOutcome, LiveError> {
    let now = now();
    write(client, cluster, Kind::Gateway, gateway, |current| {
        let assignment = assign(&requested_addresses(current), fleet);
        let status = with_addresses(status.clone(), &assignment);
        gateway_status_patch(current.data.get("status"), &status, term, &now)
    })
    .await
}

/// Writes the status of GatewayClass `class` in `cluster` if its
/// `spec.controllerName` is `controller_name`; another controller's class
/// is read and left alone ([`WriteOutcome::Unchanged`]).
pub async fn write_class_status(
    client: &kube::Client,
    cluster: &str,
    class: &str,
    controller_name: &str,
    term: u64,
) -> Result<WriteOutcome, LiveError> {
    let now = now();
    let name = ObjectName::new("", class);
    write(client, cluster, Kind::GatewayClass, &name, |current| {
        let object = serde_json::to_value(current).unwrap_or_default();
        let Some(status) = class_status(&object, controller_name) else {
            return Ok(None);
        };
        class_status_patch(current.data.get("status"), &status, term, &now)
    })
    .await
}

/// Read, build, apply; again on 409. An empty namespace is a
/// cluster-scoped object.
async fn write(
    client: &kube::Client,
    cluster: &str,
    kind: Kind,
    name: &ObjectName,
    build: impl Fn(&DynamicObject) -> Result<Option<Value>, Fenced>,
) -> Result<WriteOutcome, LiveError> {
    write_watched(client, cluster, Watched::Model(kind), name, build).await
}

/// [`write`] for any watched kind (ServiceExports too).
pub(super) async fn write_watched(
    client: &kube::Client,
    cluster: &str,
    watched: Watched,
    name: &ObjectName,
    build: impl Fn(&DynamicObject) -> Result<Option<Value>, Fenced>,
) -> Result<WriteOutcome, LiveError> {
    let resource = watched_api_resource(watched);
    let api: Api<DynamicObject> = if name.namespace.is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), &name.namespace, &resource)
    };
    let fail = |source| LiveError::Status {
        cluster: cluster.to_string(),
        kind: watched.as_str(),
        object: name.to_string(),
        cause: Box::new(source),
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for attempt in 1..=ATTEMPTS {
        let current = match api.get(&name.name).await {
            Ok(current) => current,
            Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(WriteOutcome::Gone),
            Err(e) => return Err(fail(e)),
        };
        let status = match build(&current) {
            Ok(Some(status)) => status,
            Ok(None) => return Ok(WriteOutcome::Unchanged),
            Err(fenced) => return Ok(WriteOutcome::Fenced(fenced)),
        };
        let mut metadata = json!({
            "name": name.name,
            "resourceVersion": current.metadata.resource_version,
        });
        if !name.namespace.is_empty() {
            metadata["namespace"] = json!(name.namespace);
        }
        let body = json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": metadata,
            "status": status,
        });
        match api
            .patch_status(&name.name, &params, &Patch::Apply(&body))
            .await
        {
            Ok(_) => return Ok(WriteOutcome::Written),
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                debug!(%cluster, object = %name, attempt, "status write conflicted; reading again");
            }
            Err(e) => return Err(fail(e)),
        }
    }
    Err(LiveError::Conflict {
        cluster: cluster.to_string(),
        kind: watched.as_str(),
        object: name.to_string(),
        attempts: ATTEMPTS,
    })
}

/// Now, to the second (Kubernetes stores condition times in seconds, and
/// equal times are what let an unchanged status compare equal).
pub(super) fn now() -> Time {
    let ts = k8s_openapi::jiff::Timestamp::now();
    Time(k8s_openapi::jiff::Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

/// An unread route's `spec.parentRefs`, read leniently from the object
/// (the route as a whole failed translation; its parentRefs usually did
/// not), as a route the status computation can take.
fn unread_route(object: &DynamicObject, name: &ObjectName) -> HttpRoute {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let parent_refs = object
        .data
        .pointer("/spec/parentRefs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some(ParentRef {
                group: text(p, "group").unwrap_or_else(|| GATEWAY_GROUP.to_string()),
                kind: text(p, "kind").unwrap_or_else(|| "Gateway".to_string()),
                namespace: text(p, "namespace"),
                name: text(p, "name")?,
                section_name: text(p, "sectionName"),
                port: p
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok()),
            })
        })
        .collect();
    let mut meta = ObjectMeta::named(name.namespace.clone(), name.name.clone());
    meta.k8s_generation = object.metadata.generation;
    HttpRoute {
        kind: Default::default(),
        meta,
        parent_refs,
        hostnames: Vec::new(),
        rules: Vec::new(),
    }
}

/// A Gateway's `spec.addresses` as `(type, value)`.
fn requested_addresses(object: &DynamicObject) -> Vec<(Option<String>, String)> {
    object
        .data
        .pointer("/spec/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a.get("type").and_then(Value::as_str).map(str::to_string),
                a.get("value")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
