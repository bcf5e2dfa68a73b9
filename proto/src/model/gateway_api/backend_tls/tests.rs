//! The backend TLS rule on small configurations: which policy applies to
//! which port, who wins a conflict, and the reason of each refusal.

use super::*;
use crate::model::backend_tls::{BackendTlsValidation, ConfigMap, LocalObjectRef, PolicyTargetRef};
use crate::model::meta::ObjectMeta;
use crate::model::snapshot::ConfigSnapshot;

fn ca_pem() -> String {
    rcgen::generate_simple_self_signed(vec!["ca.test".to_string()])
        .expect("rcgen")
        .cert
        .pem()
}

fn service(ports: &[(&str, u16)]) -> Service {
    Service {
        meta: ObjectMeta::named("shop", "api"),
        ports: ports
            .iter()
            .map(|(name, port)| ServicePort {
                name: Some(name.to_string()),
                port: *port,
                target_port: None,
                app_protocol: None,
            })
            .collect(),
    }
}

fn config_map(name: &str, ca: Option<String>) -> ConfigMap {
    ConfigMap {
        meta: ObjectMeta::named("shop", name),
        ca_certificate: ca,
    }
}

fn policy(name: &str, created_ms: i64, section: Option<&str>, ca: &str) -> BackendTlsPolicy {
    let mut meta = ObjectMeta::named("shop", name);
    meta.creation_timestamp_ms = Some(created_ms);
    BackendTlsPolicy {
        meta,
        target_refs: vec![PolicyTargetRef {
            group: String::new(),
            kind: "Service".into(),
            name: "api".into(),
            section_name: section.map(Into::into),
        }],
        validation: BackendTlsValidation {
            ca_certificate_refs: vec![LocalObjectRef {
                group: String::new(),
                kind: "ConfigMap".into(),
                name: ca.into(),
            }],
            well_known_ca_certificates: None,
            hostname: "api.shop.test".into(),
            subject_alt_names: vec![],
        },
    }
}

fn snapshot(policies: Vec<BackendTlsPolicy>, maps: Vec<ConfigMap>) -> ConfigSnapshot {
    ConfigSnapshot {
        services: vec![service(&[("https", 443), ("admin", 8443)])],
        backend_tls_policies: policies,
        config_maps: maps,
        ..Default::default()
    }
}

fn transport(s: &ConfigSnapshot, port: u16) -> BackendTransport {
    let t = Topology::of_snapshot(s);
    let svc = &s.services[0];
    let p = svc.ports.iter().find(|p| p.port == port).expect("port");
    t.backend_transport(svc, p)
}

fn conditions(s: &ConfigSnapshot, name: &str) -> BackendTlsPolicyConditions {
    Topology::of_snapshot(s)
        .backend_tls_policy_conditions(&ObjectName::new("shop", name))
        .expect("policy known")
}

#[test]
fn a_port_without_a_policy_is_plaintext() {
    let s = snapshot(vec![], vec![]);
    assert_eq!(transport(&s, 443), BackendTransport::Plaintext);
}

#[test]
fn a_policy_with_a_valid_ca_gives_tls_with_its_hostname_and_authorities() {
    let s = snapshot(
        vec![policy("tls", 1, None, "ca")],
        vec![config_map("ca", Some(ca_pem()))],
    );
    let BackendTransport::Tls(tls) = transport(&s, 443) else {
        panic!("expected TLS, got {:?}", transport(&s, 443));
    };
    assert_eq!(tls.server_name, "api.shop.test");
    assert_eq!(tls.verify_names, vec!["api.shop.test".to_string()]);
    assert!(matches!(&tls.trust, Trust::Authorities(a) if a.len() == 1));
    // Both ports: the policy names the whole Service.
    assert!(matches!(transport(&s, 8443), BackendTransport::Tls(_)));
    let c = conditions(&s, "tls");
    assert_eq!(c.accepted, Ok(()));
    assert_eq!(c.resolved_refs, Ok(()));
}

#[test]
fn a_policy_naming_a_port_applies_to_that_port_and_wins_over_the_whole_service() {
    let mut by_port = policy("by-port", 5, Some("admin"), "ca");
    by_port.validation.hostname = "admin.shop.test".into();
    let s = snapshot(
        vec![policy("whole", 1, None, "ca"), by_port],
        vec![config_map("ca", Some(ca_pem()))],
    );
    let name = |port| match transport(&s, port) {
        BackendTransport::Tls(t) => t.server_name.clone(),
        other => panic!("expected TLS, got {other:?}"),
    };
    assert_eq!(name(8443), "admin.shop.test");
    assert_eq!(name(443), "api.shop.test");
    // Different targets: neither conflicts.
    assert_eq!(conditions(&s, "whole").accepted, Ok(()));
    assert_eq!(conditions(&s, "by-port").accepted, Ok(()));
}

