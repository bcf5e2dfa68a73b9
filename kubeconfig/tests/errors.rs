//! Broken inputs: each one fails the whole parse with an error that names
//! the file, the document (0-based), the object when known, and the
//! problem.

use switchyard_kubeconfig::{Problem, parse_documents, parse_keys, parse_object};

const ROUTE_HEAD: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
                          metadata:\n  name: app\n  namespace: demo\n";

fn route(spec: &str) -> String {
    format!("{ROUTE_HEAD}spec:\n{spec}")
}

const GOOD_SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: ok}\n\
                            spec:\n  ports:\n  - port: 80\n";

/// One broken case: the text, and fragments its error must contain.
struct Case {
    what: &'static str,
    text: String,
    expect: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            what: "malformed YAML",
            text: format!("{GOOD_SERVICE}---\nkind: [unclosed\n"),
            expect: &["broken.yaml", "document 1 (0-based)", "malformed YAML"],
        },
        Case {
            what: "a document that is a list",
            text: "- a\n- b\n".into(),
            expect: &["document 0 (0-based)", "is a list", "expected a mapping"],
        },
        Case {
            what: "missing apiVersion",
            text: "kind: Service\nmetadata: {name: x}\n".into(),
            expect: &["Service x", "apiVersion is required"],
        },
        Case {
            what: "missing kind",
            text: "apiVersion: v1\nmetadata: {name: x}\n".into(),
            expect: &["object x", "kind is required"],
        },
        Case {
            what: "unknown kind",
            text: "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n".into(),
            expect: &[
                "unknown kind \"Pod\"",
                "supported kinds",
                "HTTPRoute (gateway.networking.k8s.io/v1)",
                "EndpointSlice (discovery.k8s.io/v1)",
            ],
        },
        Case {
            what: "wrong apiVersion",
            text: "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: HTTPRoute\n\
                   metadata: {name: x}\nspec: {}\n"
                .into(),
            expect: &[
                "HTTPRoute x",
                "apiVersion \"gateway.networking.k8s.io/v1alpha2\" is wrong for kind HTTPRoute",
                "expected gateway.networking.k8s.io/v1",
            ],
        },
        Case {
            what: "missing metadata.name",
            text: "apiVersion: v1\nkind: Service\nmetadata: {namespace: a}\n".into(),
            expect: &["metadata.name is required"],
        },
        Case {
            what: "missing required field (listener port)",
            text: "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
                   metadata: {name: gw}\nspec:\n  gatewayClassName: c\n  listeners:\n\
                   \x20 - name: http\n    protocol: HTTP\n"
                .into(),
            expect: &[
                "Gateway default/gw",
                "does not match the Gateway schema",
                "spec.listeners[0]: missing field `port`",
                "line 7",
            ],
        },
        Case {
            what: "missing required field (backendRef name)",
            text: route("  rules:\n  - backendRefs:\n    - port: 80\n"),
            expect: &["spec.rules[0].backendRefs[0]: missing field `name`"],
        },
        Case {
            what: "missing Service port",
            text: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports:\n  - name: http\n"
                .into(),
            expect: &["Service default/s", "spec.ports[0].port is required"],
        },
        Case {
            what: "unknown enum value",
            text: route("  rules:\n  - matches:\n    - path: {type: Glob, value: /a}\n"),
            expect: &["spec.rules[0].matches[0].path.type", "unknown variant `Glob`"],
        },
        Case {
            what: "bad regex in a path match",
            text: route("  rules:\n  - matches:\n    - path: {type: RegularExpression, value: \"/(\"}\n"),
            expect: &[
                "HTTPRoute demo/app",
                "spec.rules[0].matches[0].path.value",
                "invalid regular expression",
            ],
        },
        Case {
            what: "bad regex in a header match",
            text: route(
                "  rules:\n  - matches:\n    - headers:\n      - {name: X-A, type: RegularExpression, value: \"[\"}\n",
            ),
            expect: &["spec.rules[0].matches[0].headers[0].value", "invalid regular expression"],
        },
        Case {
            what: "port 0",
            text: route("  rules:\n  - backendRefs:\n    - {name: s, port: 0}\n"),
            expect: &["spec.rules[0].backendRefs[0].port", "invalid port 0", "between 1 and 65535"],
        },
        Case {
            what: "port above 65535",
            text: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports:\n  - port: 70000\n"
                .into(),
            expect: &["Service default/s", "spec.ports[0].port", "invalid port 70000"],
        },
        Case {
            what: "listener port above 65535",
            text: "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
                   metadata: {name: gw}\nspec:\n  gatewayClassName: c\n  listeners:\n\
                   \x20 - {name: http, protocol: HTTP, port: 65536}\n"
                .into(),
            expect: &["spec.listeners[0].port", "invalid port 65536"],
        },
        Case {
            what: "duplicate names",
            text: format!("{GOOD_SERVICE}---\n{GOOD_SERVICE}"),
            expect: &[
                "document 1 (0-based)",
                "Service default/ok",
                "defined twice in this file: documents 0 and 1",
            ],
        },
        Case {
            what: "duplicate names, once with the default namespace spelled out",
            text: format!(
                "{GOOD_SERVICE}---\napiVersion: v1\nkind: Service\n\
                 metadata: {{name: ok, namespace: default}}\n"
            ),
            expect: &["defined twice"],
        },
        Case {
            what: "unsupported filter",
            text: route(
                "  rules:\n  - filters:\n    - type: ExtensionRef\n      extensionRef: {group: g, kind: K, name: n}\n",
            ),
            expect: &["spec.rules[0].filters[0].type", "ExtensionRef is not supported"],
        },
        Case {
            what: "filter without its body",
            text: route("  rules:\n  - filters:\n    - type: RequestMirror\n"),
            expect: &["spec.rules[0].filters[0].requestMirror", "required when type is RequestMirror"],
        },
        Case {
            what: "negative weight",
            text: route("  rules:\n  - backendRefs:\n    - {name: s, port: 80, weight: -1}\n"),
            expect: &["spec.rules[0].backendRefs[0].weight", "must not be negative"],
        },
        Case {
            what: "selector missing for from: Selector",
            text: "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
                   metadata: {name: gw}\nspec:\n  gatewayClassName: c\n  listeners:\n\
                   \x20 - name: http\n    protocol: HTTP\n    port: 80\n\
                   \x20   allowedRoutes: {namespaces: {from: Selector}}\n"
                .into(),
            expect: &["spec.listeners[0].allowedRoutes.namespaces.selector", "required"],
        },
        Case {
            what: "cluster-scoped kind with a namespace",
            text: "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, namespace: b}\n".into(),
            expect: &["metadata.namespace", "cluster-scoped"],
        },
        Case {
            what: "EndpointSlice without addressType",
            text: "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: e\n\
                   \x20 labels: {kubernetes.io/service-name: s}\nendpoints: []\n"
                .into(),
            expect: &["EndpointSlice default/e", "addressType is required"],
        },
        Case {
            what: "EndpointSlice address of the wrong family",
            text: "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: e\n\
                   \x20 labels: {kubernetes.io/service-name: s}\naddressType: IPv4\n\
                   endpoints:\n- addresses: [\"::1\"]\n"
                .into(),
            expect: &["endpoints[0].addresses[0]", "not a valid IPv4 address"],
        },
        // Unknown fields: refused as `kubectl apply` (strict field
        // validation) refuses them, with the field's path.
        Case {
            what: "matchs: instead of matches: in an HTTPRoute rule",
            text: route(
                "  rules:\n  - matchs:\n    - path: {type: PathPrefix, value: /admin}\n\
                 \x20   backendRefs:\n    - {name: admin, port: 80}\n",
            ),
            expect: &[
                "broken.yaml, document 0 (0-based), HTTPRoute demo/app: \
                 unknown field \"spec.rules[0].matchs\" (not in the HTTPRoute schema)",
            ],
        },
        Case {
            what: "an unknown top-level spec field of a Gateway",
            text: "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
                   metadata: {name: gw, namespace: demo}\nspec:\n  gatewayClassName: c\n\
                   \x20 listeners:\n  - {name: http, protocol: HTTP, port: 80}\n\
                   \x20 infrastucture: {labels: {team: a}}\n"
                .into(),
            expect: &[
                "broken.yaml, document 0 (0-based), Gateway demo/gw: \
                 unknown field \"spec.infrastucture\" (not in the Gateway schema)",
            ],
        },
        Case {
            what: "an unknown field inside a backendRef",
            text: route("  rules:\n  - backendRefs:\n    - {name: s, port: 80, weigth: 10}\n"),
            expect: &[
                "HTTPRoute demo/app: unknown field \"spec.rules[0].backendRefs[0].weigth\"",
            ],
        },
        Case {
            what: "an unknown field in a Service port",
            text: "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: demo}\n\
                   spec:\n  ports:\n  - port: 80\n    targetport: 8080\n"
                .into(),
            expect: &[
                "broken.yaml, document 0 (0-based), Service demo/s: \
                 unknown field \"spec.ports[0].targetport\" (not in the Service schema)",
            ],
        },
        Case {
            what: "an unknown field in an EndpointSlice endpoint's conditions",
            text: "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: e\n\
                   \x20 labels: {kubernetes.io/service-name: s}\naddressType: IPv4\n\
                   ports: [{port: 8080}]\nendpoints:\n- addresses: [10.0.0.1]\n\
                   \x20 conditions: {ready: true, healthy: false}\n"
                .into(),
            expect: &[
                "EndpointSlice default/e: \
                 unknown field \"endpoints[0].conditions.healthy\" (not in the EndpointSlice schema)",
            ],
        },
        Case {
            what: "a misspelt metadata field",
            text: "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespce: demo}\n".into(),
            expect: &["Service default/s: unknown field \"metadata.namespce\""],
        },
        Case {
            what: "a misspelt top-level key",
            text: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nsepc: {ports: [{port: 80}]}\n"
                .into(),
            expect: &["Service default/s: unknown field \"sepc\""],
        },
        Case {
            what: "an unknown field in a GatewayClass",
            text: "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\n\
                   metadata: {name: c}\nspec: {controllerName: x.io/y, descripton: d}\n"
                .into(),
            expect: &["GatewayClass c: unknown field \"spec.descripton\""],
        },
        Case {
            what: "an unknown field in a ReferenceGrant",
            text: "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
                   metadata: {name: g, namespace: b}\nspec:\n\
                   \x20 from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: a, name: r}]\n\
                   \x20 to: [{group: \"\", kind: Service}]\n"
                .into(),
            expect: &["ReferenceGrant b/g", "unknown field \"spec.from[0].name\""],
        },
        Case {
            what: "an unknown field in a Namespace",
            text: "apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\nspec: {finalizer: [kubernetes]}\n"
                .into(),
            expect: &["Namespace n: unknown field \"spec.finalizer\" (not in the Namespace schema)"],
        },
        Case {
            what: "several unknown fields are all named",
            text: route(
                "  rules:\n  - matchs: [{path: {value: /a}}]\n    filterz: [{type: X}]\n",
            ),
            expect: &[
                "unknown fields \"spec.rules[0].filterz\", \"spec.rules[0].matchs\" \
                 (not in the HTTPRoute schema)",
            ],
        },
        Case {
            what: "an unknown field deep in a filter",
            text: route(
                "  rules:\n  - filters:\n    - type: RequestHeaderModifier\n\
                 \x20     requestHeaderModifier: {add: [{name: a, value: b}], append: [{name: c, value: d}]}\n",
            ),
            expect: &["unknown field \"spec.rules[0].filters[0].requestHeaderModifier.append\""],
        },
        Case {
            what: "a YAML merge key (not expanded, so its content would be lost)",
            text: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports:\n\
                   \x20 - &p {name: http, port: 80}\n  - <<: *p\n    name: other\n    port: 81\n"
                .into(),
            expect: &["Service default/s: unknown field \"spec.ports[1]['<<']\""],
        },
        Case {
            what: "status on an EndpointSlice, which has none",
            text: "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: e\n\
                   \x20 labels: {kubernetes.io/service-name: s}\naddressType: IPv4\nendpoints: []\n\
                   status: {ready: true}\n"
                .into(),
            expect: &["EndpointSlice default/e: unknown field \"status\""],
        },
        Case {
            what: "invalid name (model validation)",
            text: "apiVersion: v1\nkind: Service\nmetadata: {name: Bad_Name}\n".into(),
            expect: &["Service default/Bad_Name", "metadata.name", "not a valid name"],
        },
    ]
}

