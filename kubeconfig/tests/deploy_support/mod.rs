//! What the tests of `deploy/` share: every document of every `*.yaml`
//! there, each decoded into its k8s-openapi or gateway-api type (and
//! required to encode back to the same JSON, so a typo'd field fails),
//! sorted by kind; the pod templates; and small readers of flags.

#![allow(dead_code)] // each test file uses a different part

use anyhow::{Context, Result, bail};
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{
    Container, Namespace, PodSpec, PodTemplateSpec, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository's `deploy/`.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// Every document of every `*.yaml` in deploy/, with its file name.
pub fn documents() -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy_dir())?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.sort();
    for path in files {
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        for doc in yaml_serde::Deserializer::from_str(&text) {
            let value = Value::deserialize(doc).with_context(|| name.clone())?;
            if !value.is_null() {
                out.push((name.clone(), value));
            }
        }
    }
    Ok(out)
}

/// Decodes into `T`, encodes again, and requires the same JSON.
pub fn round_trip<T: DeserializeOwned + Serialize>(file: &str, value: &Value) -> Result<T> {
    let typed: T = serde_json::from_value(value.clone())
        .with_context(|| format!("{file}: {} does not decode", value["kind"]))?;
    let back = serde_json::to_value(&typed)?;
    if let Some(at) = first_difference("", value, &back) {
        bail!(
            "{file}: {} {}: {at} (a field its type does not know, or a value it rewrites)",
            value["kind"],
            value["metadata"]["name"]
        );
    }
    Ok(typed)
}

/// The JSON pointer of the first difference, with both sides.
fn first_difference(at: &str, input: &Value, typed: &Value) -> Option<String> {
    match (input, typed) {
        (Value::Object(a), Value::Object(b)) => {
            a.keys()
                .chain(b.keys())
                .find_map(|k| match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => first_difference(&format!("{at}/{k}"), x, y),
                    (x, y) => Some(format!("{at}/{k}: input {x:?}, typed {y:?}")),
                })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(&format!("{at}/{i}"), x, y)),
        (a, b) if a == b => None,
        (a, b) => Some(format!("{at}: input {a}, typed {b}")),
    }
}

/// Every object of deploy/, typed.
#[derive(Default)]
pub struct Manifests {
    pub namespaces: Vec<Namespace>,
    pub cluster_roles: Vec<ClusterRole>,
    pub bindings: Vec<ClusterRoleBinding>,
    pub stateful_sets: Vec<StatefulSet>,
    pub deployments: Vec<Deployment>,
    pub services: Vec<Service>,
    pub budgets: Vec<PodDisruptionBudget>,
    pub classes: Vec<GatewayClass>,
    pub gateways: Vec<Gateway>,
    pub accounts: Vec<ServiceAccount>,
}

/// Reads deploy/ (see [`documents`], [`round_trip`]).
pub fn manifests() -> Result<Manifests> {
    let mut m = Manifests::default();
    let docs = documents()?;
    assert!(
        docs.len() >= 18,
        "deploy/ looks incomplete: {} documents",
        docs.len()
    );
    for (file, v) in &docs {
        let api_version = v["apiVersion"].as_str().unwrap_or_default();
        let kind = v["kind"].as_str().unwrap_or_default();
        match (api_version, kind) {
            ("v1", "Namespace") => m.namespaces.push(round_trip(file, v)?),
            ("v1", "ServiceAccount") => m.accounts.push(round_trip(file, v)?),
            ("v1", "Service") => m.services.push(round_trip(file, v)?),
            ("apps/v1", "StatefulSet") => m.stateful_sets.push(round_trip(file, v)?),
            ("apps/v1", "Deployment") => m.deployments.push(round_trip(file, v)?),
            ("policy/v1", "PodDisruptionBudget") => m.budgets.push(round_trip(file, v)?),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                m.cluster_roles.push(round_trip(file, v)?)
            }
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                m.bindings.push(round_trip(file, v)?)
            }
            ("gateway.networking.k8s.io/v1", "GatewayClass") => {
                m.classes.push(round_trip(file, v)?)
            }
            ("gateway.networking.k8s.io/v1", "Gateway") => m.gateways.push(round_trip(file, v)?),
            ("gateway.networking.k8s.io/v1", "HTTPRoute") => {
                drop(round_trip::<HttpRoute>(file, v)?)
            }
            _ => bail!("{file}: no typed check for {api_version} {kind}"),
        }
    }
    Ok(m)
}

/// `Kind namespace/name`, for messages.
pub fn describe(
    kind: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> String {
    format!(
        "{kind} {}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

impl Manifests {
    /// Every pod template in deploy/, named by its owner.
    pub fn pod_templates(&self) -> Vec<(String, &PodTemplateSpec)> {
        let sets = self.stateful_sets.iter().filter_map(|s| {
            let spec = s.spec.as_ref()?;
            Some((describe("StatefulSet", &s.metadata), &spec.template))
        });
        let deployments = self.deployments.iter().filter_map(|d| {
            let spec = d.spec.as_ref()?;
            Some((describe("Deployment", &d.metadata), &spec.template))
        });
        sets.chain(deployments).collect()
    }

    /// The coordinators' StatefulSets, ordered by name.
    pub fn coordinators(&self) -> Vec<&StatefulSet> {
        let mut sets: Vec<&StatefulSet> = self.stateful_sets.iter().collect();
        sets.sort_by_key(|s| s.metadata.name.clone());
        sets
    }

    /// The Service named `name`.
    pub fn service(&self, name: &str) -> Result<&Service> {
        self.services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name))
            .with_context(|| format!("no Service {name}"))
    }

    /// The ClusterRole named `name`.
    pub fn cluster_role(&self, name: &str) -> Result<&ClusterRole> {
        self.cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .with_context(|| format!("no ClusterRole {name}"))
    }
}

/// The pod spec of a StatefulSet or a Deployment's template.
pub fn pod_spec(template: &PodTemplateSpec) -> Result<&PodSpec> {
    template
        .spec
        .as_ref()
        .context("a pod template without spec")
}

/// The value of `--flag=VALUE` in a container's args.
pub fn flag<'a>(container: &'a Container, flag: &str) -> Option<&'a str> {
    let prefix = format!("{flag}=");
    container
        .args
        .iter()
        .flatten()
        .find_map(|a| a.strip_prefix(&prefix))
}

/// `(group, resource, verb)` of every rule of `role`, refusing wildcards,
/// resource names and non-resource URLs.
pub fn grants(role: &ClusterRole) -> BTreeSet<(String, String, String)> {
    let name = role.metadata.name.as_deref().unwrap_or_default();
    let mut granted = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        assert!(
            rule.non_resource_urls.is_none(),
            "{name}: no non-resource URLs"
        );
        assert!(rule.resource_names.is_none(), "{name}: no resourceNames");
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    for s in [group, resource, verb] {
                        assert!(!s.contains('*'), "{name}: wildcard in {rule:?}");
                    }
                    granted.insert((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    granted
}

/// `list` as owned triples.
pub fn owned(list: &[(&str, &str, &str)]) -> BTreeSet<(String, String, String)> {
    list.iter()
        .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
        .collect()
}
