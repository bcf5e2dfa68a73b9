//! The Pod Security Standards "restricted" profile, as of its v1.30 rules
//! (which contain every "baseline" rule), checked on a typed pod template.
//!
//! One function per rule of the profile, each named after it and
//! reporting which object and which container breaks it; [`check`] runs
//! them all. Containers are the pod's containers, init containers and
//! ephemeral containers. Windows-only relaxations and the user-namespace
//! (`hostUsers: false`) relaxations are not modelled: a pod passing here
//! passes without them.
//!
//! Not here: which manifests are checked (`deploy_pod_security.rs`), or
//! anything outside the profile (resource limits, read-only root
//! filesystems are good practice but not rules of it).

use k8s_openapi::api::core::v1::{ContainerPort, PodSecurityContext, SecurityContext};
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use std::collections::BTreeMap;
use std::fmt;

#[cfg(test)]
mod tests;

/// One control of the profile (the names are the standard's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    HostProcess,
    HostNamespaces,
    Privileged,
    Capabilities,
    HostPathVolumes,
    HostPorts,
    AppArmor,
    SeLinux,
    ProcMount,
    Seccomp,
    Sysctls,
    VolumeTypes,
    PrivilegeEscalation,
    RunAsNonRoot,
    RunAsUser,
}

impl Rule {
    /// Every rule, in the standard's order.
    pub const ALL: [Rule; 15] = [
        Rule::HostProcess,
        Rule::HostNamespaces,
        Rule::Privileged,
        Rule::Capabilities,
        Rule::HostPathVolumes,
        Rule::HostPorts,
        Rule::AppArmor,
        Rule::SeLinux,
        Rule::ProcMount,
        Rule::Seccomp,
        Rule::Sysctls,
        Rule::VolumeTypes,
        Rule::PrivilegeEscalation,
        Rule::RunAsNonRoot,
        Rule::RunAsUser,
    ];
}

/// One rule broken by one object (and one of its containers, when the
/// rule is about a container).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: Rule,
    /// `Kind namespace/name` of the object holding the template.
    pub object: String,
    /// The container's name; `None` for pod-level fields.
    pub container: Option<String>,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.object)?;
        if let Some(container) = &self.container {
            write!(f, " container {container}")?;
        }
        write!(f, ": {:?}: {}", self.rule, self.detail)
    }
}

/// A container of any of the three lists, as the rules see it.
struct Container<'a> {
    name: &'a str,
    security: Option<&'a SecurityContext>,
    ports: &'a [ContainerPort],
}

/// Where violations of one template go.
struct Report<'a> {
    object: &'a str,
    found: Vec<Violation>,
}

impl Report<'_> {
    fn add(&mut self, rule: Rule, container: Option<&str>, detail: impl Into<String>) {
        self.found.push(Violation {
            rule,
            object: self.object.to_string(),
            container: container.map(str::to_string),
            detail: detail.into(),
        });
    }
}

/// Every violation of the restricted profile in `template`; empty when it
/// passes. `object` names the template's owner in the violations.
pub fn check(object: &str, template: &PodTemplateSpec) -> Vec<Violation> {
    let mut report = Report {
        object,
        found: Vec::new(),
    };
    let default_spec = PodSpec::default();
    let spec = template.spec.as_ref().unwrap_or(&default_spec);
    let default_pod = PodSecurityContext::default();
    let pod = spec.security_context.as_ref().unwrap_or(&default_pod);
    let mut containers: Vec<Container> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| Container {
            name: &c.name,
            security: c.security_context.as_ref(),
            ports: c.ports.as_deref().unwrap_or_default(),
        })
        .collect();
    containers.extend(
        spec.ephemeral_containers
            .iter()
            .flatten()
            .map(|c| Container {
                name: &c.name,
                security: c.security_context.as_ref(),
                ports: c.ports.as_deref().unwrap_or_default(),
            }),
    );
    let annotations = template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref());

    host_process(&mut report, pod, &containers);
    host_namespaces(&mut report, spec);
    privileged(&mut report, &containers);
    capabilities(&mut report, &containers);
    host_path_volumes(&mut report, spec);
    host_ports(&mut report, &containers);
    app_armor(&mut report, pod, &containers, annotations);
    se_linux(&mut report, pod, &containers);
    proc_mount(&mut report, &containers);
    seccomp(&mut report, pod, &containers);
    sysctls(&mut report, pod);
    volume_types(&mut report, spec);
    privilege_escalation(&mut report, &containers);
    run_as_non_root(&mut report, pod, &containers);
    run_as_user(&mut report, pod, &containers);
    report.found
}

