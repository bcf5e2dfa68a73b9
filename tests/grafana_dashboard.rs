//! `deploy/grafana/switchyard.json` queries only metrics the binaries
//! export. The names come from the registries the `switchyard proxy` and
//! `switchyard coordinator` processes serve on `/metrics`, built by the
//! same functions their `run` uses and encoded as `/metrics` encodes them;
//! every metric name in every panel query must be one of those series
//! names exactly (`_total` on counters, `_bucket`/`_sum`/`_count` on
//! histograms), and declared by one family only.
//!
//! Names are read from the `# TYPE` lines. prometheus-client prints no
//! line at all for a labelled family without a series yet (checked
//! below), so before encoding, every labelled family gets one series:
//! through the public fields of the data plane's [`Metrics`] and
//! [`CoordinatorMetrics::set_live_proxies`] (the others are created at
//! registration). A family added later and used by the dashboard fails
//! here as not exported until it is touched in [`touch_every_family`].
//!
//! The query reader is a small PromQL tokenizer, not a parser: it skips
//! strings, label matchers (`{...}`), ranges (`[...]`), Grafana variables
//! (`$__rate_interval`), numbers, and the label lists of `by`, `without`,
//! `on`, `ignoring`, `group_left` and `group_right`; of the identifiers
//! left, PromQL's functions, aggregations and keywords are not metrics,
//! an unknown identifier called like a function is an error, and every
//! other one is a metric name.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use switchyard_coordinator::server::metrics::CoordinatorMetrics;
use switchyard_proxy::DataPlaneSettings;
use switchyard_proxy::metrics::{
    BackendLabels, ErrorLabels, Metrics, MirrorLabels, UpgradeOutcome,
};

/// PromQL functions, aggregation operators and keywords: never metrics.
const PROMQL_WORDS: &[&str] = &[
    // Aggregations.
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    // Functions.
    "abs",
    "absent",
    "absent_over_time",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "count_over_time",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "delta",
    "deriv",
    "exp",
    "floor",
    "histogram_avg",
    "histogram_count",
    "histogram_fraction",
    "histogram_quantile",
    "histogram_stddev",
    "histogram_stdvar",
    "histogram_sum",
    "hour",
    "idelta",
    "increase",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "log10",
    "log2",
    "mad_over_time",
    "max_over_time",
    "min_over_time",
    "minute",
    "month",
    "predict_linear",
    "present_over_time",
    "quantile_over_time",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sort",
    "sort_desc",
    "sqrt",
    "stddev_over_time",
    "stdvar_over_time",
    "sum_over_time",
    "time",
    "timestamp",
    "vector",
    "year",
    // Keywords.
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "atan2",
    "inf",
    "nan",
];

/// Keywords followed by a parenthesized list of label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names `expr` reads, in order of appearance.
fn metric_names(expr: &str) -> Result<Vec<String>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_string(&chars, i)?,
            '{' => i = skip_group(&chars, i, '{', '}')?,
            '[' => i = skip_group(&chars, i, '[', ']')?,
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i = skip_group(&chars, i, '{', '}')?;
                } else {
                    while i < chars.len() && is_ident(chars[i]) {
                        i += 1;
                    }
                }
            }
            c if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_')
                {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while next < chars.len() && chars[next].is_whitespace() {
                    next += 1;
                }
                let called = chars.get(next) == Some(&'(');
                if LABEL_LISTS.contains(&word.as_str()) {
                    if called {
                        i = skip_group(&chars, next, '(', ')')?;
                    }
                } else if PROMQL_WORDS.contains(&word.as_str()) {
                } else if called {
                    return Err(format!("{word:?} is not a PromQL function, in {expr:?}"));
                } else {
                    names.push(word);
                }
            }
            _ => i += 1,
        }
    }
    Ok(names)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The index after the string literal opening at `start`.
fn skip_string(chars: &[char], start: usize) -> Result<usize, String> {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => i += 2,
            c if c == quote => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err("unterminated string".to_owned())
}

/// The index after the group opening at `start` (strings inside skipped).
fn skip_group(chars: &[char], start: usize, open: char, close: char) -> Result<usize, String> {
    let mut depth = 0;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => {
                i = skip_string(chars, i)?;
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err(format!("unclosed {open:?}"))
}

/// Series names of each family declared in an exposition, by family
/// name, from its `# TYPE` lines: a family declared twice has two entries.
fn declared(exposition: &str) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut families: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "gaugehistogram" => &["_gbucket", "_gsum", "_gcount"],
            "summary" => &["", "_sum", "_count"],
            "info" => &["_info"],
            _ => &[""],
        };
        let series = suffixes.iter().map(|s| format!("{name}{s}")).collect();
        families.entry(name.to_owned()).or_default().push(series);
    }
    families
}

