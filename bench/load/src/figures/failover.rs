//! Leader kill: with transitions pending, SIGKILL the leader (by PID) and
//! time, from the moment a survivor reports itself leader, until no
//! transition is pending any more (every one committed).
//!
//! To have transitions pending at the kill, the agents hold their
//! evidence back while `count` routes move to fresh Services (each with
//! its own slice, applied together with the route); the hold is released
//! at the kill, so the evidence reaches whoever leads next — the new
//! leader learns it from the agents, as it would from real proxies. The
//! election is seen through the survivors' `/metrics` (`raft_is_leader`,
//! refreshed once per coordinator tick) and "nothing pending" through the
//! new leader's, confirmed by its Status (every moved route active at its
//! new generation).

use super::Context;
use crate::admin;
use crate::agent::Fleet;
use crate::cluster::{labelled, scrape};
use crate::report::Failover;
use crate::routes::{self, Variant};
use anyhow::bail;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Moves routes `first..first + count` to fresh backends, kills the
/// leader, and measures.
pub async fn run(
    ctx: &mut Context,
    fleet: &Fleet,
    first: usize,
    count: usize,
) -> anyhow::Result<Failover> {
    if !ctx.cluster.started() {
        bail!("needs coordinators started by this tool (to kill one by PID)");
    }
    fleet.hold_evidence(true);
    let mut client = admin::client(&ctx.leader, &ctx.security)?;
    let mut targets = BTreeMap::new();
    for i in first..first + count {
        let n = ctx.next_change();
        let reply = admin::apply(
            &mut client,
            admin::encode(&routes::update(i, Variant::Fresh(n), ctx.endpoints)?)?,
        )
        .await?;
        ctx.updates += 1;
        let name = routes::route_name(i);
        let g = admin::generation_of(&reply, &name)
            .ok_or_else(|| anyhow::anyhow!("the apply of {name} gave it no generation"))?;
        targets.insert(name, g);
    }
    // Every one is pending (held back) before the kill.
    let only: Vec<String> = targets.keys().cloned().collect();
    admin::watch_until(&ctx.leader, &ctx.security, ctx.wait, Some(&only), |s| {
        targets.iter().all(|(name, g)| {
            s.routes
                .iter()
                .any(|r| &r.name == name && r.pending_generation == Some(*g))
        })
    })
    .await
    .map_err(|e| anyhow::anyhow!("the moved routes never showed pending: {e}"))?;
    let old = ctx.leader.clone();
    let survivors: Vec<(String, String)> = ctx
        .cluster
        .members
        .iter()
        .filter(|m| m.grpc != old)
        .map(|m| (m.grpc.clone(), m.admin.clone()))
        .collect();
    let killed = ctx
        .cluster
        .member_mut(&old)
        .ok_or_else(|| anyhow::anyhow!("the leader {old} was not started here"))?;
    let t_kill = Instant::now();
    killed.process.kill();
    fleet.hold_evidence(false);
    let deadline = t_kill + ctx.wait;
    // A survivor that says it leads.
    let (new_grpc, new_admin, t_elected) = 'elected: loop {
        for (grpc, admin) in &survivors {
            if scrape(admin.clone())
                .await
                .get("switchyard_coordinator_raft_is_leader")
                == Some(&1.0)
            {
                break 'elected (grpc.clone(), admin.clone(), Instant::now());
            }
        }
        if Instant::now() >= deadline {
            bail!(
                "no survivor became leader within {:?} of the kill",
                ctx.wait
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    ctx.leader = new_grpc;
    let mut new_client = admin::client(&ctx.leader, &ctx.security)?;
    loop {
        let m = scrape(new_admin.clone()).await;
        let seen = Instant::now();
        if m.get("switchyard_coordinator_pending_transitions") == Some(&0.0)
            && m.get("switchyard_coordinator_raft_is_leader") == Some(&1.0)
        {
            let status = admin::status(&mut new_client, Some(&only)).await?;
            let all = targets.iter().all(|(name, g)| {
                status
                    .routes
                    .iter()
                    .any(|r| &r.name == name && admin::committed_at(r, *g))
            });
            if all {
                let admin = new_admin.clone();
                let sets = tokio::task::spawn_blocking(move || {
                    labelled(&admin, "switchyard_coordinator_proxy_sets_total")
                })
                .await
                .unwrap_or_default();
                return Ok(Failover {
                    pending: targets.len(),
                    election: t_elected - t_kill,
                    committed: seen - t_elected,
                    sets,
                });
            }
        }
        if Instant::now() >= deadline {
            bail!("transitions still pending {:?} after the kill", ctx.wait);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
