//! How the Gateway API suite judges one case (`conformance/utils/http`),
//! as the shared README states it: status; then, for 200s, backend pod,
//! namespace and the request the backend saw; response headers; redirect
//! `Location`; mirrors.

use crate::support::client::Reply;
use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

/// A case's `expected` block, applied to a reply. `sent_path` is the path
/// actually sent (with the request id, if any); `sent_host` the Host sent
/// when the case set one.
pub fn judge(
    request: &Value,
    expected: &Value,
    reply: &Reply,
    sent_path: &str,
    sent_host: Option<&str>,
) -> Result<()> {
    let want_status = expected["status"].as_u64().context("expected.status")?;
    ensure!(
        u64::from(reply.status.as_u16()) == want_status,
        "status {} (want {want_status}); reason {:?}; body {:?}",
        reply.status,
        reply.headers.get("x-switchyard-reason"),
        String::from_utf8_lossy(&reply.body)
    );
    if want_status == 200 {
        judge_backend(request, expected, reply, sent_path, sent_host)?;
    }
    if let Some(headers) = expected["response_headers"].as_object() {
        for (name, want) in headers {
            let got = joined(reply.headers.get_all(name.as_str()).iter());
            ensure!(
                got.as_deref() == want.as_str(),
                "response header {name}: {got:?} (want {want})"
            );
        }
    }
    if let Some(absent) = expected["absent_response_headers"].as_array() {
        for name in absent.iter().filter_map(Value::as_str) {
            ensure!(
                !reply.headers.contains_key(name),
                "response header {name} must be absent"
            );
        }
    }
    if expected["redirect"].is_object() {
        judge_redirect(&expected["redirect"], reply)?;
    }
    Ok(())
}

fn joined<'a>(values: impl Iterator<Item = &'a http::HeaderValue>) -> Option<String> {
    let parts: Vec<String> = values
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

/// The echo body's header values for `name`, case-insensitively, joined.
fn echo_header(echo: &Value, name: &str) -> Option<String> {
    let headers = echo["headers"].as_object()?;
    let values: Vec<String> = headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        .flat_map(|(_, v)| v.as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

fn judge_backend(
    request: &Value,
    expected: &Value,
    reply: &Reply,
    sent_path: &str,
    sent_host: Option<&str>,
) -> Result<()> {
    let echo = reply.json()?;
    if let Some(backend) = expected["backend"].as_str() {
        let pod = echo["pod"].as_str().unwrap_or_default();
        ensure!(
            pod.starts_with(backend),
            "answered by pod {pod:?}, want a pod of {backend}"
        );
    }
    if let Some(namespace) = expected["namespace"].as_str() {
        ensure!(
            echo["namespace"].as_str() == Some(namespace),
            "answered from namespace {:?}, want {namespace}",
            echo["namespace"]
        );
    }
    let got_path = echo["path"].as_str().unwrap_or_default();
    let got_host = echo["host"].as_str().unwrap_or_default();
    let backend_request = &expected["backend_request"];
    if backend_request.is_object() {
        let mut want_path = backend_request["path"]
            .as_str()
            .context("backend_request.path")?
            .to_owned();
        if let Some((_, id)) = sent_path.split_once('?')
            && !want_path.contains('?')
            && id.starts_with("gateway-api-conformance-request-id=")
        {
            want_path = format!("{want_path}?{id}");
        }
        ensure!(
            got_path == want_path,
            "backend saw path {got_path:?}, want {want_path:?}"
        );
        if let Some(host) = backend_request["host"].as_str() {
            ensure!(
                got_host == host,
                "backend saw Host {got_host:?}, want {host:?}"
            );
        }
        if let Some(headers) = backend_request["headers"].as_object() {
            for (name, want) in headers {
                let got = echo_header(&echo, name);
                ensure!(
                    got.as_deref() == want.as_str(),
                    "backend saw header {name}: {got:?}, want {want}"
                );
            }
        }
        if let Some(absent) = backend_request["absent_headers"].as_array() {
            for name in absent.iter().filter_map(Value::as_str) {
                ensure!(
                    echo_header(&echo, name).is_none(),
                    "backend saw header {name}, which must be absent"
                );
            }
        }
    } else {
        ensure!(
            got_path == sent_path,
            "backend saw path {got_path:?}, want it unchanged {sent_path:?}"
        );
        let method = request["method"].as_str().unwrap_or("GET");
        ensure!(
            echo["method"].as_str() == Some(method),
            "backend saw method {:?}, want {method}",
            echo["method"]
        );
        if let Some(headers) = request["headers"].as_object() {
            for (name, want) in headers {
                let got = echo_header(&echo, name);
                ensure!(
                    got.as_deref() == want.as_str(),
                    "backend saw header {name}: {got:?}, want it unchanged {want}"
                );
            }
        }
        if let Some(host) = sent_host {
            ensure!(
                got_host == host,
                "backend saw Host {got_host:?}, want it unchanged {host:?}"
            );
        }
    }
    Ok(())
}

fn judge_redirect(redirect: &Value, reply: &Reply) -> Result<()> {
    let location = reply
        .headers
        .get(http::header::LOCATION)
        .context("no Location header")?
        .to_str()?;
    let uri: http::Uri = location
        .parse()
        .with_context(|| format!("Location {location:?}"))?;
    let scheme = uri.scheme_str().unwrap_or_default();
    if let Some(want) = redirect["scheme"].as_str() {
        ensure!(
            scheme == want,
            "Location {location}: scheme {scheme:?}, want {want}"
        );
    }
    if let Some(want) = redirect["host"].as_str() {
        ensure!(
            uri.host() == Some(want),
            "Location {location}: host {:?}, want {want}",
            uri.host()
        );
    }
    if let Some(want) = redirect["path"].as_str() {
        ensure!(
            uri.path() == want,
            "Location {location}: path {:?}, want {want}",
            uri.path()
        );
    }
    let port = uri.port_u16();
    match redirect["port"].as_str() {
        Some(want) => ensure!(
            port.map(|p| p.to_string()).as_deref() == Some(want),
            "Location {location}: port {port:?}, want {want}"
        ),
        None => {
            let default = match scheme {
                "https" => 443,
                _ => 80,
            };
            if let Some(p) = port
                && p != default
            {
                bail!("Location {location}: port {p}, want none or {default}");
            }
        }
    }
    Ok(())
}