/// The series names of sample lines.
fn sampled(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            l.split(['{', ' '])
                .next()
                .expect("a sample line has a name")
                .to_owned()
        })
        .collect()
}

/// Gives every labelled family of both processes a series, so that the
/// encoding declares it.
fn touch_every_family(proxy: &Metrics, coordinator: &CoordinatorMetrics) {
    let backend = BackendLabels {
        backend: "ns/svc:80".to_owned(),
    };
    proxy.record_request("ns/route", "ns/svc:80", http::StatusCode::OK);
    proxy.upstream_latency.get_or_create(&backend).observe(0.01);
    proxy.connect_errors.get_or_create(&backend).inc();
    proxy.connections_opened.get_or_create(&backend).inc();
    proxy.retries.get_or_create(&backend).inc();
    proxy.ejections.get_or_create(&backend).inc();
    proxy.healthy_endpoints.get_or_create(&backend).set(1);
    proxy.upstream_body_errors.get_or_create(&backend).inc();
    proxy
        .errors
        .get_or_create(&ErrorLabels {
            blame: "upstream".to_owned(),
            kind: "connect".to_owned(),
        })
        .inc();
    proxy
        .mirrors
        .get_or_create(&MirrorLabels {
            backend: backend.backend.clone(),
            result: "sent".to_owned(),
        })
        .inc();
    proxy.record_upgrade(&backend, UpgradeOutcome::Tunnelled);
    coordinator.set_live_proxies(&BTreeMap::from([("p1", "zone-a")]));
}

fn encode(registry: &prometheus_client::registry::Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("encodes");
    text
}

/// What the proxy and coordinator processes serve on `/metrics`, every
/// labelled family with a series.
fn expositions() -> Vec<(&'static str, String)> {
    let (dataplane, _control, proxy) = switchyard::cli::data_plane(DataPlaneSettings::default());
    let (metrics, coordinator) = switchyard::cli::coordinator_metrics();
    touch_every_family(dataplane.metrics(), &metrics);
    vec![
        ("proxy", encode(&proxy)),
        ("coordinator", encode(&coordinator)),
    ]
}

/// Every series name exported, and the families declared more than once
/// (their series are ambiguous: a query cannot tell which it reads).
fn exported() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut names = BTreeSet::new();
    let mut ambiguous = BTreeSet::new();
    for (process, text) in expositions() {
        let families = declared(&text);
        // The `# TYPE` reading agrees with the samples printed.
        let series: BTreeSet<String> = families.values().flatten().flatten().cloned().collect();
        for sample in sampled(&text) {
            assert!(
                series.contains(&sample),
                "{process}: sample {sample} has no # TYPE the reading understands"
            );
        }
        for (family, declarations) in families {
            if declarations.len() > 1 {
                ambiguous.extend(declarations[0].iter().cloned());
                eprintln!(
                    "{process}: {family} is declared {} times",
                    declarations.len()
                );
            }
            names.extend(declarations.into_iter().flatten());
        }
    }
    (names, ambiguous)
}

/// Why `expr` does not read only exported, unambiguous series, if it does
/// not.
fn check(
    expr: &str,
    exported: &BTreeSet<String>,
    ambiguous: &BTreeSet<String>,
) -> Result<(), String> {
    let names = metric_names(expr)?;
    if names.is_empty() {
        return Err(format!("{expr:?} reads no metric"));
    }
    for name in names {
        if !exported.contains(&name) {
            return Err(format!(
                "{name} is not exported (in {expr:?}; a new labelled family needs a series in \
                 touch_every_family to be seen)"
            ));
        }
        if ambiguous.contains(&name) {
            return Err(format!(
                "{name} is declared twice in one process (in {expr:?})"
            ));
        }
    }
    Ok(())
}

fn dashboard() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/switchyard.json");
    let text = std::fs::read_to_string(&path).expect("the dashboard exists");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every panel, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    let mut stack: Vec<&Value> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .collect();
    while let Some(panel) = stack.pop() {
        if let Some(nested) = panel["panels"].as_array() {
            stack.extend(nested);
        }
        out.push(panel);
    }
    out
}

