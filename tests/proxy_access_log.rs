//! `switchyard proxy --access-log FILE` as a real process: a request gets
//! its JSON line, the dropped-lines counter is on `/metrics`, and a
//! SIGTERM stops the proxy cleanly with every line in the file.

mod support;

use std::time::Duration;
use support::{BIN, fixed_proxy_args};
use switchyard::demo::manifests;
use switchyard_harness::{Process, ProcessSpec, http_get};

#[test]
fn a_stopped_proxy_leaves_every_line_in_its_access_log() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // Route demo/app sends everything to Service demo/blue, which has no
    // endpoints: 503, with the route and backend known.
    let log = dir.path().join("access.json");
    let args = fixed_proxy_args(dir.path(), &["--access-log", &log.to_string_lossy()]);
    let mut proxy = Process::start(ProcessSpec::new("proxy-p1", BIN, args))?;
    let listener = proxy.address(&manifests::GATEWAY_PORT.to_string())?;
    let answer = http_get(&listener, "/hello")?;
    assert!(answer.contains("no ready endpoint"), "{answer}");
    let metrics = http_get(&proxy.address("admin")?, "/metrics")?;
    assert!(
        metrics.contains("switchyard_proxy_access_log_dropped_total 0"),
        "{metrics}"
    );

    // Flushed at the stop, not a second later.
    assert_eq!(proxy.terminate(Duration::from_secs(20)), Some(0));
    let text = std::fs::read_to_string(&log)?;
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(lines.len(), 1, "{text}");
    let line = &lines[0];
    assert_eq!(
        line["listener"],
        manifests::GATEWAY_PORT.to_string(),
        "{line}"
    );
    assert_eq!(line["route"], "demo/app", "{line}");
    assert_eq!(line["backend"], "demo/blue:80", "{line}");
    assert_eq!(line["status"], 503, "{line}");
    assert_eq!(line["path"], "/hello", "{line}");
    assert_eq!(line["error"]["kind"], "no_ready_endpoint", "{line}");
    assert!(proxy.warnings().is_empty(), "{:?}", proxy.warnings());
    Ok(())
}
