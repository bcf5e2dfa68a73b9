//! Every manifest in `deploy/` is a valid typed Kubernetes object (a typo'd
//! field fails: each document is decoded into its k8s-openapi or
//! gateway-api type, encoded again, and must equal the input), and the
//! coordinator's ClusterRole grants exactly `REQUIRED_PERMISSIONS`.

use anyhow::{Context, Result, bail};
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::httproutes::HttpRoute;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use switchyard_kubeconfig::live::REQUIRED_PERMISSIONS;
use switchyard_proto::model::CONTROLLER_NAME;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// Every document of every `*.yaml` in deploy/, with its file name.
fn documents() -> Result<Vec<(String, Value)>> {
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
fn round_trip<T: DeserializeOwned + Serialize>(file: &str, value: &Value) -> Result<T> {
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

#[derive(Default)]
struct Manifests {
    cluster_roles: Vec<ClusterRole>,
    bindings: Vec<ClusterRoleBinding>,
    stateful_sets: Vec<StatefulSet>,
    deployments: Vec<Deployment>,
    services: Vec<Service>,
    budgets: Vec<PodDisruptionBudget>,
    classes: Vec<GatewayClass>,
    gateways: Vec<Gateway>,
    accounts: Vec<ServiceAccount>,
}

fn manifests() -> Result<Manifests> {
    let mut m = Manifests::default();
    let docs = documents()?;
    assert!(
        docs.len() >= 12,
        "deploy/ looks incomplete: {} documents",
        docs.len()
    );
    for (file, v) in &docs {
        let api_version = v["apiVersion"].as_str().unwrap_or_default();
        let kind = v["kind"].as_str().unwrap_or_default();
        match (api_version, kind) {
            ("v1", "Namespace") => drop(round_trip::<Namespace>(file, v)?),
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

#[test]
fn every_manifest_is_its_typed_object_exactly() -> Result<()> {
    manifests().map(|_| ())
}

#[test]
fn a_typo_is_caught() {
    let bad = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replica": 3, "selector": {}, "template": {}}
    });
    assert!(round_trip::<Deployment>("inline", &bad).is_err());
}

#[test]
fn the_cluster_role_grants_exactly_what_the_code_uses() -> Result<()> {
    let m = manifests()?;
    let [role] = m.cluster_roles.as_slice() else {
        bail!("expected one ClusterRole, found {}", m.cluster_roles.len());
    };
    let mut granted = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        assert!(rule.non_resource_urls.is_none(), "no non-resource URLs");
        assert!(rule.resource_names.is_none(), "no resourceNames");
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    for s in [group, resource, verb] {
                        assert!(!s.contains('*'), "wildcard in {role:?}");
                    }
                    granted.insert((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    let required: BTreeSet<(String, String, String)> = REQUIRED_PERMISSIONS
        .iter()
        .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
        .collect();
    let missing: Vec<_> = required.difference(&granted).collect();
    let extra: Vec<_> = granted.difference(&required).collect();
    assert!(missing.is_empty(), "the ClusterRole lacks {missing:?}");
    assert!(
        extra.is_empty(),
        "the ClusterRole grants more than used: {extra:?}"
    );

    // Bound to the account the coordinators run as.
    let role_name = role.metadata.name.clone().unwrap_or_default();
    let sts = &m.stateful_sets[0];
    let pod = sts
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .context("pod spec")?;
    let account = pod
        .service_account_name
        .clone()
        .context("service account")?;
    assert!(
        m.accounts
            .iter()
            .any(|a| a.metadata.name.as_deref() == Some(account.as_str()))
    );
    let bound = m.bindings.iter().any(|b| {
        b.role_ref.name == role_name
            && b.subjects.iter().flatten().any(|s| {
                s.kind == "ServiceAccount"
                    && s.name == account
                    && s.namespace == sts.metadata.namespace
            })
    });
    assert!(bound, "ClusterRoleBinding of {role_name} to {account}");
    Ok(())
}

#[test]
fn coordinators_form_a_three_member_group_that_survives_a_zone() -> Result<()> {
    let m = manifests()?;
    let [sts] = m.stateful_sets.as_slice() else {
        bail!("one StatefulSet");
    };
    let spec = sts.spec.as_ref().context("spec")?;
    assert_eq!(spec.replicas, Some(3));
    assert!(
        spec.volume_claim_templates
            .as_ref()
            .is_some_and(|v| !v.is_empty())
    );
    let headless = m
        .services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(spec.service_name.as_deref().unwrap_or("")))
        .context("the governing headless Service")?;
    assert_eq!(
        headless.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()),
        Some("None")
    );
    let pod = spec.template.spec.as_ref().context("pod")?;
    let zones = |c: &Option<Vec<k8s_openapi::api::core::v1::TopologySpreadConstraint>>| {
        c.iter()
            .flatten()
            .any(|t| t.topology_key == "topology.kubernetes.io/zone")
    };
    assert!(zones(&pod.topology_spread_constraints));
    let script = pod.containers[0].args.clone().unwrap_or_default().join(" ");
    let peers = script
        .split_whitespace()
        .skip_while(|w| *w != "--peers")
        .nth(1)
        .context("--peers")?;
    let sts_name = sts.metadata.name.clone().unwrap_or_default();
    let expected: Vec<String> = (0..3)
        .map(|i| {
            format!(
                "{}={sts_name}-{i}.{}.switchyard.svc.cluster.local:7000",
                i + 1,
                spec.service_name.clone().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(peers, expected.join(","));
    let pdb = m
        .budgets
        .iter()
        .find(|b| b.metadata.name == sts.metadata.name)
        .context("coordinator PDB")?;
    assert_eq!(
        pdb.spec.as_ref().and_then(|s| s.max_unavailable.clone()),
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );

    // Proxies: spread over zones, know every coordinator, serve the
    // example Gateway's port, and the class is ours.
    let [proxy] = m.deployments.as_slice() else {
        bail!("one Deployment");
    };
    let pod = proxy
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .context("proxy pod")?;
    assert!(zones(&pod.topology_spread_constraints));
    let args = pod.containers[0].args.clone().unwrap_or_default();
    let coordinators = args
        .iter()
        .find_map(|a| a.strip_prefix("--coordinators="))
        .context("--coordinators")?;
    let addresses: Vec<&str> = expected.iter().map(|p| &p[2..]).collect();
    assert_eq!(coordinators, addresses.join(","));
    let listener = args
        .iter()
        .find_map(|a| a.strip_prefix("--listener="))
        .context("--listener")?;
    let gateway_port = m.gateways[0].spec.listeners[0].port;
    assert!(
        listener.starts_with(&format!("{gateway_port}=")),
        "{listener}"
    );
    assert_eq!(m.classes[0].spec.controller_name, CONTROLLER_NAME);
    assert_eq!(
        m.gateways[0].spec.gateway_class_name,
        m.classes[0].metadata.name.clone().unwrap_or_default()
    );
    Ok(())
}
