//! One run: the phases in order, each producing its figure (or why not).
//!
//! 1. Reference (started clusters only): the first `cpu_reference_routes`
//!    routes, a first fleet of agents, warm; CPU per single-route change.
//!    The fleet deregisters.
//! 2. Bulk apply of the remaining routes in applies of `batch` objects.
//! 3. Full resync: a fresh fleet of M agents from empty; per agent the
//!    time from its Watch call to a complete configuration at the version
//!    current when it started. Then every route Ready on every agent.
//! 4. Apply → Ready of K changes to one route; CPU per change at N.
//! 5. Coordinator memory with N routes and M watchers.
//! 6. Committed updates per second, many clients.
//! 7. Data directory after every update so far ÷ live state.
//! 8. Optionally, the acceptance sequence through three real proxies.
//! 9. Leader kill with transitions pending (last: it kills a coordinator).
//!
//! Every wait is bounded by `wait`; every process started is killed when
//! the cluster is dropped.

mod acceptance;
mod changes;
mod failover;
mod throughput;

use crate::agent::Fleet;
use crate::cluster::{Cluster, disk_usage, proc_stats};
use crate::report::{Bulk, Cpu, Disk, Latencies, Memory, Report, Resync};
use crate::{Options, admin, routes};
use anyhow::{Context as _, bail};
use std::time::{Duration, Instant};
use switchyard_proto::model::Resource;
use switchyard_tls::{Identity, Security};

/// What the phases share.
pub struct Context {
    /// The cluster.
    pub cluster: Cluster,
    /// The admin client's security.
    pub security: Security,
    /// The leader's gRPC address, as last found.
    pub leader: String,
    /// Bound of every wait.
    pub wait: Duration,
    /// Single-route updates committed so far.
    pub updates: u64,
    /// Counter that makes every change's spec new.
    change: u64,
    /// Where generated EndpointSlices point.
    pub endpoints: routes::Endpoints,
    /// Remarks for under the table.
    pub notes: Vec<String>,
    /// The agents' decode counters (decoded, shared) when the last
    /// catch-up ended.
    decodes_noted: (u64, u64),
}

impl Context {
    /// A number no change used before.
    pub fn next_change(&mut self) -> u64 {
        self.change += 1;
        self.change
    }
}

/// Says on stderr which phase starts (a goal-size run takes minutes).
fn progress(phase: &str) {
    eprintln!("switchyard-load: {phase}");
}

/// Finds the leader again before a phase: under load elections happen,
/// and a follower without a leader refuses writes. A note says when it
/// moved.
async fn refresh_leader(ctx: &mut Context) {
    match admin::leader(&ctx.cluster.addresses, &ctx.security, None, ctx.wait).await {
        Ok(leader) if leader != ctx.leader => {
            ctx.notes.push(format!(
                "the leader moved from {} to {leader} during the run",
                ctx.leader
            ));
            ctx.leader = leader;
        }
        Ok(_) => {}
        Err(e) => ctx
            .notes
            .push(format!("no leader found before a phase: {e:#}")),
    }
}

fn failed<T>(e: anyhow::Error) -> Result<T, String> {
    Err(format!("failed: {e:#}"))
}

/// Applies `resources` in applies of at most `batch` objects.
async fn bulk(ctx: &Context, resources: &[Resource], batch: usize) -> anyhow::Result<Bulk> {
    let payloads = routes::batches(resources, batch)
        .into_iter()
        .map(admin::encode)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut client = admin::client(&ctx.leader, &ctx.security)?;
    let applies = payloads.len();
    let start = Instant::now();
    for json in payloads {
        admin::apply(&mut client, json).await?;
    }
    Ok(Bulk {
        objects: resources.len(),
        applies,
        elapsed: start.elapsed(),
    })
}

