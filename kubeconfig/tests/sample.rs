//! A sample file with every supported kind parses into exactly the model
//! values expected, defaults included; the embedded default configuration
//! parses too.

#[path = "sample/expected.rs"]
mod expected;

use expected::expected;
use switchyard_kubeconfig::{DEFAULT_CONFIG, parse_documents, parse_keys};
use switchyard_proto::model::*;

/// Every supported kind, with the fields the translator reads.
const SAMPLE: &str = include_str!("sample/sample.yaml");

#[test]
fn every_kind_translates_to_the_expected_model() {
    let got = parse_documents("sample.yaml", SAMPLE).expect("sample parses");
    let want = expected();
    assert_eq!(got.len(), want.len());
    // Compare one by one so a failure points at the resource that differs.
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "resource {}", w.key());
    }
    for r in &got {
        validate_resource(r).expect("already validated");
    }
}

#[test]
fn keys_match_the_parsed_resources() {
    let keys = parse_keys("sample.yaml", SAMPLE).expect("keys");
    let want: Vec<ResourceKey> = expected().iter().map(Resource::key).collect();
    assert_eq!(keys, want);
}

#[test]
fn keys_need_only_apiversion_kind_and_metadata() {
    let text = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n---\n\
                apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
                metadata: {name: app, namespace: demo}\n";
    let keys = parse_keys("delete.yaml", text).expect("keys");
    assert_eq!(
        keys,
        vec![
            ResourceKey {
                kind: Kind::Service,
                name: ObjectName::new("default", "web"),
            },
            ResourceKey {
                kind: Kind::HTTPRoute,
                name: ObjectName::new("demo", "app"),
            },
        ]
    );
}

#[test]
fn the_default_config_parses() {
    let got = parse_documents("default.yaml", DEFAULT_CONFIG).expect("default config parses");
    let keys: Vec<String> = got.iter().map(|r| r.key().to_string()).collect();
    assert_eq!(
        keys,
        [
            "GatewayClass switchyard",
            "Namespace demo",
            "Gateway demo/gateway",
            "Service demo/blue",
            "Service demo/green",
            "EndpointSlice demo/blue-1",
            "EndpointSlice demo/green-1",
            "HTTPRoute demo/app",
        ]
    );
    let Resource::GatewayClass(class) = &got[0] else {
        panic!("first is the class")
    };
    assert_eq!(class.controller_name, CONTROLLER_NAME);
    let Resource::Gateway(gw) = &got[2] else {
        panic!("third is the gateway")
    };
    assert_eq!(gw.listeners.len(), 1);
    assert_eq!(gw.listeners[0].port, 8080);
    assert_eq!(gw.listeners[0].protocol, ListenerProtocol::Http);
    for (i, port) in [(5, 18081), (6, 18082)] {
        let Resource::EndpointSlice(s) = &got[i] else {
            panic!("slice at {i}")
        };
        assert_eq!(s.ports[0].port, port);
        assert_eq!(s.endpoints[0].addresses, ["127.0.0.1"]);
    }
    let Resource::HttpRoute(route) = &got[7] else {
        panic!("last is the route")
    };
    assert_eq!(
        route.rules[0].backend_refs,
        [BackendRef::service("blue", 80)]
    );
    let Resource::Service(blue) = &got[3] else {
        panic!("fourth is blue")
    };
    assert_eq!(blue.ports[0].port, 80);
    assert_eq!(blue.ports[0].target_port, Some(8080));
}

#[test]
fn empty_and_comment_only_texts_hold_no_objects() {
    for text in [
        "",
        "# nothing here\n",
        "---\n---\n",
        "---\n# just a comment\n...\n",
    ] {
        assert_eq!(parse_documents("empty.yaml", text).expect(text), vec![]);
        assert_eq!(parse_keys("empty.yaml", text).expect(text), vec![]);
    }
}

#[test]
fn unquoted_scalars_in_string_fields_are_strings() {
    let text = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
                metadata: {name: r}\nspec:\n  rules:\n  - matches:\n    - headers:\n\
                \x20     - {name: X-Version, value: 2}\n      queryParams:\n\
                \x20     - {name: on, value: true}\n";
    let got = parse_documents("scalars.yaml", text).expect("parses");
    let Resource::HttpRoute(r) = &got[0] else {
        panic!("a route")
    };
    assert_eq!(r.rules[0].matches[0].headers[0].value, "2");
    assert_eq!(r.rules[0].matches[0].query_params[0].value, "true");
}
