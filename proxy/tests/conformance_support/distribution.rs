//! The distribution phases of the conformance data: `HTTPRouteWeight`
//! (share of each backend within a tolerance) and
//! `HTTPRouteRequestPercentageMirror` (mirror counts within a binomial
//! band), each retried up to the file's `max_attempts`.

use crate::judge;
use crate::support::client::{Conn, Reply};
use crate::support::eventually;
use crate::{FileCtx, build_request, request_id};
use anyhow::{Context, Result, anyhow, ensure};
use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Sends `total` requests, `concurrency` at a time on keep-alive
/// connections; `make` builds each request.
async fn load<F>(addr: SocketAddr, total: usize, concurrency: usize, make: F) -> Result<Vec<Reply>>
where
    F: Fn() -> Result<Request<Full<Bytes>>> + Send + Sync + 'static,
{
    let make = Arc::new(make);
    let mut workers = Vec::new();
    for w in 0..concurrency {
        let make = Arc::clone(&make);
        let share = total / concurrency + usize::from(w < total % concurrency);
        workers.push(tokio::spawn(async move {
            let mut replies = Vec::with_capacity(share);
            let mut conn = Conn::connect(addr).await?;
            for _ in 0..share {
                let reply = conn.send(make()?).await?;
                if reply.closes() {
                    conn = Conn::connect(addr).await?;
                }
                replies.push(reply);
            }
            Ok::<_, anyhow::Error>(replies)
        }));
    }
    let mut all = Vec::with_capacity(total);
    for w in workers {
        all.extend(w.await??);
    }
    Ok(all)
}

/// `HTTPRouteWeight`: the share of each backend within the tolerance, and
/// only backends with weight get traffic.
pub(crate) async fn weight(ctx: &FileCtx, dist: &Value) -> Result<()> {
    let request = dist["request"].clone();
    let addr = ctx.addr(&request)?;
    let total = usize::try_from(dist["total_requests"].as_u64().unwrap_or(500))?;
    let concurrency = usize::try_from(dist["concurrency"].as_u64().unwrap_or(10))?;
    let tolerance = dist["tolerance_abs"].as_f64().unwrap_or(0.05);
    let attempts = dist["max_attempts"].as_u64().unwrap_or(10);
    let fractions = dist["expected_fractions"]
        .as_object()
        .context("expected_fractions")?
        .clone();
    let mut last = anyhow!("no attempt made");
    for _ in 0..attempts {
        let request = request.clone();
        let replies = load(addr, total, concurrency, move || {
            let mut req = request.clone();
            if rand::random::<bool>() {
                req["headers"] = serde_json::json!({
                    "X-Jitter": rand::random_range(0..10_000u32).to_string()
                });
            }
            Ok(build_request(&req, addr, None)?.0)
        })
        .await?;
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for reply in &replies {
            ensure!(reply.status == 200, "status {}", reply.status);
            let pod = reply.pod()?;
            let parts: Vec<&str> = pod.split('-').collect();
            let backend = parts[..parts.len().saturating_sub(2)].join("-");
            *counts.entry(backend).or_default() += 1;
        }
        let check = || -> Result<()> {
            for (backend, want) in &fractions {
                let want = want.as_f64().unwrap_or(0.0);
                let got = counts.get(backend).copied().unwrap_or(0) as f64 / total as f64;
                ensure!(
                    (got - want).abs() <= tolerance,
                    "{backend}: {got:.3} of requests, want {want} ± {tolerance}; counts {counts:?}"
                );
                if want == 0.0 {
                    ensure!(got == 0.0, "{backend} has weight 0 but got traffic");
                }
            }
            for backend in counts.keys() {
                ensure!(
                    fractions.contains_key(backend),
                    "unexpected backend {backend} got traffic"
                );
            }
            Ok(())
        };
        match check() {
            Ok(()) => return Ok(()),
            Err(error) => last = error,
        }
    }
    Err(last)
}

/// `HTTPRouteRequestPercentageMirror`: mirror counts within the binomial
/// band, every primary answer as the case expects.
pub(crate) async fn mirror(ctx: &FileCtx, case: &Value, dist: &Value) -> Result<()> {
    let request = case["request"].clone();
    let expected = case["expected"].clone();
    let path = request["path"].as_str().context("path")?.to_owned();
    let band = &dist["bands"][&path];
    let min = band["min_count"].as_f64().context("band.min_count")?;
    let max = band["max_count"].as_f64().context("band.max_count")?;
    let mirror = &expected["mirrored_to"][0];
    let target = format!(
        "{}/{}",
        mirror["namespace"].as_str().unwrap_or_default(),
        mirror["backend"].as_str().unwrap_or_default()
    );
    let total = usize::try_from(dist["total_requests"].as_u64().unwrap_or(500))?;
    let concurrency = usize::try_from(dist["concurrency"].as_u64().unwrap_or(10))?;
    let attempts = dist["max_attempts"].as_u64().unwrap_or(5);
    let addr = ctx.addr(&request)?;
    let mut last = anyhow!("no attempt made");
    for _ in 0..attempts {
        let id = request_id();
        let (_, sent_path, host) = build_request(&request, addr, Some(&id))?;
        let req_value = request.clone();
        let id_for_load = id.clone();
        let replies = load(addr, total, concurrency, move || {
            Ok(build_request(&req_value, addr, Some(&id_for_load))?.0)
        })
        .await?;
        for reply in &replies {
            judge::judge(&request, &expected, reply, &sent_path, host.as_deref())?;
        }
        let dp = Arc::clone(&ctx.proxy.dp);
        eventually("mirrors finished", Duration::from_secs(10), || {
            let dp = Arc::clone(&dp);
            async move {
                ensure!(dp.mirrors_in_flight() == 0, "mirrors in flight");
                Ok(())
            }
        })
        .await
        .unwrap();
        let count = ctx.mirror_count(&target, &sent_path) as f64;
        if (min..=max).contains(&count) {
            return Ok(());
        }
        last = anyhow!("{count} mirrored of {total}, want {min:.0}..={max:.0}");
    }
    Err(last)
}