/// Windows HostProcess containers have the host's privileges.
fn host_process(report: &mut Report, pod: &PodSecurityContext, containers: &[Container]) {
    let on = |w: Option<&k8s_openapi::api::core::v1::WindowsSecurityContextOptions>| {
        w.and_then(|w| w.host_process) == Some(true)
    };
    if on(pod.windows_options.as_ref()) {
        report.add(
            Rule::HostProcess,
            None,
            "windowsOptions.hostProcess is true",
        );
    }
    for c in containers {
        if on(c.security.and_then(|s| s.windows_options.as_ref())) {
            let detail = "windowsOptions.hostProcess is true";
            report.add(Rule::HostProcess, Some(c.name), detail);
        }
    }
}

fn host_namespaces(report: &mut Report, spec: &PodSpec) {
    for (field, value) in [
        ("hostNetwork", spec.host_network),
        ("hostPID", spec.host_pid),
        ("hostIPC", spec.host_ipc),
    ] {
        if value == Some(true) {
            report.add(Rule::HostNamespaces, None, format!("{field} is true"));
        }
    }
}

fn privileged(report: &mut Report, containers: &[Container]) {
    for c in containers {
        if c.security.and_then(|s| s.privileged) == Some(true) {
            report.add(Rule::Privileged, Some(c.name), "privileged is true");
        }
    }
}

/// Restricted: drop `ALL`, add nothing but `NET_BIND_SERVICE` (stricter
/// than baseline's list of addable capabilities, so it covers it).
fn capabilities(report: &mut Report, containers: &[Container]) {
    for c in containers {
        let caps = c.security.and_then(|s| s.capabilities.as_ref());
        let drop = caps.and_then(|c| c.drop.as_deref()).unwrap_or_default();
        if !drop.iter().any(|d| d == "ALL") {
            let detail = format!("capabilities.drop {drop:?} lacks ALL");
            report.add(Rule::Capabilities, Some(c.name), detail);
        }
        let add = caps.and_then(|c| c.add.as_deref()).unwrap_or_default();
        for added in add.iter().filter(|a| *a != "NET_BIND_SERVICE") {
            let detail =
                format!("capabilities.add has {added} (only NET_BIND_SERVICE may be added)");
            report.add(Rule::Capabilities, Some(c.name), detail);
        }
    }
}

fn host_path_volumes(report: &mut Report, spec: &PodSpec) {
    for v in spec.volumes.iter().flatten() {
        if v.host_path.is_some() {
            report.add(
                Rule::HostPathVolumes,
                None,
                format!("volume {} is a hostPath", v.name),
            );
        }
    }
}

fn host_ports(report: &mut Report, containers: &[Container]) {
    for c in containers {
        for port in c.ports {
            if let Some(host) = port.host_port.filter(|p| *p != 0) {
                let detail = format!("port {} has hostPort {host}", port.container_port);
                report.add(Rule::HostPorts, Some(c.name), detail);
            }
        }
    }
}

/// Profiles unset, `RuntimeDefault` or `Localhost`; the same for the
/// beta annotations (`runtime/default`, `localhost/...`).
fn app_armor(
    report: &mut Report,
    pod: &PodSecurityContext,
    containers: &[Container],
    annotations: Option<&BTreeMap<String, String>>,
) {
    let allowed = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    if let Some(p) = pod
        .app_armor_profile
        .as_ref()
        .filter(|p| !allowed(&p.type_))
    {
        report.add(
            Rule::AppArmor,
            None,
            format!("appArmorProfile.type is {}", p.type_),
        );
    }
    for c in containers {
        let profile = c.security.and_then(|s| s.app_armor_profile.as_ref());
        if let Some(p) = profile.filter(|p| !allowed(&p.type_)) {
            let detail = format!("appArmorProfile.type is {}", p.type_);
            report.add(Rule::AppArmor, Some(c.name), detail);
        }
    }
    let prefix = "container.apparmor.security.beta.kubernetes.io/";
    for (key, value) in annotations.into_iter().flatten() {
        let Some(container) = key.strip_prefix(prefix) else {
            continue;
        };
        if !(value.is_empty() || value == "runtime/default" || value.starts_with("localhost/")) {
            let detail = format!("annotation {key} is {value}");
            report.add(Rule::AppArmor, Some(container), detail);
        }
    }
}