#[test]
fn each_broken_input_names_its_problem() {
    let mut failures = Vec::new();
    for case in cases() {
        match parse_documents("broken.yaml", &case.text) {
            Ok(resources) => failures.push(format!(
                "{}: parsed into {} resources instead of failing",
                case.what,
                resources.len()
            )),
            Err(err) => {
                let text = err.to_string();
                if !text.starts_with("broken.yaml") {
                    failures.push(format!(
                        "{}: error does not name the file: {text}",
                        case.what
                    ));
                }
                for fragment in case.expect {
                    if !text.contains(fragment) {
                        failures.push(format!("{}: {text:?} lacks {fragment:?}", case.what));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_failing_document_index_is_reported_and_nothing_is_kept() {
    let text = format!(
        "{GOOD_SERVICE}---\n\n---\n{}",
        route("  rules:\n  - backendRefs:\n    - {name: s, port: 0}\n")
    );
    let err = parse_documents("f.yaml", &text).unwrap_err();
    // Document 1 is empty; it still counts.
    assert_eq!(err.at.document, Some(2));
    assert_eq!(err.at.kind.as_deref(), Some("HTTPRoute"));
    assert_eq!(err.at.object.as_deref(), Some("demo/app"));
    assert!(
        matches!(err.problem, Problem::InvalidPort { value: 0, .. }),
        "{err}"
    );
}

#[test]
fn parse_object_reports_field_paths_without_meaningless_lines() {
    let value = serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {"rules": [{"backendRefs": [{"port": 80}]}]},
    });
    let err = parse_object("cases.yaml", 4, value)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("cases.yaml, document 4 (0-based), HTTPRoute ns/r:"),
        "{err}"
    );
    assert!(
        err.contains("spec.rules[0].backendRefs[0]: missing field `name`"),
        "{err}"
    );
    assert!(!err.contains(" at line "), "{err}");
}

#[test]
fn keys_reject_what_cannot_be_identified() {
    let err = parse_keys("d.yaml", "apiVersion: v1\nkind: Service\nmetadata: {}\n").unwrap_err();
    assert!(
        err.to_string().contains("metadata.name is required"),
        "{err}"
    );
    let err = parse_keys("d.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n").unwrap_err();
    assert!(err.to_string().contains("unknown kind \"Pod\""), "{err}");
}

#[test]
fn a_missing_file_is_named() {
    let path = std::path::Path::new("definitely/not/here.yaml");
    let err = switchyard_kubeconfig::parse_file(path).unwrap_err();
    assert!(matches!(err.problem, Problem::Io(_)));
    assert!(
        err.to_string()
            .starts_with("definitely/not/here.yaml: cannot read the file"),
        "{err}"
    );
}