#[test]
fn every_query_reads_only_metrics_the_binaries_export() {
    let (exported, ambiguous) = exported();
    let dashboard = dashboard();
    let mut exprs = 0;
    let mut used = BTreeSet::new();
    for panel in panels(&dashboard) {
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().expect("a panel has a title");
        let targets = panel["targets"].as_array().expect("a panel has targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for target in targets {
            let expr = target["expr"].as_str().expect("a target has an expr");
            if let Err(why) = check(expr, &exported, &ambiguous) {
                panic!("panel {title:?}: {why}");
            }
            used.extend(metric_names(expr).expect("checked"));
            exprs += 1;
        }
    }
    // The dashboard covers both processes, the brief's figures among them.
    for name in [
        "switchyard_proxy_requests_total",
        "switchyard_proxy_upstream_latency_seconds_bucket",
        "switchyard_proxy_downstream_connections",
        "switchyard_proxy_limit_hits_total",
        "switchyard_proxy_waiting_routes",
        "switchyard_coordinator_raft_term",
        "switchyard_coordinator_raft_leader",
        "switchyard_coordinator_pending_transitions",
        "switchyard_coordinator_cutover_commits_total",
        "switchyard_coordinator_decision_pass_seconds_bucket",
        "switchyard_coordinator_expired_proxies_total",
        "switchyard_coordinator_open_streams",
    ] {
        assert!(used.contains(name), "no panel shows {name}");
    }
    assert!(exprs >= 40, "{exprs} queries");
}

#[test]
fn the_dashboard_is_importable() {
    let dashboard = dashboard();
    let schema = dashboard["schemaVersion"].as_u64().expect("schemaVersion");
    assert!((36..=41).contains(&schema), "schemaVersion {schema}");
    assert_eq!(dashboard["uid"], "switchyard");
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a Prometheus data source variable"
    );
    let mut ids = BTreeSet::new();
    for panel in panels(&dashboard) {
        let id = panel["id"].as_u64().expect("a panel id");
        assert!(ids.insert(id), "panel id {id} twice");
        let grid = &panel["gridPos"];
        for field in ["h", "w", "x", "y"] {
            assert!(grid[field].is_u64(), "panel {id}: gridPos.{field}");
        }
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "panel {id}");
        for target in panel["targets"].as_array().expect("targets") {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "panel {id}");
        }
    }
}

#[test]
fn a_labelled_family_without_series_is_not_printed_so_each_is_touched() {
    let (_dataplane, _control, fresh) = switchyard::cli::data_plane(DataPlaneSettings::default());
    let fresh = encode(&fresh);
    // Nothing served yet: not even the `# TYPE` line.
    assert!(!fresh.contains("switchyard_proxy_requests"), "{fresh}");
    assert!(!fresh.contains("switchyard_proxy_upstream_latency_seconds"));
    // Families created at registration are printed.
    assert!(fresh.contains("# TYPE switchyard_proxy_limit_hits counter"));
    let (_, touched) = &expositions()[0];
    assert!(touched.contains("# TYPE switchyard_proxy_requests counter"));
    assert!(touched.contains("# TYPE switchyard_proxy_upstream_latency_seconds histogram"));
}

#[test]
fn the_checker_rejects_what_is_not_exported() {
    let (exported, ambiguous) = exported();
    let ok = |expr: &str| check(expr, &exported, &ambiguous);
    // A made-up name, and real families under the wrong series name.
    assert!(ok("sum(rate(switchyard_proxy_made_up_total[5m]))").is_err());
    assert!(
        ok("rate(switchyard_proxy_requests[5m])").is_err(),
        "counter without _total"
    );
    assert!(
        ok("switchyard_proxy_upstream_latency_seconds").is_err(),
        "bare histogram"
    );
    assert!(
        ok("switchyard_coordinator_raft_term_total").is_err(),
        "gauge with _total"
    );
    assert!(ok("nonexistent_function(switchyard_coordinator_raft_term)").is_err());
    assert!(ok("sum by (route) (vector(1))").is_err(), "reads no metric");
    // Labels, ranges, variables, strings and label lists are not names.
    let expr = r#"histogram_quantile(0.99, sum by (le, backend) (rate(switchyard_proxy_upstream_latency_seconds_bucket{backend=~"a}b.*", le!="+Inf"}[$__rate_interval] offset 5m)))"#;
    assert_eq!(
        metric_names(expr).unwrap(),
        ["switchyard_proxy_upstream_latency_seconds_bucket"]
    );
    assert!(ok(expr).is_ok());
    assert_eq!(
        metric_names("max by (instance) (a - b) / on (instance) group_left (zone) c > bool 1e3")
            .unwrap(),
        ["a", "b", "c"]
    );
    assert!(ok("switchyard_coordinator_decision_pass_seconds_sum / switchyard_coordinator_decision_pass_seconds_count").is_ok());
}

#[test]
fn no_metric_family_is_declared_twice() {
    let (_, ambiguous) = exported();
    assert!(
        ambiguous.is_empty(),
        "families exported twice in one process: {ambiguous:?}"
    );
}
