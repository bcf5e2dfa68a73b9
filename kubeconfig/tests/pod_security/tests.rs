//! The checker can fail: a compliant template passes, the values the
//! profile allows pass, and one change per way of breaking a rule makes it
//! report exactly that rule on exactly the object and containers concerned.
//! Every rule is broken by at least one case.

use super::{Rule, check};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Value, json};
use std::collections::BTreeSet;

const OBJECT: &str = "Deployment test/pod";

fn restricted_container(name: &str) -> Value {
    json!({"name": name, "image": "registry.example.com/app:1.0",
           "ports": [{"containerPort": 8080}],
           "securityContext": {"allowPrivilegeEscalation": false,
                               "capabilities": {"drop": ["ALL"]}}})
}

/// A template passing every rule: an init container `init` and a
/// container `main`.
fn compliant() -> Value {
    json!({
        "metadata": {"labels": {"app": "test"}},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "initContainers": [restricted_container("init")],
            "containers": [restricted_container("main")],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        }
    })
}

/// Sets the value at a JSON pointer, creating objects on the way (`~1`
/// stands for `/` in a key, as in JSON Pointer).
fn set(root: &mut Value, pointer: &str, value: Value) {
    let mut at = root;
    for raw in pointer.trim_start_matches('/').split('/') {
        let key = raw.replace("~1", "/").replace("~0", "~");
        at = match at {
            Value::Array(items) => &mut items[key.parse::<usize>().expect("an index")],
            other => {
                if !other.is_object() {
                    *other = json!({});
                }
                other
                    .as_object_mut()
                    .expect("an object")
                    .entry(key)
                    .or_insert(Value::Null)
            }
        };
    }
    *at = value;
}

/// `(rule, container)` of every violation of `template`.
fn broken(template: &Value) -> BTreeSet<(Rule, Option<String>)> {
    let typed: PodTemplateSpec = serde_json::from_value(template.clone()).expect("a template");
    check(OBJECT, &typed)
        .into_iter()
        .inspect(|v| assert_eq!(v.object, OBJECT, "{v}"))
        .map(|v| (v.rule, v.container))
        .collect()
}

/// A JSON pointer, the value set there, and the `(rule, container)`
/// violations that must follow.
type Case = (String, Value, &'static [(Rule, Option<&'static str>)]);

/// One change each (pointer, value) and what it must break.
fn cases() -> Vec<Case> {
    use Rule::*;
    let main = "/spec/containers/0/securityContext";
    let init = "/spec/initContainers/0/securityContext";
    let pod = "/spec/securityContext";
    let mut out: Vec<Case> = Vec::new();
    let mut add = |(p, v): (String, Value), want: &'static [(Rule, Option<&'static str>)]| {
        out.push((p, v, want))
    };
    let at = |p: &str, v: Value| (p.to_string(), v);
    add(
        at(&format!("{pod}/windowsOptions/hostProcess"), json!(true)),
        &[(HostProcess, None)],
    );
    add(
        at(&format!("{main}/windowsOptions/hostProcess"), json!(true)),
        &[(HostProcess, Some("main"))],
    );
    add(
        at("/spec/hostNetwork", json!(true)),
        &[(HostNamespaces, None)],
    );
    add(at("/spec/hostPID", json!(true)), &[(HostNamespaces, None)]);
    add(at("/spec/hostIPC", json!(true)), &[(HostNamespaces, None)]);
    add(
        at(&format!("{init}/privileged"), json!(true)),
        &[(Privileged, Some("init"))],
    );
    add(
        at(&format!("{main}/capabilities/drop"), json!(["NET_RAW"])),
        &[(Capabilities, Some("main"))],
    );
    add(
        at(&format!("{main}/capabilities/add"), json!(["NET_ADMIN"])),
        &[(Capabilities, Some("main"))],
    );
    add(
        at(&format!("{init}/capabilities"), Value::Null),
        &[(Capabilities, Some("init"))],
    );
    add(
        at(
            "/spec/volumes/0",
            json!({"name": "host", "hostPath": {"path": "/"}}),
        ),
        &[(HostPathVolumes, None), (VolumeTypes, None)],
    );
    add(
        at("/spec/containers/0/ports/0/hostPort", json!(8080)),
        &[(HostPorts, Some("main"))],
    );
    add(
        at(
            &format!("{pod}/appArmorProfile"),
            json!({"type": "Unconfined"}),
        ),
        &[(AppArmor, None)],
    );
    add(
        at(
            &format!("{main}/appArmorProfile"),
            json!({"type": "Unconfined"}),
        ),
        &[(AppArmor, Some("main"))],
    );
    add(
        at(
            "/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1init",
            json!("unconfined"),
        ),
        &[(AppArmor, Some("init"))],
    );
    add(
        at(&format!("{pod}/seLinuxOptions/type"), json!("spc_t")),
        &[(SeLinux, None)],
    );
    add(
        at(&format!("{main}/seLinuxOptions/user"), json!("root")),
        &[(SeLinux, Some("main"))],
    );
    add(
        at(&format!("{init}/seLinuxOptions/role"), json!("sysadm_r")),
        &[(SeLinux, Some("init"))],
    );
    add(
        at(&format!("{main}/procMount"), json!("Unmasked")),
        &[(ProcMount, Some("main"))],
    );
    add(
        at(
            &format!("{pod}/seccompProfile"),
            json!({"type": "Unconfined"}),
        ),
        &[(Seccomp, None)],
    );
    add(
        at(
            &format!("{main}/seccompProfile"),
            json!({"type": "Unconfined"}),
        ),
        &[(Seccomp, Some("main"))],
    );
    add(
        at(&format!("{pod}/seccompProfile"), Value::Null),
        &[(Seccomp, Some("init")), (Seccomp, Some("main"))],
    );
    add(
        at(
            &format!("{pod}/sysctls"),
            json!([{"name": "kernel.msgmax", "value": "65536"}]),
        ),
        &[(Sysctls, None)],
    );
    add(
        at(
            "/spec/volumes/0",
            json!({"name": "share", "nfs": {"server": "nfs", "path": "/"}}),
        ),
        &[(VolumeTypes, None)],
    );
    add(
        at(&format!("{main}/allowPrivilegeEscalation"), json!(true)),
        &[(PrivilegeEscalation, Some("main"))],
    );
    add(
        at(&format!("{init}/allowPrivilegeEscalation"), Value::Null),
        &[(PrivilegeEscalation, Some("init"))],
    );
    add(
        at(&format!("{main}/runAsNonRoot"), json!(false)),
        &[(RunAsNonRoot, Some("main"))],
    );
    add(
        at(&format!("{pod}/runAsNonRoot"), Value::Null),
        &[(RunAsNonRoot, Some("init")), (RunAsNonRoot, Some("main"))],
    );
    add(
        at(&format!("{pod}/runAsNonRoot"), json!(false)),
        &[
            (RunAsNonRoot, None),
            (RunAsNonRoot, Some("init")),
            (RunAsNonRoot, Some("main")),
        ],
    );
    add(
        at(&format!("{pod}/runAsUser"), json!(0)),
        &[(RunAsUser, None)],
    );
    add(
        at(&format!("{init}/runAsUser"), json!(0)),
        &[(RunAsUser, Some("init"))],
    );
    out
}