#[test]
fn of_two_policies_on_one_target_the_older_wins_and_the_other_is_conflicted() {
    let mut newer = policy("aaa-newer", 20, None, "ca");
    newer.validation.hostname = "newer.shop.test".into();
    let s = snapshot(
        vec![newer, policy("zzz-older", 10, None, "ca")],
        vec![config_map("ca", Some(ca_pem()))],
    );
    match transport(&s, 443) {
        BackendTransport::Tls(t) => assert_eq!(t.policy, ObjectName::new("shop", "zzz-older")),
        other => panic!("expected TLS, got {other:?}"),
    }
    let c = conditions(&s, "aaa-newer");
    let (reason, message) = c.accepted.expect_err("conflicted");
    assert_eq!(reason, "Conflicted");
    assert!(message.contains("shop/zzz-older"), "{message}");
    assert_eq!(conditions(&s, "zzz-older").accepted, Ok(()));
}

#[test]
fn a_missing_or_empty_ca_config_map_refuses_the_port_never_plaintext() {
    for maps in [
        vec![],
        vec![config_map("ca", None)],
        vec![config_map("ca", Some("not pem at all".into()))],
    ] {
        let s = snapshot(vec![policy("tls", 1, None, "ca")], maps.clone());
        match transport(&s, 443) {
            BackendTransport::Refused(why) => assert!(why.contains("shop/tls"), "{why}"),
            other => panic!("{maps:?}: expected a refusal, got {other:?}"),
        }
        let c = conditions(&s, "tls");
        assert_eq!(
            c.resolved_refs.as_ref().map_err(|e| e.0),
            Err("InvalidCACertificateRef"),
            "{maps:?}"
        );
        assert_eq!(
            c.accepted.as_ref().map_err(|e| e.0),
            Err("NoValidCACertificate")
        );
    }
}

#[test]
fn a_ca_reference_of_another_kind_is_invalid_kind() {
    let mut p = policy("tls", 1, None, "ca");
    p.validation.ca_certificate_refs[0].kind = "Secret".into();
    let s = snapshot(vec![p], vec![config_map("ca", Some(ca_pem()))]);
    assert!(matches!(transport(&s, 443), BackendTransport::Refused(_)));
    let (reason, message) = conditions(&s, "tls").resolved_refs.expect_err("invalid");
    assert_eq!(reason, "InvalidKind");
    assert!(message.contains("core/Secret"), "{message}");
}

#[test]
fn subject_alt_names_replace_the_hostname_for_verification() {
    let mut p = policy("tls", 1, None, "ca");
    p.validation.subject_alt_names = vec![
        SubjectAltName::Hostname("a.shop.test".into()),
        SubjectAltName::Uri("spiffe://shop/api".into()),
    ];
    let s = snapshot(vec![p], vec![config_map("ca", Some(ca_pem()))]);
    match transport(&s, 443) {
        BackendTransport::Tls(t) => {
            assert_eq!(t.server_name, "api.shop.test");
            assert_eq!(t.verify_names, vec!["a.shop.test"]);
            assert_eq!(t.verify_uris, vec!["spiffe://shop/api"]);
        }
        other => panic!("expected TLS, got {other:?}"),
    }
    assert_eq!(conditions(&s, "tls").accepted, Ok(()));
}

#[test]
fn well_known_system_trust_is_accepted_without_references() {
    let mut p = policy("tls", 1, None, "ca");
    p.validation.ca_certificate_refs.clear();
    p.validation.well_known_ca_certificates = Some(WELL_KNOWN_SYSTEM.into());
    let s = snapshot(vec![p], vec![]);
    match transport(&s, 443) {
        BackendTransport::Tls(t) => assert_eq!(t.trust, Trust::System),
        other => panic!("expected TLS, got {other:?}"),
    }
}

#[test]
fn a_policy_of_another_namespace_does_not_apply() {
    let mut p = policy("tls", 1, None, "ca");
    p.meta.namespace = "elsewhere".into();
    let s = snapshot(vec![p], vec![config_map("ca", Some(ca_pem()))]);
    assert_eq!(transport(&s, 443), BackendTransport::Plaintext);
}

#[test]
fn an_https_port_without_a_policy_is_refused_not_spoken_to_in_plaintext() {
    let mut s = snapshot(vec![], vec![]);
    s.services[0].ports[0].app_protocol = Some("HTTPS".into());
    match transport(&s, 443) {
        BackendTransport::Refused(why) => assert!(why.contains("BackendTLSPolicy"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // The other port says nothing: plaintext.
    assert_eq!(transport(&s, 8443), BackendTransport::Plaintext);
    // With a policy covering it, TLS.
    s.backend_tls_policies.push(policy("tls", 1, None, "ca"));
    s.config_maps.push(config_map("ca", Some(ca_pem())));
    assert!(matches!(transport(&s, 443), BackendTransport::Tls(_)));
}
