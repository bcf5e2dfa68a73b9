//! How `deploy/` lays out the Raft group and the proxy fleet, read from the
//! typed objects: three coordinators, each its own StatefulSet and headless
//! Service (its `--peers` address), spread one per zone (`DoNotSchedule`,
//! `minDomains: 3`) over the label all three share, each mounting only its
//! own key, and otherwise the same (the three files cannot drift apart);
//! a disruption budget that keeps the quorum; proxies that learn
//! their zone from the node through the `zone` init container, wait out a
//! `preStop` delay before they stop accepting, fit their whole drain into
//! the grace period, and sit behind an `externalTrafficPolicy: Local`
//! LoadBalancer that serves the example Gateway's port.
//!
//! The typed decoding itself and RBAC: `deploy_manifests.rs`; Pod Security
//! and image pins: `deploy_pod_security.rs`.

mod deploy_support;

use anyhow::{Context, Result, bail, ensure};
use deploy_support::{Manifests, flag, manifests, pod_spec};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Container, PodSpec, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use switchyard_proto::model::{CONTROLLER_NAME, parse_duration};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

/// Whether `selector` (matchLabels only; the manifests use nothing else)
/// selects a pod with `labels`.
fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    assert!(
        selector.match_expressions.is_none(),
        "matchExpressions are not modelled here"
    );
    let wanted = selector.match_labels.clone().unwrap_or_default();
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The labels of a StatefulSet's pods.
fn pod_labels(sts: &StatefulSet) -> Result<BTreeMap<String, String>> {
    let spec = sts.spec.as_ref().context("spec")?;
    let meta = spec
        .template
        .metadata
        .as_ref()
        .context("template metadata")?;
    Ok(meta.labels.clone().unwrap_or_default())
}

fn coordinator_pod(sts: &StatefulSet) -> Result<&PodSpec> {
    pod_spec(&sts.spec.as_ref().context("spec")?.template)
}

fn container<'a>(pod: &'a PodSpec, name: &str) -> Result<&'a Container> {
    pod.containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .with_context(|| format!("no container {name}"))
}

/// The spread constraint on `key`.
fn spread<'a>(pod: &'a PodSpec, key: &str) -> Result<&'a TopologySpreadConstraint> {
    pod.topology_spread_constraints
        .iter()
        .flatten()
        .find(|t| t.topology_key == key)
        .with_context(|| format!("no topologySpreadConstraint on {key}"))
}

/// `--peers` of every coordinator, which must be one and the same list:
/// `(id, address)`.
fn peers(m: &Manifests) -> Result<Vec<(String, String)>> {
    let mut lists = Vec::new();
    for sts in m.coordinators() {
        let pod = coordinator_pod(sts)?;
        lists.push(flag(container(pod, "coordinator")?, "--peers").context("--peers")?);
    }
    ensure!(
        lists.windows(2).all(|w| w[0] == w[1]),
        "--peers differ: {lists:?}"
    );
    let first = lists.first().context("no coordinator")?;
    first
        .split(',')
        .map(|p| {
            let (id, address) = p.split_once('=').context("ID=ADDRESS")?;
            Ok((id.to_string(), address.to_string()))
        })
        .collect()
}

#[test]
fn coordinators_are_three_members_each_with_its_own_address_and_volume() -> Result<()> {
    let m = manifests()?;
    let sets = m.coordinators();
    let names: Vec<&str> = sets
        .iter()
        .filter_map(|s| s.metadata.name.as_deref())
        .collect();
    assert_eq!(
        names,
        [
            "switchyard-coordinator-1",
            "switchyard-coordinator-2",
            "switchyard-coordinator-3"
        ]
    );
    let peers = peers(&m)?;
    assert_eq!(peers.len(), 3, "{peers:?}");
    for (sts, (id, address)) in sets.iter().zip(&peers) {
        let name = sts.metadata.name.clone().unwrap_or_default();
        let spec = sts.spec.as_ref().context("spec")?;
        assert_eq!(spec.replicas, Some(1), "{name}");
        // A manifest change restarts no member by itself: three
        // StatefulSets would roll all three at once.
        let strategy = spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.type_.as_deref());
        assert_eq!(strategy, Some("OnDelete"), "{name}");
        let claims = spec.volume_claim_templates.iter().flatten();
        assert_eq!(claims.count(), 1, "{name}: one sled volume");

        let pod = coordinator_pod(sts)?;
        let coordinator = container(pod, "coordinator")?;
        assert_eq!(flag(coordinator, "--id"), Some(id.as_str()), "{name}");
        assert_eq!(name, format!("switchyard-coordinator-{id}"));

        // Its --peers address is its own headless Service, which selects
        // this member's pod and no other coordinator's.
        let service_name = spec.service_name.clone().context("serviceName")?;
        let service = m.service(&service_name)?;
        let namespace = sts.metadata.namespace.clone().unwrap_or_default();
        let service_spec = service.spec.as_ref().context("service spec")?;
        let port = service_spec
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some("grpc"))
            .context("grpc port")?;
        assert_eq!(
            address,
            &format!("{service_name}.{namespace}.svc.cluster.local:{}", port.port)
        );
        let listen = flag(coordinator, "--listen").context("--listen")?;
        assert!(listen.ends_with(&format!(":{}", port.port)), "{listen}");
        assert_eq!(service_spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(service_spec.publish_not_ready_addresses, Some(true));
        let selector = LabelSelector {
            match_labels: service_spec.selector.clone(),
            ..Default::default()
        };
        for other in &sets {
            let chosen = selects(&selector, &pod_labels(other)?);
            assert_eq!(
                chosen,
                other.metadata.name == sts.metadata.name,
                "Service {service_name} and {:?}",
                other.metadata.name
            );
        }
    }
    Ok(())
}

