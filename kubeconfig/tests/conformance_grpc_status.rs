//! The status expectations of the GRPCRoute conformance files
//! (`tests/data/gateway-api/GRPC*.yaml`, a GRPCRoute among their routes),
//! computed by the product: what the suite's
//! `GatewayAndRoutesMustBeAccepted` waits for before any call — each
//! route `Accepted` `True` (reason `Accepted`) on its parent, on every
//! listener section the suite names, and the Gateway's listeners
//! `ResolvedRefs`, `Accepted` and `Programmed` `True`. Compared as in
//! `conformance_gateway_tls.rs` (the shared `conformance_status` module).
//!
//! This is the status switchyard computes. On a live cluster it does not
//! write a GRPCRoute's status yet (only HTTPRoutes'): the README's "Known
//! differences" records it.

mod conformance_status;

use anyhow::{Result, ensure};
use conformance_status::*;
use serde_json::{Value, json};

/// The files with a GRPCRoute, as `(name, data)`.
fn grpc_files() -> Result<Vec<(String, Value)>> {
    case_files(|data| {
        data["routes"]
            .as_array()
            .is_some_and(|routes| routes.iter().any(|r| r["kind"] == "GRPCRoute"))
    })
}

#[test]
fn grpc_route_status_expectations_hold() -> Result<()> {
    let files = grpc_files()?;
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    ensure!(
        files.len() >= 6,
        "only {} GRPCRoute files: {names:?}",
        files.len()
    );
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for (name, data) in &files {
        checked += data["status_expectations"].as_array().map_or(0, Vec::len);
        mismatches.extend(file_mismatches(name, data)?);
    }
    ensure!(checked >= 14, "only {checked} expectations checked");
    assert!(
        mismatches.is_empty(),
        "status differs from the conformance expectations:\n{}",
        mismatches.join("\n")
    );
    Ok(())
}

/// The route comparison fails on a wrong parent section, condition or
/// reason: a passing file is not a comparison that looks at nothing.
#[test]
fn the_route_comparison_catches_wrong_expectations() -> Result<()> {
    let files = grpc_files()?;
    let (name, data) = files
        .iter()
        .find(|(n, _)| n == "GRPCRouteListenerHostnameMatching")
        .ok_or_else(|| anyhow::anyhow!("GRPCRouteListenerHostnameMatching.yaml"))?;
    assert_eq!(file_mismatches(name, data)?, Vec::<String>::new());
    let wrong = |edit: &dyn Fn(&mut Value)| -> Result<Vec<String>> {
        let mut data = data.clone();
        edit(&mut data["status_expectations"][0]);
        file_mismatches(name, &data)
    };
    let one = |v: Vec<String>, needle: &str| {
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains(needle), "{v:?} lacks {needle}");
    };
    // backend-v1 is attached to listener-1 only.
    one(
        wrong(&|e| e["listeners"] = json!(["listener-2"]))?,
        "section listener-2: no condition Accepted True Accepted",
    );
    one(
        wrong(&|e| e["reason"] = json!("NotAllowedByListeners"))?,
        "no condition Accepted True NotAllowedByListeners",
    );
    one(
        wrong(&|e| e["conditions"] = json!({"Accepted": "False"}))?,
        "no condition Accepted False",
    );
    Ok(())
}
