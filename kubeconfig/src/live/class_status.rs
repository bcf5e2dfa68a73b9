//! GatewayClass status, computed: `Accepted` with `observedGeneration`,
//! and `status.supportedFeatures` (GEP-2162) — for classes whose
//! `spec.controllerName` is ours only; another controller's class is never
//! touched.
//!
//! [`SUPPORTED_FEATURES`] is the one list of what switchyard claims. It is
//! not a wish list: it is the features named by the Gateway API
//! conformance cases in the repository (`tests/data/gateway-api/`), whose
//! request cases run through the real proxy (`proxy/tests/conformance.rs`),
//! less [`UNCLAIMED_FEATURES`]; `kubeconfig/tests/live_status_gateway.rs`
//! checks that the two lists together are exactly the features the cases
//! name. Features the cases do not cover (query-param matching, timeouts,
//! TLS...) are not claimed.
//!
//! Pure. It deliberately does not read or write the cluster.

use super::conditions::{Condition, ConditionStatus};
use serde_json::Value;

/// The Gateway API features switchyard supports, sorted as GEP-2162
/// requires (ascending by name).
pub const SUPPORTED_FEATURES: &[&str] = &[
    "BackendTLSPolicy",
    "BackendTLSPolicySANValidation",
    "GRPCRoute",
    "GRPCRouteNamedRouteRule",
    "GRPCRouteRequestHeaderModifier",
    "Gateway",
    "GatewayHTTPSListenerDetectMisdirectedRequests",
    "GatewayPort8080",
    "HTTPRoute",
    "HTTPRoute303RedirectStatusCode",
    "HTTPRoute308RedirectStatusCode",
    "HTTPRouteBackendRequestRedirect",
    "HTTPRouteBackendURLRewrite",
    "HTTPRouteDestinationPortMatching",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRouteNamedRouteRule",
    "HTTPRouteParentRefPort",
    "HTTPRoutePortRedirect",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestPercentageMirror",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteSchemeRedirect",
    "ReferenceGrant",
];

/// Features the repository's conformance cases name that switchyard does
/// not claim, each with why.
pub const UNCLAIMED_FEATURES: &[(&str, &str)] = &[(
    "TLSRoute",
    "switchyard serves HTTPRoute and GRPCRoute, not TLSRoute; the case naming it (HTTPRouteDisallowedKind) needs a TLSRoute listener",
)];

/// A GatewayClass's status (without times).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassStatus {
    /// `Accepted`.
    pub conditions: Vec<Condition>,
    /// `status.supportedFeatures[].name`, sorted.
    pub supported_features: Vec<String>,
}

/// The status of the GatewayClass `class` (as the API server serves it),
/// or `None` when its `spec.controllerName` is not `controller_name`.
///
/// A class with a `spec.parametersRef` is not accepted
/// (`InvalidParameters`): switchyard has no parameters kind, so every
/// reference is to an unsupported kind, which the spec says to reject.
pub fn class_status(class: &Value, controller_name: &str) -> Option<ClassStatus> {
    if class
        .pointer("/spec/controllerName")
        .and_then(Value::as_str)
        != Some(controller_name)
    {
        return None;
    }
    let generation = class
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let accepted = match class.pointer("/spec/parametersRef") {
        Some(r) if !r.is_null() => Condition {
            type_: "Accepted".into(),
            status: ConditionStatus::False,
            reason: "InvalidParameters".into(),
            message: format!(
                "spec.parametersRef {} {}: switchyard takes no GatewayClass parameters; remove it",
                r.get("kind").and_then(Value::as_str).unwrap_or("?"),
                r.get("name").and_then(Value::as_str).unwrap_or("?"),
            ),
            observed_generation: generation,
        },
        _ => Condition {
            type_: "Accepted".into(),
            status: ConditionStatus::True,
            reason: "Accepted".into(),
            message: format!("handled by {controller_name}"),
            observed_generation: generation,
        },
    };
    Some(ClassStatus {
        conditions: vec![accepted],
        supported_features: SUPPORTED_FEATURES.iter().map(|f| f.to_string()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_proto::model::CONTROLLER_NAME;

    #[test]
    fn supported_features_are_sorted_and_unique_and_none_is_also_unclaimed() {
        let mut sorted = SUPPORTED_FEATURES.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, SUPPORTED_FEATURES);
        for (f, _) in UNCLAIMED_FEATURES {
            assert!(!SUPPORTED_FEATURES.contains(f), "{f}");
        }
    }

    #[test]
    fn our_class_is_accepted_at_its_generation_and_another_is_untouched() {
        let ours = json!({"metadata": {"name": "sy", "generation": 3},
                          "spec": {"controllerName": CONTROLLER_NAME}});
        let s = class_status(&ours, CONTROLLER_NAME).unwrap();
        assert_eq!(s.conditions[0].status, ConditionStatus::True);
        assert_eq!(s.conditions[0].observed_generation, Some(3));
        assert_eq!(s.supported_features.len(), SUPPORTED_FEATURES.len());
        let theirs =
            json!({"metadata": {"name": "x"}, "spec": {"controllerName": "example.com/other"}});
        assert_eq!(class_status(&theirs, CONTROLLER_NAME), None);
    }

    #[test]
    fn a_class_with_parameters_is_not_accepted() {
        let class = json!({"metadata": {"name": "sy", "generation": 1},
                           "spec": {"controllerName": CONTROLLER_NAME,
                                    "parametersRef": {"group": "example.com", "kind": "Config", "name": "c"}}});
        let s = class_status(&class, CONTROLLER_NAME).unwrap();
        assert_eq!(
            (s.conditions[0].status, s.conditions[0].reason.as_str()),
            (ConditionStatus::False, "InvalidParameters")
        );
    }
}