#[test]
fn coordinators_spread_one_per_zone_or_stay_pending() -> Result<()> {
    let m = manifests()?;
    let sets = m.coordinators();
    for sts in &sets {
        let name = sts.metadata.name.clone().unwrap_or_default();
        let pod = coordinator_pod(sts)?;
        let zone = spread(pod, ZONE)?;
        assert_eq!(zone.max_skew, 1, "{name}");
        assert_eq!(zone.when_unsatisfiable, "DoNotSchedule", "{name}");
        assert_eq!(zone.min_domains, Some(3), "{name}");
        let host = spread(pod, HOSTNAME)?;
        assert_eq!(host.when_unsatisfiable, "DoNotSchedule", "{name}");
        // Each counts the whole group, not just this member's one pod
        // (which would make every constraint trivially met).
        for constraint in [zone, host] {
            let selector = constraint
                .label_selector
                .as_ref()
                .context("labelSelector")?;
            for member in &sets {
                assert!(
                    selects(selector, &pod_labels(member)?),
                    "{name}: the {} spread does not count {:?}",
                    constraint.topology_key,
                    member.metadata.name
                );
            }
        }
    }
    // Drains leave a quorum: at least two of the three members.
    let budget = m
        .budgets
        .iter()
        .find(|b| b.metadata.name.as_deref() == Some("switchyard-coordinator"))
        .context("the coordinators' PodDisruptionBudget")?;
    let spec = budget.spec.as_ref().context("budget spec")?;
    assert_eq!(spec.min_available, Some(IntOrString::Int(2)));
    let selector = spec.selector.as_ref().context("budget selector")?;
    for member in &sets {
        assert!(selects(selector, &pod_labels(member)?));
    }
    Ok(())
}

#[test]
fn each_coordinator_mounts_only_its_own_key() -> Result<()> {
    let m = manifests()?;
    let mut secrets = Vec::new();
    for sts in m.coordinators() {
        let pod = coordinator_pod(sts)?;
        let coordinator = container(pod, "coordinator")?;
        let id = flag(coordinator, "--id").context("--id")?;
        // No volume of another kind smuggles in a Secret.
        for volume in pod.volumes.iter().flatten() {
            let projected_secret = volume
                .projected
                .as_ref()
                .is_some_and(|p| p.sources.iter().flatten().any(|s| s.secret.is_some()));
            assert!(
                !projected_secret,
                "coordinator {id}: volume {}",
                volume.name
            );
        }
        let secret_volumes: Vec<_> = pod
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| Some((v.name.as_str(), v.secret.as_ref()?)))
            .collect();
        let [(volume, secret)] = secret_volumes.as_slice() else {
            bail!("coordinator {id}: one Secret volume, found {secret_volumes:?}");
        };
        let secret_name = secret.secret_name.clone().context("secretName")?;
        assert_eq!(secret_name, format!("switchyard-coordinator-{id}-tls"));
        secrets.push(secret_name);
        // Only its own files, even if the Secret held more.
        let items: Vec<(&str, &str)> = secret
            .items
            .iter()
            .flatten()
            .map(|i| (i.key.as_str(), i.path.as_str()))
            .collect();
        let cert = format!("coordinator-{id}.pem");
        let key = format!("coordinator-{id}-key.pem");
        assert_eq!(
            items,
            [
                ("ca.pem", "ca.pem"),
                (cert.as_str(), cert.as_str()),
                (key.as_str(), key.as_str())
            ]
        );
        assert_eq!(secret.default_mode, Some(0o400));
        // And the flags name exactly those files.
        let mount = coordinator
            .volume_mounts
            .iter()
            .flatten()
            .find(|v| v.name == *volume)
            .context("the Secret's mount")?;
        assert_eq!(mount.read_only, Some(true));
        let at = |file: &str| format!("{}/{file}", mount.mount_path);
        assert_eq!(flag(coordinator, "--ca"), Some(at("ca.pem").as_str()));
        assert_eq!(flag(coordinator, "--cert"), Some(at(&cert).as_str()));
        assert_eq!(flag(coordinator, "--key"), Some(at(&key).as_str()));
    }
    let distinct: std::collections::BTreeSet<&String> = secrets.iter().collect();
    assert_eq!(distinct.len(), 3, "{secrets:?}");
    Ok(())
}

