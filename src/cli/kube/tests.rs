//! Unit tests of the `--kubernetes` flags and the store mapping.

use super::*;
use switchyard_kubeconfig::live::SourceRole;

fn file(path: &str, context: Option<&str>) -> Location {
    Location::File {
        path: PathBuf::from(path),
        context: context.map(str::to_string),
    }
}

#[test]
fn source_shapes_parse() {
    let cases = [
        ("in-cluster", None, Location::InCluster),
        ("home=in-cluster", Some("home"), Location::InCluster),
        ("/etc/kube/config", None, file("/etc/kube/config", None)),
        (
            "/etc/kube/west.yaml#ctx",
            None,
            file("/etc/kube/west.yaml", Some("ctx")),
        ),
        (
            "west=/etc/kube/west.yaml#ctx",
            Some("west"),
            file("/etc/kube/west.yaml", Some("ctx")),
        ),
        // A `/` before the `=` makes it part of the path.
        ("/etc/a=b.yaml", None, file("/etc/a=b.yaml", None)),
    ];
    for (text, name, location) in cases {
        let spec = SourceSpec::parse(text).unwrap();
        assert_eq!(spec.name.as_deref(), name, "{text}");
        assert_eq!(spec.location, location, "{text}");
    }
}

#[test]
fn malformed_sources_are_refused() {
    for text in ["", "west=", "config#", "#ctx"] {
        assert!(SourceSpec::parse(text).is_err(), "{text:?} accepted");
    }
}

#[test]
fn stored_routes_compare_by_their_newest_spec() {
    use switchyard_proto::model::{RouteGeneration, RouteRecord};
    let route = |backend: &str| {
        let text = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
             metadata: {{name: app, namespace: shop}}\n\
             spec: {{rules: [{{backendRefs: [{{name: {backend}, port: 80}}]}}]}}\n"
        );
        match switchyard_kubeconfig::parse_documents("t", &text)
            .unwrap()
            .remove(0)
        {
            Resource::HttpRoute(r) => r,
            other => panic!("not a route: {other:?}"),
        }
    };
    let generation = |n, backend| RouteGeneration {
        generation: n,
        spec: route(backend),
    };
    let record = |name: &str, active, pending: Option<RouteGeneration>| RouteRecord {
        name: switchyard_proto::model::ObjectName::new("shop", name),
        active,
        pending: pending.map(|target| switchyard_proto::model::Transition {
            target,
            settings: Default::default(),
        }),
        last_failure: None,
        forced: false,
        active_since: 0,
    };
    let mut state = ReplicatedState::default();
    for r in [
        record(
            "pending",
            Some(generation(1, "blue")),
            Some(generation(2, "green")),
        ),
        record("active", Some(generation(1, "blue")), None),
        record("abandoned-first", None, None),
    ] {
        state.routes.insert(r.name.clone(), std::sync::Arc::new(r));
    }
    let Stored {
        resources: stored,
        specless_routes: specless,
    } = stored_resources(&state);
    let backends: Vec<String> = stored
        .iter()
        .map(|r| match r {
            Resource::HttpRoute(r) => r.rules[0].backend_refs[0].name.clone(),
            _ => unreachable!(),
        })
        .collect();
    // BTreeMap order: "active" (blue), then "pending" (its green).
    assert_eq!(backends, ["blue", "green"]);
    assert_eq!(specless.len(), 1);
    assert_eq!(specless[0].name.name, "abandoned-first");
}

#[test]
fn flags_repeat_and_split_on_commas() {
    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        kube: KubeArgs,
    }
    let cli = <Cli as clap::Parser>::try_parse_from([
        "x",
        "--kubernetes",
        "in-cluster",
        "--kubernetes",
        "a=one.yaml#c1,b=two.yaml",
    ])
    .unwrap();
    let names: Vec<_> = cli.kube.sources.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, [None, Some("a".into()), Some("b".into())]);
    assert_eq!(cli.kube.kubernetes_status_interval, Duration::from_secs(10));
    assert_eq!(cli.kube.kubernetes_proxy_service, None);
}

#[tokio::test]
async fn endpoints_only_names_a_source_and_an_unknown_name_is_refused() {
    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        kube: KubeArgs,
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clusters.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {}}]\n\
         contexts: [{name: c, context: {cluster: k, user: u}}]\n",
    )
    .unwrap();
    let args = |only: &str| {
        <Cli as clap::Parser>::try_parse_from([
            "x".to_string(),
            "--kubernetes".into(),
            format!("main={}", path.display()),
            "--kubernetes".into(),
            format!("{}#c", path.display()),
            "--kubernetes-endpoints-only".into(),
            only.into(),
        ])
        .unwrap()
        .kube
    };
    let sync = LiveSync::connect(&args("127.0.0.1:1"))
        .await
        .unwrap()
        .unwrap();
    let roles: Vec<_> = sync
        .sources
        .iter()
        .map(|s| (s.name.as_str(), s.role))
        .collect();
    assert_eq!(
        roles,
        [
            ("main", SourceRole::Full),
            ("127.0.0.1:1", SourceRole::Endpoints)
        ],
        "an unnamed kubeconfig source is named by its API server"
    );
    let e = LiveSync::connect(&args("west"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"west\"") && e.contains("127.0.0.1:1, main"),
        "{e}"
    );
}

#[test]
fn the_proxy_service_is_cluster_namespace_name() {
    let parsed = parse_proxy_service("local/switchyard/proxy").unwrap();
    assert_eq!(parsed.cluster, "local");
    assert_eq!(parsed.service, ObjectName::new("switchyard", "proxy"));
    for bad in ["switchyard/proxy", "a//b", "a/b/c/d"] {
        let e = parse_proxy_service(bad).unwrap_err();
        assert!(e.contains("CLUSTER/NAMESPACE/NAME"), "{e}");
    }
}
