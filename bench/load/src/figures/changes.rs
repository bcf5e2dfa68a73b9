//! Single-route changes, one after the other, on route 0 (policy `all`):
//! their apply → Ready latency, and what they cost the coordinators in
//! CPU.
//!
//! Latency: from sending the Apply to the leader's `WatchStatus` showing
//! the route Ready at the generation the apply gave it (every live proxy
//! serves it), and apart from it the apply's own reply (its commit). CPU: a separate pass without any status stream (building
//! statuses of every route would be the tool's cost, growing with the
//! store): each change is applied and waited for until no transition is
//! pending on the leader and its applied index is past the apply's (its
//! `/metrics`), and the utime+stime all three
//! coordinators spent meanwhile, less what they spend idle with the same
//! agents over as long, is divided by the number of changes.

use super::Context;
use crate::admin;
use crate::cluster::ProcStats;
use crate::report::{ApplyToReady, Latencies};
use crate::routes::{self, Variant};
use anyhow::bail;
use std::time::{Duration, Instant};
use switchyard_proto::model::ClusterStatus;

/// The route every change goes to.
const PROBE: usize = 0;

/// `count` changes' apply → Ready latencies, with their applies' replies.
pub async fn latencies(ctx: &mut Context, count: usize) -> anyhow::Result<ApplyToReady> {
    let name = routes::route_name(PROBE);
    let mut client = admin::client(&ctx.leader, &ctx.security)?;
    let mut ready = Vec::with_capacity(count);
    let mut committed = Vec::with_capacity(count);
    for _ in 0..count {
        let json = admin::encode(&routes::update(
            PROBE,
            Variant::Header(ctx.next_change()),
            ctx.endpoints,
        )?)?;
        let t0 = Instant::now();
        let reply = admin::apply(&mut client, json).await?;
        committed.push(t0.elapsed());
        let Some(generation) = admin::generation_of(&reply, &name) else {
            bail!(
                "the apply of {name} gave it no generation: {:?}",
                reply.changes
            );
        };
        ctx.updates += 1;
        let only = std::slice::from_ref(&name);
        admin::watch_until(
            &ctx.leader,
            &ctx.security,
            ctx.wait,
            Some(only),
            |s: &ClusterStatus| {
                s.routes
                    .iter()
                    .any(|r| r.name == name && admin::ready_at(r, generation))
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("{name} not Ready at generation {generation}: {e}"))?;
        ready.push(t0.elapsed());
    }
    // In order: where the slowest fell (the first change after a phase,
    // or one amid the leader's own work) says what to look at.
    let in_order: Vec<String> = ready
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64() * 1000.0))
        .collect();
    ctx.notes.push(format!(
        "apply → Ready of each change, in order (ms): {}",
        in_order.join(", ")
    ));
    Ok(ApplyToReady {
        ready: Latencies::of(ready),
        committed: Latencies::of(committed),
    })
}

fn cpu(ctx: &Context) -> f64 {
    ctx.cluster
        .members
        .iter()
        .map(|m| m.stats())
        .map(|s: ProcStats| s.cpu_seconds)
        .sum()
}

/// Waits until the leader's `/metrics` shows no pending transition at an
/// applied index at or past `after`, the apply's own entry (the gauges
/// are refreshed together from one published state, once per driver
/// tick: at `after` itself, no pending transition means the apply's entry
/// carried its commit; a read before the apply's entry cannot pass).
pub async fn until_committed(ctx: &Context, after: u64, within: Duration) -> anyhow::Result<()> {
    let admin = ctx
        .cluster
        .member(&ctx.leader)
        .map(|m| m.admin.clone())
        .ok_or_else(|| anyhow::anyhow!("the leader {} was not started here", ctx.leader))?;
    let deadline = Instant::now() + within;
    loop {
        let a = admin.clone();
        let m = tokio::task::spawn_blocking(move || crate::cluster::metrics(&a))
            .await?
            .unwrap_or_default();
        let pending = m.get("switchyard_coordinator_pending_transitions").copied();
        let applied = m
            .get("switchyard_coordinator_raft_applied_index")
            .copied()
            .unwrap_or(0.0);
        if pending == Some(0.0) && applied >= after as f64 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "not committed on the leader within {within:?} (pending {pending:?}, applied index {applied}, waiting past {after})"
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// CPU seconds per change, over `count` changes.
pub async fn cpu_per_change(ctx: &mut Context, count: usize) -> anyhow::Result<f64> {
    if !ctx.cluster.started() {
        bail!("needs coordinators started by this tool (their /proc)");
    }
    // What the coordinators spend with nothing applied: heartbeats and
    // reports of the same agents.
    until_committed(ctx, 0, ctx.wait).await?;
    let idle_for = Duration::from_secs(1);
    let c0 = cpu(ctx);
    tokio::time::sleep(idle_for).await;
    let idle_rate = (cpu(ctx) - c0) / idle_for.as_secs_f64();
    let mut client = admin::client(&ctx.leader, &ctx.security)?;
    let mut payloads = Vec::with_capacity(count);
    for _ in 0..count {
        payloads.push(admin::encode(&routes::update(
            PROBE,
            Variant::Header(ctx.next_change()),
            ctx.endpoints,
        )?)?);
    }
    let t0 = Instant::now();
    let c1 = cpu(ctx);
    for json in payloads {
        let reply = admin::apply(&mut client, json).await?;
        ctx.updates += 1;
        until_committed(ctx, reply.log_index, ctx.wait).await?;
    }
    let spent = cpu(ctx) - c1 - idle_rate * t0.elapsed().as_secs_f64();
    Ok(spent.max(0.0) / count.max(1) as f64)
}
