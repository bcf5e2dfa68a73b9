//! The status expectations of the Gateway API conformance files that
//! declare their Secrets (`secrets`; the Gateway listener TLS tests of
//! `tests/data/gateway-api/`, see its README), computed by the product:
//! each file's objects, its Secrets as the file describes them (`valid`:
//! a test-CA certificate for the hosts; `malformed`: the suite's bytes;
//! `missing`: none), the namespaces and Services the suite's base
//! provides, all read by `parse_object`; then [`gateway_status`] with one
//! live proxy that bound every listener port, and
//! [`route_parent_statuses`]. Each Gateway is looked at alone (the file's
//! other Gateways left out), as the suite gives every Gateway an address
//! of its own: switchyard serves all its Gateways from one fleet, where
//! listeners of different Gateways on one port conflict
//! (GatewayInvalidTLSConfiguration's four all take 443 without a hostname).
//!
//! Expectations are compared the way the suite compares them
//! (`conformance/utils/kubernetes/helpers.go`): a listener condition
//! matches on type, status and reason (no reason: any);
//! `supportedKinds` must contain the expected kinds; `attachedRoutes` is
//! equal; with `exact_listeners` the Gateway lists exactly as many
//! listeners. The differences the README records as known are expected
//! to persist, word for word: a fix makes this test fail until the entry
//! is removed from both places; any other difference fails it too. So
//! are the README's differences from the spec that no upstream case
//! exercises, each checked on a variant of an upstream file
//! ([`SPEC_DIFFERENCES`]).

mod conformance_status;

use anyhow::{Context, Result, bail, ensure};
use conformance_status::*;
use serde_json::{Value, json};
use switchyard_kubeconfig::live::{World, gateway_status};
use switchyard_kubeconfig::parse_object;
use switchyard_proto::model::{CONTROLLER_NAME, Resource};
use switchyard_test_support::conformance_secrets::declares_secrets;
use switchyard_test_support::listener_tls::TestCa;

/// Differences between switchyard and an upstream expectation, each also
/// in the README's "Known differences" with the reason: `(file, the
/// mismatch as this checker words it)`.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[(
    "GatewayWithAttachedRoutes",
    "Gateway gateway-conformance-infra/unresolved-gateway-with-one-attached-unresolved-route listener tls: attachedRoutes is 0, expected 1",
)];

/// Differences between switchyard and the spec that no upstream case in
/// these files exercises, each also in the README's "Known differences":
/// `(name, the mismatch as this checker words it, the condition computed
/// instead)`. Checked by [`spec_differences_persist`] on a variant of an
/// upstream file, labelled as derived from the spec, not as a case of the
/// suite.
const SPEC_DIFFERENCES: &[(&str, &str, &str)] = &[(
    "CrossNamespaceUnsupportedKindWithoutGrant",
    "Gateway gateway-conformance-infra/gateway-secret-missing-reference-grant listener https: no condition ResolvedRefs False RefNotPermitted",
    "ResolvedRefs False InvalidCertificateRef",
)];

/// The files with a `secrets` key, as `(name, data)`; the BackendTLSPolicy
/// files (whose listener Secret is incidental) have a runner of their own,
/// `conformance_backend_tls_status.rs`.
fn tls_files() -> Result<Vec<(String, Value)>> {
    case_files(|data| declares_secrets(data) && !data["backend_tls_policies"].is_array())
}

