//! `BackendTLSPolicy` and `ConfigMap` into the model: the policy's targets
//! and validation as written, and of a ConfigMap only its `ca.crt` entry
//! (the authorities a policy's `caCertificateRefs` trusts); every other
//! entry is dropped here.
//!
//! Whether the certificates parse, a reference resolves or two policies
//! conflict is the policy's status (`gateway_api::backend_tls`), not a
//! reason to refuse the document; what the CRD's schema forbids (no
//! targets, both kinds of trust) is refused by the model's validation.

use crate::convert::object_meta;
use crate::error::Problem;
use gateway_api::apis::standard::backendtlspolicies::{
    BackendTlsPolicy as K8sBackendTlsPolicy, BackendTlsPolicyValidationSubjectAltNamesType,
};
use k8s_openapi::api::core::v1::ConfigMap as K8sConfigMap;
use switchyard_proto::model::{
    BackendTlsPolicy, BackendTlsValidation, CA_CERTIFICATE_KEY, ConfigMap, Kind, LocalObjectRef,
    PolicyTargetRef, Resource, SubjectAltName,
};

/// Translates a BackendTLSPolicy.
pub(crate) fn backend_tls_policy(o: K8sBackendTlsPolicy) -> Result<Resource, Problem> {
    let spec = o.spec;
    let target_refs = spec
        .target_refs
        .into_iter()
        .map(|t| PolicyTargetRef {
            group: t.group,
            kind: t.kind,
            name: t.name,
            section_name: t.section_name.filter(|s| !s.is_empty()),
        })
        .collect();
    let v = spec.validation;
    let ca_certificate_refs = v
        .ca_certificate_refs
        .unwrap_or_default()
        .into_iter()
        .map(|r| LocalObjectRef {
            group: r.group,
            kind: r.kind,
            name: r.name,
        })
        .collect();
    let subject_alt_names = v
        .subject_alt_names
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, san)| {
            let field = |name: &str| format!("spec.validation.subjectAltNames[{i}].{name}");
            match san.r#type {
                BackendTlsPolicyValidationSubjectAltNamesType::Hostname => san
                    .hostname
                    .filter(|h| !h.is_empty())
                    .map(SubjectAltName::Hostname)
                    .ok_or_else(|| Problem::missing(field("hostname"))),
                BackendTlsPolicyValidationSubjectAltNamesType::Uri => san
                    .uri
                    .filter(|u| !u.is_empty())
                    .map(SubjectAltName::Uri)
                    .ok_or_else(|| Problem::missing(field("uri"))),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(Resource::BackendTlsPolicy(BackendTlsPolicy {
        meta: object_meta(o.metadata, Kind::BackendTLSPolicy)?,
        target_refs,
        validation: BackendTlsValidation {
            ca_certificate_refs,
            well_known_ca_certificates: v.well_known_ca_certificates.filter(|w| !w.is_empty()),
            hostname: v.hostname,
            subject_alt_names,
        },
    }))
}

/// Translates a ConfigMap, keeping `data["ca.crt"]` (or the same key of
/// `binaryData` when it is UTF-8 text).
pub(crate) fn config_map(o: K8sConfigMap) -> Result<Resource, Problem> {
    let text = o
        .data
        .as_ref()
        .and_then(|d| d.get(CA_CERTIFICATE_KEY))
        .cloned();
    let binary = || {
        o.binary_data
            .as_ref()
            .and_then(|d| d.get(CA_CERTIFICATE_KEY))
            .map(|bytes| {
                String::from_utf8(bytes.0.clone()).map_err(|_| {
                    Problem::invalid(
                        format!("binaryData[{CA_CERTIFICATE_KEY}]"),
                        "must be PEM text (it decodes from base64 to bytes that are not UTF-8)",
                    )
                })
            })
            .transpose()
    };
    let ca_certificate = match text {
        Some(t) => Some(t),
        None => binary()?,
    };
    Ok(Resource::ConfigMap(ConfigMap {
        meta: object_meta(o.metadata, Kind::ConfigMap)?,
        ca_certificate,
    }))
}

#[cfg(test)]
mod tests {
    use crate::parse_documents;
    use switchyard_proto::model::{Resource, SubjectAltName};

    const POLICY: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: api-tls, namespace: shop}
spec:
  targetRefs:
  - {group: '', kind: Service, name: api, sectionName: https}
  validation:
    caCertificateRefs:
    - {group: '', kind: ConfigMap, name: api-ca}
    hostname: api.shop.test
    subjectAltNames:
    - {type: Hostname, hostname: api.internal}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: api-ca, namespace: shop}
data:
  ca.crt: |
    -----BEGIN CERTIFICATE-----
  other: dropped
";

    #[test]
    fn a_policy_and_its_config_map_are_read_as_written() {
        let docs = parse_documents("tls.yaml", POLICY).expect("parses");
        let Resource::BackendTlsPolicy(p) = &docs[0] else {
            panic!("{:?}", docs[0]);
        };
        assert_eq!(p.target_refs[0].name, "api");
        assert_eq!(p.target_refs[0].section_name.as_deref(), Some("https"));
        assert_eq!(p.validation.hostname, "api.shop.test");
        assert_eq!(p.validation.ca_certificate_refs[0].name, "api-ca");
        assert_eq!(
            p.validation.subject_alt_names,
            vec![SubjectAltName::Hostname("api.internal".into())]
        );
        let Resource::ConfigMap(m) = &docs[1] else {
            panic!("{:?}", docs[1]);
        };
        assert_eq!(
            m.ca_certificate.as_deref(),
            Some("-----BEGIN CERTIFICATE-----\n")
        );
    }

    #[test]
    fn a_policy_with_both_kinds_of_trust_is_refused_naming_the_field() {
        let yaml = POLICY.replace(
            "    hostname: api.shop.test",
            "    wellKnownCACertificates: System\n    hostname: api.shop.test",
        );
        let error = parse_documents("tls.yaml", &yaml)
            .expect_err("refused")
            .to_string();
        assert!(error.contains("shop/api-tls"), "{error}");
        assert!(error.contains("exclusive"), "{error}");
    }

    #[test]
    fn a_policy_with_an_ip_address_for_hostname_is_refused() {
        let yaml = POLICY.replace("hostname: api.shop.test", "hostname: 10.0.0.1");
        let error = parse_documents("tls.yaml", &yaml)
            .expect_err("refused")
            .to_string();
        assert!(error.contains("spec.validation.hostname"), "{error}");
    }

    #[test]
    fn a_hostname_san_without_its_hostname_is_refused() {
        let yaml = POLICY.replace(
            "{type: Hostname, hostname: api.internal}",
            "{type: Hostname}",
        );
        let error = parse_documents("tls.yaml", &yaml)
            .expect_err("refused")
            .to_string();
        assert!(error.contains("subjectAltNames[0].hostname"), "{error}");
    }
}
