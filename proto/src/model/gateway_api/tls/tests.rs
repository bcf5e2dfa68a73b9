//! The listener TLS rule on small configurations: which listeners are
//! served with which certificates, and the reason of each refusal.

use super::*;
use crate::model::CONTROLLER_NAME;
use crate::model::backend::{GrantFrom, GrantTo, ReferenceGrant};
use crate::model::gateway::{AllowedRoutes, GatewayClass, ListenerTls};
use crate::model::meta::ObjectMeta;
use crate::model::secret::PrivateKeyPem;
use crate::model::snapshot::ConfigSnapshot;

/// A self-signed certificate for `names` and its key, PEM.
fn self_signed(names: &[&str]) -> (String, String) {
    let names = names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let generated = rcgen::generate_simple_self_signed(names).expect("rcgen");
    (generated.cert.pem(), generated.signing_key.serialize_pem())
}

fn secret(ns: &str, name: &str, (chain, key): (String, String)) -> Secret {
    Secret {
        meta: ObjectMeta::named(ns, name),
        secret_type: TLS_SECRET_TYPE.into(),
        certificate_chain: chain,
        private_key: PrivateKeyPem(key),
    }
}

fn cert_ref(ns: Option<&str>, name: &str) -> CertificateRef {
    CertificateRef {
        group: String::new(),
        kind: "Secret".into(),
        name: name.into(),
        namespace: ns.map(Into::into),
    }
}

fn https(name: &str, refs: Vec<CertificateRef>) -> Listener {
    Listener {
        name: name.into(),
        port: 443,
        protocol: ListenerProtocol::Https,
        hostname: None,
        allowed_routes: AllowedRoutes::default(),
        tls: Some(ListenerTls {
            mode: TlsMode::Terminate,
            certificate_refs: refs,
        }),
    }
}

fn snapshot(
    listeners: Vec<Listener>,
    secrets: Vec<Secret>,
    grants: Vec<ReferenceGrant>,
) -> ConfigSnapshot {
    ConfigSnapshot {
        gateway_classes: vec![GatewayClass {
            meta: ObjectMeta::named("", "ours"),
            controller_name: CONTROLLER_NAME.into(),
        }],
        gateways: vec![Gateway {
            meta: ObjectMeta::named("infra", "gw"),
            gateway_class_name: "ours".into(),
            listeners,
        }],
        secrets,
        reference_grants: grants,
        ..Default::default()
    }
}

/// The resolution of listener `name` of the one Gateway.
fn resolve(s: &ConfigSnapshot, name: &str) -> ListenerTlsResolution {
    let t = Topology::of_snapshot(s);
    let g = &s.gateways[0];
    let l = g
        .listeners
        .iter()
        .find(|l| l.name == name)
        .expect("listener");
    t.listener_transport(g, l)
}

fn refusal(r: ListenerTlsResolution) -> (&'static str, String) {
    let problem = r.expect_err("not served");
    (problem.reason(), problem.to_string())
}

#[test]
fn an_https_listener_with_a_valid_secret_is_served_with_it() {
    let s = snapshot(
        vec![https("https", vec![cert_ref(None, "cert")])],
        vec![secret("infra", "cert", self_signed(&["a.example"]))],
        vec![],
    );
    match resolve(&s, "https").expect("served") {
        ListenerTransport::Tls(certs) => {
            assert_eq!(certs.len(), 1);
            assert_eq!(certs[0].secret, "infra/cert");
            assert_eq!(certs[0].key.cert.len(), 1);
        }
        ListenerTransport::Plaintext => panic!("an HTTPS listener served in plaintext"),
    }
}

#[test]
fn broken_references_say_invalid_certificate_ref() {
    let (chain, _) = self_signed(&["a.example"]);
    let (_, other_key) = self_signed(&["b.example"]);
    let mut opaque = secret("infra", "opaque", self_signed(&["a.example"]));
    opaque.secret_type = "Opaque".into();
    let mut not_secret = cert_ref(None, "cert");
    not_secret.kind = "ConfigMap".into();
    let s = snapshot(
        vec![
            https("missing", vec![cert_ref(None, "nope")]),
            https("kind", vec![not_secret]),
            https("opaque", vec![cert_ref(None, "opaque")]),
            https("mismatch", vec![cert_ref(None, "mismatch")]),
            https("garbage", vec![cert_ref(None, "garbage")]),
            https(
                "one-bad",
                vec![cert_ref(None, "cert"), cert_ref(None, "nope")],
            ),
            https("none", vec![]),
        ],
        vec![
            secret("infra", "cert", self_signed(&["a.example"])),
            opaque,
            secret("infra", "mismatch", (chain, other_key)),
            secret("infra", "garbage", ("not pem".into(), "not pem".into())),
        ],
        vec![],
    );
    let expect = |listener: &str, needle: &str| {
        let (reason, message) = refusal(resolve(&s, listener));
        assert_eq!(reason, "InvalidCertificateRef", "{listener}: {message}");
        assert!(message.contains(needle), "{listener}: {message}");
    };
    expect("missing", "infra/nope: Secret not found");
    expect("kind", "kind core/ConfigMap is not supported");
    expect("opaque", "not kubernetes.io/tls");
    expect("mismatch", "does not match the certificate");
    expect("garbage", "tls.crt holds no certificate");
    expect("one-bad", "infra/nope");
    expect("none", "at least one");
}