fn proxy_pod(m: &Manifests) -> Result<&PodSpec> {
    let [proxy] = m.deployments.as_slice() else {
        bail!("one Deployment");
    };
    pod_spec(&proxy.spec.as_ref().context("spec")?.template)
}

#[test]
fn proxies_read_their_zone_from_the_node_through_the_init_container() -> Result<()> {
    let m = manifests()?;
    let pod = proxy_pod(&m)?;
    let [init] = pod.init_containers.as_deref().unwrap_or_default() else {
        bail!("one init container");
    };
    let proxy = container(pod, "proxy")?;
    let args = init.args.clone().unwrap_or_default();
    assert_eq!(args.first().map(String::as_str), Some("node-zone"));
    assert_eq!(init.image, proxy.image, "one switchyard image");
    // The node is the pod's own, from the downward API.
    let node = init
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "SWITCHYARD_NODE")
        .and_then(|e| e.value_from.as_ref()?.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    assert_eq!(node, Some("spec.nodeName"));
    // What it writes is what the proxy reads, through one emptyDir both mount.
    let out = flag(init, "--out").context("--out")?;
    assert_eq!(flag(proxy, "--zone-file"), Some(out));
    let dir = Path::new(out).parent().context("a directory")?;
    let volume_at = |c: &Container| {
        c.volume_mounts
            .iter()
            .flatten()
            .find(|v| Path::new(&v.mount_path) == dir)
            .map(|v| v.name.clone())
    };
    let volume = volume_at(init).context("the init container's mount")?;
    assert_eq!(volume_at(proxy).as_ref(), Some(&volume));
    let shared = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == volume)
        .context("the zone volume")?;
    assert!(shared.empty_dir.is_some(), "{shared:?}");
    // No zone from anywhere else: neither --zone nor the pod-label variable
    // that the PodTopologyLabels admission plugin would have to fill.
    assert_eq!(flag(proxy, "--zone"), None);
    let env_zone = proxy
        .env
        .iter()
        .flatten()
        .any(|e| e.name == "SWITCHYARD_ZONE");
    assert!(!env_zone, "SWITCHYARD_ZONE set on the proxy");
    // Proxies spread over zones too (per-zone readiness counts by zone).
    assert_eq!(spread(pod, ZONE)?.max_skew, 1);
    Ok(())
}

#[test]
fn proxies_stay_in_the_load_balancer_until_it_lets_them_go() -> Result<()> {
    let m = manifests()?;
    let pod = proxy_pod(&m)?;
    let proxy = container(pod, "proxy")?;
    let pre_stop = proxy
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .and_then(|h| h.sleep.as_ref())
        .context("a preStop sleep on the proxy")?;
    // Long enough for a load balancer's health checks (a few failed
    // checks some seconds apart) to take the node out.
    assert!(pre_stop.seconds >= 10, "preStop {} s", pre_stop.seconds);
    assert!(
        proxy.readiness_probe.is_some(),
        "leaves the endpoints when not ready"
    );
    let drain = parse_duration(flag(proxy, "--drain-timeout").context("--drain-timeout")?)
        .map_err(anyhow::Error::msg)?;
    let grace = Duration::from_secs(
        pod.termination_grace_period_seconds
            .context("terminationGracePeriodSeconds")?
            .try_into()?,
    );
    let pre_stop = Duration::from_secs(pre_stop.seconds.try_into()?);
    assert!(
        grace > pre_stop + drain,
        "grace {grace:?} must exceed preStop {pre_stop:?} plus drain {drain:?}"
    );

    // The Service keeps client IPs and serves the Gateway's port.
    let service = m.service("switchyard-proxy")?;
    let spec = service.spec.as_ref().context("spec")?;
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    assert_eq!(spec.external_traffic_policy.as_deref(), Some("Local"));
    let [port] = spec.ports.as_deref().unwrap_or_default() else {
        bail!("one Service port");
    };
    let gateway_port = m.gateways[0].spec.listeners[0].port;
    assert_eq!(port.port, gateway_port);
    let Some(IntOrString::String(target)) = &port.target_port else {
        bail!("a named targetPort");
    };
    let container_port = proxy
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some(target))
        .context("the targetPort on the proxy")?
        .container_port;
    let listener = flag(proxy, "--listener").context("--listener")?;
    assert!(
        listener.starts_with(&format!("{gateway_port}="))
            && listener.ends_with(&format!(":{container_port}")),
        "{listener}"
    );
    Ok(())
}