/// SELinux: no custom user or role; a type only of the container types.
fn se_linux(report: &mut Report, pod: &PodSecurityContext, containers: &[Container]) {
    let types = ["container_t", "container_init_t", "container_kvm_t"];
    let mut one = |options: Option<&k8s_openapi::api::core::v1::SELinuxOptions>,
                   container: Option<&str>| {
        let Some(o) = options else { return };
        let set = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.is_empty());
        if set(&o.type_) && !types.contains(&o.type_.as_deref().unwrap_or_default()) {
            let detail = format!("seLinuxOptions.type is {:?}", o.type_);
            report.add(Rule::SeLinux, container, detail);
        }
        for (field, value) in [("user", &o.user), ("role", &o.role)] {
            if set(value) {
                let detail = format!("seLinuxOptions.{field} is {value:?}");
                report.add(Rule::SeLinux, container, detail);
            }
        }
    };
    one(pod.se_linux_options.as_ref(), None);
    for c in containers {
        one(
            c.security.and_then(|s| s.se_linux_options.as_ref()),
            Some(c.name),
        );
    }
}

fn proc_mount(report: &mut Report, containers: &[Container]) {
    for c in containers {
        let mount = c.security.and_then(|s| s.proc_mount.as_deref());
        if let Some(mount) = mount.filter(|m| *m != "Default") {
            report.add(
                Rule::ProcMount,
                Some(c.name),
                format!("procMount is {mount}"),
            );
        }
    }
}

/// `RuntimeDefault` or `Localhost`, set on the pod or on every container;
/// `Unconfined` nowhere.
fn seccomp(report: &mut Report, pod: &PodSecurityContext, containers: &[Container]) {
    let allowed = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    let pod_profile = pod.seccomp_profile.as_ref();
    if let Some(p) = pod_profile.filter(|p| !allowed(&p.type_)) {
        report.add(
            Rule::Seccomp,
            None,
            format!("seccompProfile.type is {}", p.type_),
        );
    }
    for c in containers {
        match c.security.and_then(|s| s.seccomp_profile.as_ref()) {
            Some(p) if !allowed(&p.type_) => {
                let detail = format!("seccompProfile.type is {}", p.type_);
                report.add(Rule::Seccomp, Some(c.name), detail);
            }
            Some(_) => {}
            None if pod_profile.is_none() => {
                let detail = "no seccompProfile on the container or the pod";
                report.add(Rule::Seccomp, Some(c.name), detail);
            }
            None => {}
        }
    }
}

/// The sysctls the v1.30 baseline counts as safe (namespaced, isolated).
const SAFE_SYSCTLS: [&str; 10] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

fn sysctls(report: &mut Report, pod: &PodSecurityContext) {
    for s in pod.sysctls.iter().flatten() {
        if !SAFE_SYSCTLS.contains(&s.name.as_str()) {
            report.add(
                Rule::Sysctls,
                None,
                format!("sysctl {} is not a safe one", s.name),
            );
        }
    }
}

/// The volume sources restricted allows. Read from the encoded volume, so
/// a source this checker has never heard of is refused too.
const ALLOWED_VOLUMES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

fn volume_types(report: &mut Report, spec: &PodSpec) {
    for v in spec.volumes.iter().flatten() {
        let encoded = serde_json::to_value(v).unwrap_or_default();
        let sources = encoded.as_object().into_iter().flatten().map(|(k, _)| k);
        for source in sources.filter(|k| *k != "name") {
            if !ALLOWED_VOLUMES.contains(&source.as_str()) {
                let detail = format!("volume {} is of type {source}", v.name);
                report.add(Rule::VolumeTypes, None, detail);
            }
        }
    }
}

fn privilege_escalation(report: &mut Report, containers: &[Container]) {
    for c in containers {
        let value = c.security.and_then(|s| s.allow_privilege_escalation);
        if value != Some(false) {
            let detail = format!("allowPrivilegeEscalation is {value:?}, not false");
            report.add(Rule::PrivilegeEscalation, Some(c.name), detail);
        }
    }
}

/// `runAsNonRoot: true` on the pod or on every container; `false` nowhere.
fn run_as_non_root(report: &mut Report, pod: &PodSecurityContext, containers: &[Container]) {
    if pod.run_as_non_root == Some(false) {
        report.add(Rule::RunAsNonRoot, None, "runAsNonRoot is false");
    }
    for c in containers {
        match c.security.and_then(|s| s.run_as_non_root) {
            Some(false) => report.add(Rule::RunAsNonRoot, Some(c.name), "runAsNonRoot is false"),
            None if pod.run_as_non_root != Some(true) => {
                let detail = "runAsNonRoot is set neither on the container nor on the pod";
                report.add(Rule::RunAsNonRoot, Some(c.name), detail);
            }
            _ => {}
        }
    }
}

fn run_as_user(report: &mut Report, pod: &PodSecurityContext, containers: &[Container]) {
    if pod.run_as_user == Some(0) {
        report.add(Rule::RunAsUser, None, "runAsUser is 0 (root)");
    }
    for c in containers {
        if c.security.and_then(|s| s.run_as_user) == Some(0) {
            report.add(Rule::RunAsUser, Some(c.name), "runAsUser is 0 (root)");
        }
    }
}
