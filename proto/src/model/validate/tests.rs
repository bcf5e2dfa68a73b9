//! Unit tests of validation.
use super::*;
use crate::model::*;

fn route(rules: Vec<RouteRule>) -> Resource {
    Resource::HttpRoute(HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("default", "r"),
        parent_refs: vec![],
        hostnames: vec![],
        rules,
    })
}

#[test]
fn backend_ref_without_port_names_the_field() {
    let mut b = BackendRef::service("svc", 80);
    b.port = None;
    let err = validate_resource(&route(vec![RouteRule {
        backend_refs: vec![b],
        ..Default::default()
    }]))
    .unwrap_err();
    assert_eq!(err.object, "HTTPRoute default/r");
    assert_eq!(err.field, "spec.rules[0].backendRefs[0].port");
}

#[test]
fn bad_regex_is_rejected() {
    let err = validate_resource(&route(vec![RouteRule {
        matches: vec![RouteMatch {
            path: Some(PathMatch::RegularExpression("/(".into())),
            ..Default::default()
        }],
        ..Default::default()
    }]))
    .unwrap_err();
    assert_eq!(err.field, "spec.rules[0].matches[0].path.value");
    assert!(err.message.contains("regular expression"), "{err}");
}

fn regex_match(pattern: &str) -> RouteMatch {
    RouteMatch {
        path: Some(PathMatch::RegularExpression(pattern.into())),
        ..Default::default()
    }
}

#[test]
fn a_regex_that_escapes_its_anchors_is_rejected() {
    let err = validate_resource(&route(vec![RouteRule {
        matches: vec![regex_match("/a)|(.*")],
        ..Default::default()
    }]))
    .unwrap_err();
    assert!(err.message.contains("invalid regular expression"), "{err}");
    assert!(compile_route_regex("/a)|(.*").is_err());
    let ok = compile_route_regex("/v[0-9]+").unwrap();
    assert!(ok.is_match("/v12") && !ok.is_match("/v12/x") && !ok.is_match("x/v1"));
}

#[test]
fn a_costly_regex_is_rejected_naming_rule_and_match() {
    let err = validate_resource(&route(vec![
        RouteRule::default(),
        RouteRule {
            matches: vec![regex_match("/ok"), regex_match("/rx1/\\w{200}")],
            ..Default::default()
        },
    ]))
    .unwrap_err();
    assert_eq!(err.object, "HTTPRoute default/r");
    assert_eq!(err.field, "spec.rules[1].matches[1].path.value");
    assert!(err.message.contains("the most one match may use"), "{err}");
}

#[test]
fn regexes_are_summed_per_route() {
    // Each about 50 KB (Unicode `\w`), under the per-match limit; 21
    // of them pass 1 MiB.
    let matches: Vec<RouteMatch> = (0..40)
        .map(|i| regex_match(&format!("/rx{i}/\\w+")))
        .collect();
    let err = validate_resource(&route(vec![RouteRule {
        matches,
        ..Default::default()
    }]))
    .unwrap_err();
    assert!(err.field.starts_with("spec.rules[0].matches["), "{err}");
    assert!(err.message.contains("one route may use"), "{err}");
    // Few of them pass.
    validate_resource(&route(vec![RouteRule {
        matches: (0..5)
            .map(|i| regex_match(&format!("/rx{i}/\\w+")))
            .collect(),
        ..Default::default()
    }]))
    .unwrap();
}

#[test]
fn names_and_annotations_are_checked() {
    let mut r = HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("default", "Bad_Name"),
        parent_refs: vec![],
        hostnames: vec![],
        rules: vec![],
    };
    assert_eq!(
        validate_resource(&Resource::HttpRoute(r.clone()))
            .unwrap_err()
            .field,
        "metadata.name"
    );
    r.meta.name = "ok".into();
    r.meta
        .annotations
        .insert(ANNOTATION_POLICY.into(), "most".into());
    let err = validate_resource(&Resource::HttpRoute(r)).unwrap_err();
    assert!(err.field.contains(ANNOTATION_POLICY), "{err}");
}

#[test]
fn a_valid_route_passes() {
    let mut b = BackendRef::service("svc", 80);
    b.weight = 0;
    validate_resource(&route(vec![RouteRule {
        backend_refs: vec![b],
        ..Default::default()
    }]))
    .unwrap();
}