#[test]
fn a_secret_in_another_namespace_needs_a_grant_for_gateways() {
    let listeners = vec![https("https", vec![cert_ref(Some("certs"), "cert")])];
    let secrets = vec![secret("certs", "cert", self_signed(&["a.example"]))];
    let s = snapshot(listeners.clone(), secrets.clone(), vec![]);
    let (reason, message) = refusal(resolve(&s, "https"));
    assert_eq!(reason, "RefNotPermitted", "{message}");

    let grant = |from_kind: &str, to_kind: &str| ReferenceGrant {
        meta: ObjectMeta::named("certs", "allow"),
        from: vec![GrantFrom {
            group: GATEWAY_GROUP.into(),
            kind: from_kind.into(),
            namespace: "infra".into(),
        }],
        to: vec![GrantTo {
            group: String::new(),
            kind: to_kind.into(),
            name: None,
        }],
    };
    // A grant for HTTPRoutes, or to Services, does not cover Gateways' Secrets.
    let s = snapshot(
        listeners.clone(),
        secrets.clone(),
        vec![grant("HTTPRoute", "Secret")],
    );
    assert_eq!(refusal(resolve(&s, "https")).0, "RefNotPermitted");
    let s = snapshot(
        listeners.clone(),
        secrets.clone(),
        vec![grant("Gateway", "Service")],
    );
    assert_eq!(refusal(resolve(&s, "https")).0, "RefNotPermitted");
    let s = snapshot(listeners, secrets, vec![grant("Gateway", "Secret")]);
    assert!(resolve(&s, "https").is_ok());
}

#[test]
fn protocols_and_modes_that_are_not_served_say_unsupported_protocol() {
    let mut passthrough = https("passthrough", vec![cert_ref(None, "cert")]);
    if let Some(tls) = passthrough.tls.as_mut() {
        tls.mode = TlsMode::Passthrough;
    }
    let mut tcp = https("tcp", vec![]);
    tcp.protocol = ListenerProtocol::Other("TCP".into());
    tcp.tls = None;
    let mut http = https("http", vec![]);
    http.protocol = ListenerProtocol::Http;
    http.tls = None;
    let s = snapshot(
        vec![passthrough, tcp, http],
        vec![secret("infra", "cert", self_signed(&["a.example"]))],
        vec![],
    );
    for name in ["passthrough", "tcp"] {
        let problem = resolve(&s, name).expect_err("not served");
        assert!(problem.is_protocol(), "{name}: {problem}");
        assert_eq!(problem.reason(), "UnsupportedProtocol");
    }
    assert!(matches!(
        resolve(&s, "http"),
        Ok(ListenerTransport::Plaintext)
    ));
}

#[test]
fn routes_attach_to_an_https_listener_only_while_it_can_be_served() {
    use crate::model::route::{HttpRoute, ParentRef};
    let route = HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("infra", "r"),
        parent_refs: vec![ParentRef {
            group: GATEWAY_GROUP.into(),
            kind: "Gateway".into(),
            namespace: None,
            name: "gw".into(),
            section_name: None,
            port: None,
        }],
        hostnames: vec![],
        rules: vec![],
    };
    let served = snapshot(
        vec![https("https", vec![cert_ref(None, "cert")])],
        vec![secret("infra", "cert", self_signed(&["a.example"]))],
        vec![],
    );
    let (attached, refused) = Topology::of_snapshot(&served).attach_route(&route);
    assert_eq!(attached.len(), 1, "{refused:?}");
    let broken = snapshot(
        vec![https("https", vec![cert_ref(None, "cert")])],
        vec![],
        vec![],
    );
    let (attached, refused) = Topology::of_snapshot(&broken).attach_route(&route);
    assert!(attached.is_empty());
    let why = refused[0].1.to_string();
    assert!(why.contains("InvalidCertificateRef"), "{why}");
}