#[test]
fn proxies_know_every_coordinator_and_the_class_is_ours() -> Result<()> {
    let m = manifests()?;
    let proxy = container(proxy_pod(&m)?, "proxy")?;
    let addresses: Vec<String> = peers(&m)?.into_iter().map(|(_, a)| a).collect();
    assert_eq!(
        flag(proxy, "--coordinators"),
        Some(addresses.join(",").as_str())
    );
    assert_eq!(m.classes[0].spec.controller_name, CONTROLLER_NAME);
    assert_eq!(
        m.gateways[0].spec.gateway_class_name,
        m.classes[0].metadata.name.clone().unwrap_or_default()
    );
    Ok(())
}

#[test]
fn gateway_addresses_come_from_the_proxies_load_balancer_service() -> Result<()> {
    // Without --kubernetes-proxy-service every Gateway would stay
    // Programmed=False/AddressNotAssigned: it must name the proxies'
    // LoadBalancer Service in the in-cluster source.
    let m = manifests()?;
    for sts in m.coordinators() {
        let coordinator = container(coordinator_pod(sts)?, "coordinator")?;
        assert_eq!(flag(coordinator, "--kubernetes"), Some("in-cluster"));
        let named = flag(coordinator, "--kubernetes-proxy-service")
            .context("--kubernetes-proxy-service")?;
        let (cluster, rest) = named.split_once('/').context("CLUSTER/NAMESPACE/NAME")?;
        let (namespace, name) = rest.split_once('/').context("NAMESPACE/NAME")?;
        assert_eq!(cluster, "local", "in-cluster's id");
        let service = m.service(name)?;
        assert_eq!(service.metadata.namespace.as_deref(), Some(namespace));
        let spec = service.spec.as_ref().context("spec")?;
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"), "{name}");
    }
    Ok(())
}

/// `value` as JSON text with member `id`'s own names put back to `N`, and
/// `peers` (the `--peers` value, the same for all and checked elsewhere)
/// to `PEERS`.
fn as_member_n(value: &impl serde::Serialize, id: &str, peers: &str) -> Result<String> {
    Ok(serde_json::to_string(value)?
        .replace(&format!("--peers={peers}"), "--peers=PEERS")
        .replace(&format!("coordinator-{id}"), "coordinator-N")
        .replace(&format!("--id={id}"), "--id=N")
        .replace(
            &format!("\"switchyard.io/coordinator-id\":\"{id}\""),
            "\"switchyard.io/coordinator-id\":\"N\"",
        ))
}

#[test]
fn the_three_coordinators_differ_only_in_their_id() -> Result<()> {
    let m = manifests()?;
    let mut shapes = Vec::new();
    for sts in m.coordinators() {
        let pod = coordinator_pod(sts)?;
        let coordinator = container(pod, "coordinator")?;
        let id = flag(coordinator, "--id").context("--id")?;
        let peers = flag(coordinator, "--peers").context("--peers")?;
        let service_name = sts.spec.as_ref().and_then(|s| s.service_name.clone());
        let service = m.service(&service_name.context("serviceName")?)?;
        shapes.push((
            id.to_string(),
            as_member_n(sts, id, peers)?,
            as_member_n(service, id, peers)?,
        ));
    }
    let (first_id, sts, service) = shapes.first().context("no coordinator")?;
    assert!(sts.contains("coordinator-N-tls"), "{sts}");
    for (id, other_sts, other_service) in &shapes[1..] {
        assert_eq!(
            other_sts, sts,
            "StatefulSets of members {first_id} and {id}"
        );
        assert_eq!(
            other_service, service,
            "Services of members {first_id} and {id}"
        );
    }
    Ok(())
}