/// Waits until the leader counts `agents` live proxies (those of `prefix`)
/// and every route is committed (with coordinators started here: the
/// leader's `pending_transitions` gauge is 0; agents apply a commit as
/// soon as they see it) or, on a cluster it only connects to, Ready.
/// Polls once a second, with a status of no route rows where it can: a
/// status of every route on every proxy costs the leader O(routes ×
/// proxies), and at the goal size a stream of them would be the leader's
/// largest cost while the agents warm.
async fn warm(ctx: &Context, prefix: &str, agents: usize) -> anyhow::Result<()> {
    let prefix = format!("{prefix}-");
    let deadline = Instant::now() + ctx.wait;
    let mut client = admin::client(&ctx.leader, &ctx.security)?;
    let gauges = ctx.cluster.member(&ctx.leader).map(|m| m.admin.clone());
    loop {
        let rows = if gauges.is_some() {
            Some(&[][..])
        } else {
            None
        };
        let last = match admin::status(&mut client, rows).await {
            Ok(s) => {
                let live = s
                    .proxies
                    .iter()
                    .filter(|p| p.live && p.id.starts_with(&prefix))
                    .count();
                let (settled, what) = match &gauges {
                    Some(admin) => {
                        let a = admin.clone();
                        let pending =
                            tokio::task::spawn_blocking(move || crate::cluster::metrics(&a))
                                .await?
                                .and_then(|m| {
                                    m.get("switchyard_coordinator_pending_transitions").copied()
                                });
                        (pending == Some(0.0), format!("{pending:?} pending"))
                    }
                    None => {
                        let ready = s.routes.iter().filter(|r| r.ready).count();
                        (
                            ready == s.routes.len(),
                            format!("{ready} of {} routes Ready", s.routes.len()),
                        )
                    }
                };
                if live == agents && settled {
                    return Ok(());
                }
                format!("{live} of {agents} live, {what}")
            }
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() >= deadline {
            bail!(
                "agents {prefix}* never all live with every route settled within {:?}: {last}",
                ctx.wait
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits (bounded) until the leader's status shows the last of the `n`
/// routes Ready — every live agent's applied set, with the bootstrap's
/// commit of every route, taken by the leader — and says in a note how
/// long that took. The agents hold the commit well before: at 10,000
/// routes and 200 agents the leader then still takes 200 heartbeats of
/// 10,000 changed generations each, and a single-route change made
/// meanwhile measures that, not the steady state. One status row:
/// O(proxies) per status.
async fn leader_settled(ctx: &mut Context, n: usize, after: &str) {
    let Some(last) = n.checked_sub(1) else {
        return;
    };
    let name = routes::route_name(last);
    let started = Instant::now();
    let only = std::slice::from_ref(&name);
    let settled = admin::watch_until(
        &ctx.leader,
        &ctx.security,
        ctx.wait,
        Some(only),
        |s: &switchyard_proto::model::ClusterStatus| {
            s.routes.iter().any(|r| r.name == name && r.ready)
        },
    )
    .await;
    ctx.notes.push(match settled {
        Ok(_) => format!(
            "after {after}: the leader had every agent's applied generations {:.2} s later",
            started.elapsed().as_secs_f64()
        ),
        Err(e) => format!("after {after}: the leader never showed {name} Ready: {e:#}"),
    });
}

/// Waits (bounded by `ctx.wait`) until this process — the agents, on the
/// coordinators' cores — spends under a tenth of a core for
/// [`SETTLED_FOR`], and says in a note how long that took. After the
/// resync's 9,900 commits the agents diff their 10,000-entry maps for
/// a while after the leader shows the last route Ready, and a change
/// made meanwhile measures the tool competing with the coordinators for
/// this machine's cores, not the steady state the figure is about.
async fn agents_settled(ctx: &mut Context, after: &str) {
    let started = Instant::now();
    let own = std::process::id() as i32;
    let cpu = || proc_stats(own).map(|s| s.cpu_seconds);
    let mut quiet_since: Option<Instant> = None;
    let mut last = cpu();
    let settled = loop {
        tokio::time::sleep(SETTLED_SAMPLE).await;
        let now = cpu();
        let (Ok(before), Ok(after_sample)) = (&last, &now) else {
            break Err("cannot read this process's CPU time from /proc".to_string());
        };
        if after_sample - before < SETTLED_SAMPLE.as_secs_f64() / 10.0 {
            let since = *quiet_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= SETTLED_FOR {
                break Ok(());
            }
        } else {
            quiet_since = None;
        }
        if started.elapsed() >= ctx.wait {
            break Err(format!("still busy after {:?}", ctx.wait));
        }
        last = now;
    };
    ctx.notes.push(match settled {
        Ok(()) => format!(
            "after {after}: the agents were idle (under a tenth of a core) {:.2} s later",
            started.elapsed().as_secs_f64()
        ),
        Err(e) => format!("after {after}: the agents never settled: {e}"),
    });
}

/// How often [`agents_settled`] reads this process's CPU time.
const SETTLED_SAMPLE: Duration = Duration::from_millis(100);

/// How long the agents must stay idle to count as settled.
const SETTLED_FOR: Duration = Duration::from_millis(300);

/// Waits (bounded) until every coordinator started here has applied
/// `target`, and says in a note where each stood and how long that took.
/// The resync is measured against a store every coordinator holds: right
/// after the bulk apply a follower may still be applying its last
/// entries (a thousand objects each), and agents that start watching it
/// then would be sent its snapshots of the import's tail, one version
/// after another, rather than the resync of a settled store the figure
/// is about.
async fn all_applied(ctx: &mut Context, target: u64, after: &str) {
    let admins: Vec<(u64, String)> = ctx
        .cluster
        .members
        .iter()
        .map(|m| (m.id, m.admin.clone()))
        .collect();
    if admins.is_empty() {
        return;
    }
    let applied = async |admins: &[(u64, String)]| -> Vec<(u64, u64)> {
        let mut out = Vec::with_capacity(admins.len());
        for (id, admin) in admins {
            let index = crate::cluster::scrape(admin.clone())
                .await
                .get("switchyard_coordinator_raft_applied_index")
                .copied()
                .unwrap_or(0.0);
            out.push((*id, index as u64));
        }
        out
    };
    let started = Instant::now();
    let at_start = applied(&admins).await;
    let deadline = started + ctx.wait;
    let mut now = at_start.clone();
    while now.iter().any(|(_, index)| *index < target) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        now = applied(&admins).await;
    }
    let stood: Vec<String> = at_start
        .iter()
        .map(|(id, index)| format!("{id}: {index}"))
        .collect();
    let done = now.iter().all(|(_, index)| *index >= target);
    ctx.notes.push(format!(
        "after {after}: coordinators had applied {} of {target}; {} {:.2} s later",
        stood.join(", "),
        if done { "all of it" } else { "not all of it" },
        started.elapsed().as_secs_f64()
    ));
}

/// The current applied index on the leader.
async fn applied_index(ctx: &Context) -> anyhow::Result<u64> {
    let mut c = admin::client(&ctx.leader, &ctx.security)?;
    Ok(admin::status(&mut c, Some(&[])).await?.applied_index)
}

/// Waits (bounded) until every agent holds the configuration the leader
/// has applied now, and says in a note how long that took: the agents'
/// backlog after a phase that changed the store as fast as it could, so
/// the next phase does not measure the last one's leftovers.
async fn catch_up(ctx: &mut Context, fleet: &Fleet, after: &str) -> anyhow::Result<()> {
    let target = applied_index(ctx).await?;
    let started = Instant::now();
    let deadline = started + ctx.wait;
    while fleet.oldest_held_version() < target {
        if Instant::now() >= deadline {
            ctx.notes.push(format!(
                "after {after}: some agent still held version {} of {target} after {:.1} s",
                fleet.oldest_held_version(),
                ctx.wait.as_secs_f64()
            ));
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (decoded, shared) = fleet.snapshot_decodes().await;
    let (decoded_before, shared_before) =
        std::mem::replace(&mut ctx.decodes_noted, (decoded, shared));
    ctx.notes.push(format!(
        "after {after}: every agent held version {target} {:.2} s later; since the last such note the agents decoded {} payloads and took {} from another agent's decode",
        started.elapsed().as_secs_f64(),
        decoded - decoded_before,
        shared - shared_before,
    ));
    Ok(())
}

/// Waits until every agent resynced (bounded), then reads the figure.
async fn resync(ctx: &Context, fleet: &Fleet, agents: usize, target: u64) -> Resync {
    let deadline = Instant::now() + ctx.wait;
    loop {
        let times = fleet.resync_times();
        if times.iter().all(Option::is_some) || Instant::now() >= deadline {
            let done: Vec<Duration> = times.into_iter().flatten().collect();
            return Resync {
                agents,
                resynced: done.len(),
                target_version: target,
                times: Latencies::of(done),
                decodes: fleet.snapshot_decodes().await,
            };
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn memory(ctx: &Context) -> Result<Memory, String> {
    if !ctx.cluster.started() {
        return Err("needs coordinators started by this tool (their /proc)".into());
    }
    let stats: Vec<_> = ctx.cluster.members.iter().map(|m| m.stats()).collect();
    Ok(Memory {
        rss: stats.iter().map(|s| s.rss).max().unwrap_or(0),
        hwm: stats.iter().map(|s| s.hwm).max().unwrap_or(0),
    })
}

/// Runs every phase and returns the report.
pub async fn run(options: &Options) -> anyhow::Result<Report> {
    let cluster = Cluster::new(&options.cluster)?;
    // The acceptance sequence's real proxies health-check every slice:
    // they all list one real backend, on loopback.
    let acceptance_binary = options
        .acceptance
        .then(|| acceptance::binary(&options.cluster))
        .map(|b| {
            b.ok_or_else(|| {
                anyhow::anyhow!("--acceptance needs coordinators started here, without --tls")
            })
        })
        .transpose()?;
    let shared_backend = match &acceptance_binary {
        Some(binary) => Some(tokio::task::block_in_place(|| {
            acceptance::SharedBackend::start(binary)
        })?),
        None => None,
    };
    let endpoints = shared_backend
        .as_ref()
        .map_or(routes::Endpoints::MadeUp, |b| {
            routes::Endpoints::Shared(b.address)
        });
    let security = cluster.security(&Identity::Admin("load".into()))?;
    let leader =
        admin::leader(&cluster.addresses, &security, None, Duration::from_secs(30)).await?;
    let mut ctx = Context {
        cluster,
        security,
        leader,
        wait: options.wait,
        updates: 0,
        change: 0,
        endpoints,
        notes: Vec::new(),
        decodes_noted: (0, 0),
    };
    let all = routes::resources(options.routes, endpoints)?;
    let live_bytes = routes::json_bytes(&all)?;
    let started = ctx.cluster.started();
    let (m, n, k) = (options.agents, options.routes, options.changes);

    // 1. Reference.
    progress("CPU reference");
    let reference_routes = options.cpu_reference_routes.min(n);
    let split = 3 + 3 * if started { reference_routes } else { 0 };
    let mut cpu_reference: Result<f64, String> =
        Err("needs coordinators started by this tool".into());
    if started {
        let result = async {
            bulk(&ctx, &all[..split], options.batch).await?;
            let fleet = Fleet::start(&ctx.cluster, "ref", m, 0)?;
            let warmed = warm(&ctx, "ref", m).await;
            let cost = match warmed {
                Ok(()) => changes::cpu_per_change(&mut ctx, k).await,
                Err(e) => Err(e),
            };
            fleet.stop().await;
            cost
        }
        .await;
        cpu_reference = result.or_else(failed);
    }

    // 2. Bulk apply.
    progress("bulk apply");
    refresh_leader(&mut ctx).await;
    let bulk_figure = bulk(&ctx, &all[split..], options.batch)
        .await
        .or_else(failed);

    // 3. Resync from empty.
    progress("full resync");
    refresh_leader(&mut ctx).await;
    let target = applied_index(&ctx).await?;
    all_applied(&mut ctx, target, "the bulk apply").await;
    let fleet = Fleet::start(&ctx.cluster, "agent", m, target)?;
    let resync_figure = Ok(resync(&ctx, &fleet, m, target).await);
    let warmed = warm(&ctx, "agent", m).await;
    catch_up(&mut ctx, &fleet, "the resync").await?;
    leader_settled(&mut ctx, n, "the resync").await;
    agents_settled(&mut ctx, "the resync").await;

    // 4. Apply → Ready, CPU at N.
    progress("apply → Ready and CPU per update");
    refresh_leader(&mut ctx).await;
    let (ready, cpu) = match warmed {
        Ok(()) => {
            let ready = changes::latencies(&mut ctx, k).await.or_else(failed);
            let at_full = changes::cpu_per_change(&mut ctx, k).await.or_else(failed);
            let cpu = match (cpu_reference, at_full) {
                (Ok(at_reference), Ok(at_full)) => Ok(Cpu {
                    reference_routes,
                    at_reference,
                    at_full,
                }),
                (Err(e), _) | (_, Err(e)) => Err(e),
            };
            (ready, cpu)
        }
        Err(e) => (failed(e), Err("agents never warm".to_string())),
    };

    // 5. Memory.
    let memory_figure = memory(&ctx);

    // 6. Throughput: routes after the probe.
    progress("committed updates per second");
    refresh_leader(&mut ctx).await;
    let clients = options.clients.min(n.saturating_sub(1)).max(1);
    let throughput = throughput::run(&mut ctx, 1, clients, options.seconds)
        .await
        .or_else(failed);

    catch_up(&mut ctx, &fleet, "the updates-per-second phase").await?;

    // 7. Data directory.
    let disk = if started {
        Ok(Disk {
            updates: ctx.updates,
            live_bytes,
            dir_bytes: ctx
                .cluster
                .members
                .iter()
                .map(|m| disk_usage(&m.data_dir))
                .max()
                .unwrap_or(0),
        })
    } else {
        Err("needs coordinators started by this tool (their data directories)".into())
    };

    // 8. The acceptance sequence at this size.
    let acceptance_figure = match acceptance_binary {
        Some(binary) => {
            progress("acceptance sequence through real proxies");
            refresh_leader(&mut ctx).await;
            Some(
                acceptance::run(&ctx, binary, options.keep_logs.as_deref())
                    .await
                    .or_else(failed),
            )
        }
        None => None,
    };

    // 9. Leader kill, on routes after the throughput clients'.
    progress("leader kill");
    refresh_leader(&mut ctx).await;
    catch_up(&mut ctx, &fleet, "the acceptance sequence").await?;
    let pending = options.pending.min(n.saturating_sub(1 + clients)).max(1);
    let first = (1 + clients).min(n.saturating_sub(pending));
    let failover_figure = failover::run(&mut ctx, &fleet, first, pending)
        .await
        .or_else(failed);

    let counters = fleet.shared();
    let line = format!(
        "Agents: {} registrations, {} configuration updates ({:.1} MiB), {} did not decode, {} failed calls or broken streams. Coordinator WARN/ERROR lines: {}.",
        counters
            .registrations
            .load(std::sync::atomic::Ordering::Relaxed),
        counters.updates.load(std::sync::atomic::Ordering::Relaxed),
        counters.bytes.load(std::sync::atomic::Ordering::Relaxed) as f64 / (1024.0 * 1024.0),
        counters
            .decode_errors
            .load(std::sync::atomic::Ordering::Relaxed),
        counters
            .rpc_errors
            .load(std::sync::atomic::Ordering::Relaxed),
        ctx.cluster.warnings().len(),
    );
    fleet.stop().await;
    ctx.notes.sort();
    ctx.notes.dedup();
    ctx.notes.insert(0, line);
    // The first few, to say what they were (a leader kill makes some).
    for warning in ctx.cluster.warnings().into_iter().take(5) {
        ctx.notes.push(format!("coordinator: {warning}"));
    }
    if let Some(dir) = &options.keep_logs {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for member in &ctx.cluster.members {
            let path = dir.join(format!("coordinator-{}.log", member.id));
            std::fs::write(&path, member.process.log_text())
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(Report {
        command: options.command.clone(),
        routes: n,
        agents: m,
        bulk: bulk_figure,
        resync: resync_figure,
        ready,
        throughput,
        cpu,
        memory: memory_figure,
        disk,
        failover: failover_figure,
        acceptance: acceptance_figure,
        notes: ctx.notes,
    })
}