#[test]
fn listener_tls_status_expectations_hold_but_the_known_differences() -> Result<()> {
    let files = tls_files()?;
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    ensure!(
        files.len() >= 8,
        "only {} files declare their Secrets: {names:?}",
        files.len()
    );
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for (name, data) in &files {
        checked += data["status_expectations"].as_array().map_or(0, Vec::len);
        mismatches.extend(file_mismatches(name, data)?);
    }
    ensure!(checked >= 21, "only {checked} expectations checked");
    let known: Vec<String> = KNOWN_DIFFERENCES
        .iter()
        .map(|(file, what)| format!("{file}: {what}"))
        .collect();
    let unexpected: Vec<&String> = mismatches.iter().filter(|m| !known.contains(m)).collect();
    let gone: Vec<&String> = known.iter().filter(|k| !mismatches.contains(k)).collect();
    assert!(
        unexpected.is_empty(),
        "status differs from the conformance expectations:\n{}",
        unexpected
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        gone.is_empty(),
        "known differences no longer seen (fixed? remove them here and from the README):\n{}",
        gone.iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    Ok(())
}

#[test]
fn the_comparison_catches_wrong_expectations() -> Result<()> {
    // The status of GatewaySecretMissingReferenceGrant's listener, computed.
    let files = tls_files()?;
    let (_, data) = files
        .iter()
        .find(|(n, _)| n == "GatewaySecretMissingReferenceGrant")
        .context("GatewaySecretMissingReferenceGrant.yaml")?;
    let ca = TestCa::new("t");
    let resources: Vec<Resource> = documents(data, &ca)?
        .into_iter()
        .enumerate()
        .map(|(i, d)| parse_object("t", i, d))
        .collect::<Result<_, _>>()?;
    let world = World::new(&resources, CONTROLLER_NAME);
    let Some(Resource::Gateway(g)) = resources.iter().find(|r| matches!(r, Resource::Gateway(_)))
    else {
        bail!("no Gateway")
    };
    let status = gateway_status(g, &world, &proxy_with_every_port(&resources));
    let right = &data["status_expectations"][0];
    assert_eq!(gateway_mismatches(right, &status), Vec::<String>::new());

    let wrong = |edit: &dyn Fn(&mut Value)| {
        let mut e = right.clone();
        edit(&mut e);
        gateway_mismatches(&e, &status)
    };
    let condition = "/listeners/0/conditions/0";
    let one = |v: Vec<String>, needle: &str| {
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains(needle), "{v:?} lacks {needle}");
    };
    one(
        wrong(&|e| e.pointer_mut(condition).unwrap()["reason"] = json!("InvalidCertificateRef")),
        "no condition ResolvedRefs False InvalidCertificateRef",
    );
    one(
        wrong(&|e| e.pointer_mut(condition).unwrap()["status"] = json!("True")),
        "no condition ResolvedRefs True",
    );
    one(
        wrong(&|e| e.pointer_mut(condition).unwrap()["type"] = json!("Resolved")),
        "no condition Resolved",
    );
    one(
        wrong(&|e| e["listeners"][0]["attached_routes"] = json!(1)),
        "attachedRoutes is 0, expected 1",
    );
    one(
        wrong(&|e| {
            e["listeners"][0]["supported_kinds"] = json!(["gateway.networking.k8s.io/TLSRoute"])
        }),
        "lack gateway.networking.k8s.io/TLSRoute",
    );
    one(
        wrong(&|e| e["listeners"][0]["name"] = json!("http")),
        "no status for listener http",
    );
    one(
        wrong(&|e| {
            let extra = e["listeners"][0].clone();
            e["listeners"].as_array_mut().unwrap().push(extra);
        }),
        "1 listeners in status, expected 2",
    );
    // A condition with no reason matches any reason, as in the suite.
    assert!(wrong(&|e| e.pointer_mut(condition).unwrap()["reason"] = Value::Null).is_empty());
    Ok(())
}

/// `GatewaySecretMissingReferenceGrant` with its listener's certificateRef
/// of kind `WrongKind` instead of `Secret`: still in another namespace,
/// still no ReferenceGrant. The spec (`apis/v1/gateway_types.go`,
/// `GatewayTLSConfig.CertificateRefs`) says a cross-namespace reference no
/// grant allows MUST give `RefNotPermitted`; switchyard checks the kind
/// first and says `InvalidCertificateRef`. No upstream test sends this
/// (GatewayInvalidTLSConfiguration's unsupported kind is same-namespace),
/// so the expectation is the spec's, and the recorded difference must
/// persist word for word until the rule changes.
#[test]
fn spec_differences_persist() -> Result<()> {
    let files = tls_files()?;
    let (_, data) = files
        .iter()
        .find(|(n, _)| n == "GatewaySecretMissingReferenceGrant")
        .context("GatewaySecretMissingReferenceGrant.yaml")?;
    let mut data = data.clone();
    let reference = data
        .pointer_mut("/gateways/0/spec/listeners/0/tls/certificateRefs/0")
        .context("the listener's certificateRef")?;
    ensure!(
        reference["namespace"] == "gateway-conformance-web-backend"
            && reference["kind"] == "Secret",
        "the file's reference changed: {reference}"
    );
    reference["kind"] = json!("WrongKind");
    ensure!(
        data["reference_grants"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "the file has a ReferenceGrant now"
    );
    let expectation = &data["status_expectations"][0];
    ensure!(
        expectation["listeners"][0]["conditions"][0]["reason"] == "RefNotPermitted",
        "the file's expectation changed: {expectation}"
    );
    let [(name, mismatch, instead)] = SPEC_DIFFERENCES else {
        bail!("one spec difference is checked here");
    };
    let mismatches = file_mismatches(name, &data)?;
    // Exactly this one: everything else the file expects still holds.
    let want = format!("{name}: {mismatch} among [");
    assert!(
        mismatches.len() == 1
            && mismatches[0].starts_with(&want)
            && mismatches[0].contains(instead),
        "the spec difference changed (fixed? remove it here and from the README):\n\
         want one mismatch starting {want:?} and listing {instead:?}\n\
         got {mismatches:#?}"
    );
    Ok(())
}
