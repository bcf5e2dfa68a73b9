//! Every manifest in `deploy/` is a valid typed Kubernetes object (a typo'd
//! field fails: each document is decoded into its k8s-openapi or
//! gateway-api type, encoded again, and must equal the input); the
//! ClusterRoles grant exactly what the code uses (the coordinators'
//! `live::REQUIRED_PERMISSIONS`, the proxies'
//! `node_zone::REQUIRED_PERMISSIONS`),
//! bound to the accounts the pods run as; only the zone init container
//! holds an API token; and the namespace enforces Pod Security
//! "restricted".
//!
//! The pod templates against the restricted profile: `deploy_pod_security.rs`;
//! the group's and the fleet's layout: `deploy_topology.rs`.

mod deploy_support;

use anyhow::{Context, Result};
use deploy_support::{Manifests, grants, manifests, owned, pod_spec, round_trip};
use k8s_openapi::api::apps::v1::Deployment;
use switchyard_kubeconfig::live::REQUIRED_PERMISSIONS;

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

/// Whether a ClusterRoleBinding binds `role` to ServiceAccount
/// `namespace/account`.
fn bound(m: &Manifests, role: &str, namespace: &str, account: &str) -> bool {
    m.bindings.iter().any(|b| {
        b.role_ref.kind == "ClusterRole"
            && b.role_ref.name == role
            && b.subjects.iter().flatten().any(|s| {
                s.kind == "ServiceAccount"
                    && s.name == account
                    && s.namespace.as_deref() == Some(namespace)
            })
    })
}

#[test]
fn the_coordinators_role_grants_exactly_what_the_code_uses() -> Result<()> {
    let m = manifests()?;
    let role = m.cluster_role("switchyard-coordinator")?;
    let granted = grants(role);
    let required = owned(REQUIRED_PERMISSIONS);
    let missing: Vec<_> = required.difference(&granted).collect();
    let extra: Vec<_> = granted.difference(&required).collect();
    assert!(missing.is_empty(), "the ClusterRole lacks {missing:?}");
    assert!(
        extra.is_empty(),
        "the ClusterRole grants more than used: {extra:?}"
    );

    // Bound to the account every coordinator runs as.
    assert_eq!(m.stateful_sets.len(), 3);
    for sts in &m.stateful_sets {
        let account = pod_spec(&sts.spec.as_ref().context("spec")?.template)?
            .service_account_name
            .clone()
            .context("service account")?;
        let namespace = sts.metadata.namespace.as_deref().unwrap_or_default();
        assert!(
            m.accounts
                .iter()
                .any(|a| a.metadata.name.as_deref() == Some(account.as_str()))
        );
        assert!(
            bound(&m, "switchyard-coordinator", namespace, &account),
            "ClusterRoleBinding of switchyard-coordinator to {account}"
        );
    }
    Ok(())
}

#[test]
fn coordinators_may_create_events_and_read_what_gateway_status_needs() -> Result<()> {
    let m = manifests()?;
    let granted = grants(m.cluster_role("switchyard-coordinator")?);
    for (group, resource, verb) in [
        ("events.k8s.io", "events", "create"),
        (
            "gateway.networking.k8s.io",
            "gatewayclasses/status",
            "patch",
        ),
        ("", "services", "get"),
    ] {
        let want = (group.to_string(), resource.to_string(), verb.to_string());
        assert!(granted.contains(&want), "{want:?} in {granted:?}");
    }
    Ok(())
}

#[test]
fn only_the_zone_init_container_can_read_nodes_and_nothing_else() -> Result<()> {
    let m = manifests()?;
    let role = m.cluster_role("switchyard-node-reader")?;
    assert_eq!(
        grants(role),
        owned(switchyard_kubeconfig::node_zone::REQUIRED_PERMISSIONS)
    );
    let [proxy] = m.deployments.as_slice() else {
        anyhow::bail!("one Deployment");
    };
    let pod = pod_spec(&proxy.spec.as_ref().context("spec")?.template)?;
    let account = pod.service_account_name.as_deref().context("account")?;
    let namespace = proxy.metadata.namespace.as_deref().unwrap_or_default();
    assert!(bound(&m, "switchyard-node-reader", namespace, account));
    // Bound to nothing else.
    let roles: Vec<&str> = m
        .bindings
        .iter()
        .filter(|b| {
            b.subjects
                .iter()
                .flatten()
                .any(|s| s.name == account && s.namespace.as_deref() == Some(namespace))
        })
        .map(|b| b.role_ref.name.as_str())
        .collect();
    assert_eq!(roles, ["switchyard-node-reader"]);

    // No automatic token anywhere in the pod; the projected one goes to
    // the init container only.
    assert_eq!(pod.automount_service_account_token, Some(false));
    let token_volumes: Vec<&str> = pod
        .volumes
        .iter()
        .flatten()
        .filter(|v| {
            v.projected.as_ref().is_some_and(|p| {
                p.sources
                    .iter()
                    .flatten()
                    .any(|s| s.service_account_token.is_some())
            })
        })
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(token_volumes.len(), 1, "{token_volumes:?}");
    let mounts = |c: &k8s_openapi::api::core::v1::Container| {
        c.volume_mounts
            .iter()
            .flatten()
            .any(|v| v.name == token_volumes[0])
    };
    let holders: Vec<&str> = pod
        .init_containers
        .iter()
        .flatten()
        .chain(&pod.containers)
        .filter(|c| mounts(c))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(holders, ["zone"]);
    Ok(())
}

#[test]
fn the_namespace_enforces_pod_security_restricted() -> Result<()> {
    let m = manifests()?;
    let [namespace] = m.namespaces.as_slice() else {
        anyhow::bail!("one Namespace");
    };
    let labels = namespace.metadata.labels.clone().unwrap_or_default();
    let label = |k: &str| labels.get(k).map(String::as_str);
    assert_eq!(
        label("pod-security.kubernetes.io/enforce"),
        Some("restricted")
    );
    assert_eq!(
        label("pod-security.kubernetes.io/enforce-version"),
        Some("v1.30")
    );
    for mode in ["warn", "audit"] {
        let key = format!("pod-security.kubernetes.io/{mode}");
        assert_eq!(label(&key), Some("restricted"), "{key}");
    }
    // Everything namespaced lives there.
    let name = namespace.metadata.name.as_deref();
    for (kind, ns) in m
        .stateful_sets
        .iter()
        .map(|s| ("StatefulSet", &s.metadata.namespace))
        .chain(
            m.deployments
                .iter()
                .map(|d| ("Deployment", &d.metadata.namespace)),
        )
        .chain(
            m.services
                .iter()
                .map(|s| ("Service", &s.metadata.namespace)),
        )
    {
        assert_eq!(ns.as_deref(), name, "{kind}");
    }
    Ok(())
}