#[test]
fn a_compliant_template_passes() {
    assert_eq!(broken(&compliant()), BTreeSet::new());
}

#[test]
fn each_break_reports_exactly_its_rule_and_container() {
    for (pointer, value, want) in cases() {
        let mut template = compliant();
        set(&mut template, &pointer, value.clone());
        let want: BTreeSet<(Rule, Option<String>)> = want
            .iter()
            .map(|(r, c)| (*r, c.map(str::to_string)))
            .collect();
        assert_eq!(broken(&template), want, "{pointer} = {value}");
    }
}

#[test]
fn every_rule_can_fail() {
    let covered: BTreeSet<Rule> = cases()
        .iter()
        .flat_map(|(_, _, want)| want.iter().map(|(r, _)| *r))
        .collect();
    assert_eq!(covered, Rule::ALL.into_iter().collect());
}

#[test]
fn what_the_profile_allows_passes() {
    let main = "/spec/containers/0/securityContext";
    let allowed: Vec<(String, Value)> = vec![
        (
            format!("{main}/capabilities/add"),
            json!(["NET_BIND_SERVICE"]),
        ),
        ("/spec/containers/0/ports/0/hostPort".into(), json!(0)),
        (format!("{main}/procMount"), json!("Default")),
        (format!("{main}/privileged"), json!(false)),
        ("/spec/hostNetwork".into(), json!(false)),
        (
            format!("{main}/seccompProfile"),
            json!({"type": "Localhost", "localhostProfile": "p.json"}),
        ),
        (
            format!("{main}/appArmorProfile"),
            json!({"type": "RuntimeDefault"}),
        ),
        (
            "/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1main".into(),
            json!("localhost/profile"),
        ),
        (
            "/spec/securityContext/seLinuxOptions".into(),
            json!({"type": "container_init_t", "level": "s0:c1,c2"}),
        ),
        (
            "/spec/securityContext/sysctls".into(),
            json!([{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]),
        ),
        (
            "/spec/volumes/0".into(),
            json!({"name": "token", "projected": {"sources": []}}),
        ),
    ];
    for (pointer, value) in allowed {
        let mut template = compliant();
        set(&mut template, &pointer, value.clone());
        assert_eq!(broken(&template), BTreeSet::new(), "{pointer} = {value}");
    }

    // Seccomp and runAsNonRoot on every container instead of the pod.
    let mut template = compliant();
    set(&mut template, "/spec/securityContext", json!({}));
    for c in ["containers", "initContainers"] {
        let at = format!("/spec/{c}/0/securityContext");
        set(&mut template, &format!("{at}/runAsNonRoot"), json!(true));
        set(
            &mut template,
            &format!("{at}/seccompProfile"),
            json!({"type": "RuntimeDefault"}),
        );
    }
    assert_eq!(broken(&template), BTreeSet::new());
}

#[test]
fn violations_say_where_and_why() {
    let mut template = compliant();
    set(
        &mut template,
        "/spec/containers/0/securityContext/capabilities/add",
        json!(["SYS_ADMIN"]),
    );
    let typed: PodTemplateSpec = serde_json::from_value(template).expect("a template");
    let found = check(OBJECT, &typed);
    let text: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "Deployment test/pod container main: Capabilities: capabilities.add has SYS_ADMIN \
          (only NET_BIND_SERVICE may be added)"
        ]
    );
}
