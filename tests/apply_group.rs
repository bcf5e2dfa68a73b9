//! Group commit: applies that clients send at once share Raft entries,
//! and each client still gets its own answer — its route's own
//! generation, and the commit its apply carried when the fleet was
//! ready. One real coordinator (`server::run` on 127.0.0.1), one admin
//! connection per client, and a proxy played through the real
//! `FleetService` calls.

#[path = "control_plane/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::{Coordinator, WAIT};
use std::collections::BTreeSet;
use switchyard_proto::model::{
    BackendKey, BackendRef, HttpRoute, ObjectMeta, ObjectName, Resource, RouteRule, Service,
    ServicePort,
};
use switchyard_proto::pb;
use switchyard_test_support::eventually;
use switchyard_test_support::eventually::holds;

/// Concurrent clients per round.
const CLIENTS: usize = 16;

/// Rounds tried before concluding that no two applies ever shared an
/// entry (each round sends every client's apply at once).
const ROUNDS: usize = 10;

fn green_service() -> Resource {
    Resource::Service(Service {
        meta: ObjectMeta::named("default", "green"),
        ports: vec![ServicePort {
            name: None,
            port: 80,
            target_port: None,
            app_protocol: None,
        }],
    })
}

/// Route `name` to green, answering for `host`.
fn route(name: &str, host: &str) -> Resource {
    Resource::HttpRoute(HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("default", name),
        parent_refs: vec![],
        hostnames: vec![host.into()],
        rules: vec![RouteRule {
            backend_refs: vec![BackendRef::service("green", 80)],
            ..Default::default()
        }],
    })
}

async fn apply(
    admin: &mut pb::admin_service_client::AdminServiceClient<tonic::transport::Channel>,
    resources: Vec<Resource>,
) -> anyhow::Result<pb::ApplyReply> {
    let resources_json = serde_json::to_vec(&resources)?;
    Ok(admin
        .apply(pb::ApplyRequest { resources_json })
        .await?
        .into_inner())
}

/// Runs every call at once (each on its own task) and gathers the answers.
async fn all_at_once<T: Send + 'static>(
    calls: impl Iterator<Item = impl Future<Output = anyhow::Result<T>> + Send + 'static>,
) -> anyhow::Result<Vec<T>> {
    let tasks: Vec<_> = calls.map(tokio::spawn).collect();
    let mut answers = Vec::with_capacity(tasks.len());
    for task in tasks {
        answers.push(task.await??);
    }
    Ok(answers)
}

/// The generation `reply` gives route `name`.
fn generation_of(reply: &pb::ApplyReply, name: &str) -> anyhow::Result<u64> {
    reply
        .routes
        .iter()
        .find(|r| r.name == name)
        .map(|r| r.generation)
        .ok_or_else(|| anyhow::anyhow!("no generation for {name}: {reply:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_sent_at_once_share_entries_and_each_gets_its_own_answer() -> anyhow::Result<()> {
    let coordinator = Coordinator::start().await?;
    let node = coordinator.bound.coordinator.node().clone();
    let mut admin = coordinator.admin_client();
    let mut fleet = coordinator.fleet_client();
    let heartbeat = coordinator.registered_heartbeat("p0", "a").await?;
    let registration = heartbeat.registration;
    fleet.heartbeat(heartbeat.clone()).await?;

    // p0 holds green ready; a first route on it is committed by the
    // leader loop once its grace is over.
    apply(
        &mut admin,
        vec![green_service(), route("first", "first.test")],
    )
    .await?;
    coordinator
        .report_ready("p0", registration, &BackendKey::new("default", "green", 80))
        .await?;
    eventually("the first route committed", WAIT, async || {
        let renewed = fleet.heartbeat(heartbeat.clone()).await.is_ok();
        let pending = node.state().borrow().pending_count();
        holds(renewed && pending == 0, || {
            format!("{pending} pending (heartbeat answered: {renewed})")
        })
    })
    .await?;

    // Rounds of CLIENTS applies at once, each client on its own
    // connection and its own route, until two of a round shared an entry.
    let clients: Vec<_> = (0..CLIENTS).map(|_| coordinator.admin_client()).collect();
    let mut shared = None;
    for round in 0..ROUNDS {
        let calls = clients.iter().enumerate().map(|(i, client)| {
            let mut client = client.clone();
            let name = format!("r{i}");
            let host = format!("round{round}.r{i}.test");
            async move {
                let reply = apply(&mut client, vec![route(&name, &host)]).await?;
                anyhow::Ok((name, reply))
            }
        });
        let replies = all_at_once(calls).await?;
        let entries: BTreeSet<u64> = replies.iter().map(|(_, reply)| reply.log_index).collect();
        let state = node.state().borrow().clone();
        for (name, reply) in &replies {
            let generation = generation_of(reply, name)?;
            assert_eq!(
                generation, reply.log_index,
                "{name}: the generation of the entry that carried it"
            );
            assert!(
                reply
                    .changes
                    .iter()
                    .any(|c| c.ends_with(&format!("generation {generation} committed"))),
                "{name}: committed with its apply (p0 holds green): {:?}",
                reply.changes
            );
            let own = format!("HTTPRoute default/{name}:");
            assert!(
                reply.changes.iter().all(|c| c.starts_with(&own)),
                "{name}: its own changes only: {:?}",
                reply.changes
            );
            let record = &state.routes[&ObjectName::new("default", name)];
            assert!(record.pending.is_none(), "{name}: {record:?}");
            assert_eq!(
                record.active.as_ref().map(|a| a.generation),
                Some(generation),
                "{name}"
            );
        }
        if entries.len() < CLIENTS {
            shared = Some((round, entries.len()));
            break;
        }
    }
    let (round, entries) = shared.ok_or_else(|| {
        anyhow::anyhow!("in {ROUNDS} rounds of {CLIENTS} applies at once, each had its own entry")
    })?;
    eprintln!("round {round}: {CLIENTS} applies in {entries} entries");

    let text = coordinator.metrics_text()?;
    let sum = text
        .lines()
        .find_map(|l| l.strip_prefix("switchyard_coordinator_applies_per_entry_sum "))
        .and_then(|v| v.parse::<f64>().ok());
    let count = text
        .lines()
        .find_map(|l| l.strip_prefix("switchyard_coordinator_applies_per_entry_count "))
        .and_then(|v| v.parse::<f64>().ok());
    match (sum, count) {
        (Some(sum), Some(count)) => assert!(sum > count, "{sum} applies in {count} entries"),
        _ => anyhow::bail!("no applies-per-entry histogram in:\n{text}"),
    }
    Ok(())
}

/// Two clients changing the same route at once never share an entry:
/// each change gets a generation of its own, and the route ends at the
/// spec of the later one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_of_one_route_sent_at_once_each_get_a_generation_of_their_own() -> anyhow::Result<()>
{
    let coordinator = Coordinator::start().await?;
    let node = coordinator.bound.coordinator.node().clone();
    apply(&mut coordinator.admin_client(), vec![green_service()]).await?;
    for round in 0..ROUNDS {
        let calls = (0..4).map(|i| {
            let mut client = coordinator.admin_client();
            let host = format!("round{round}.client{i}.test");
            async move {
                let reply = apply(&mut client, vec![route("r", &host)]).await?;
                anyhow::Ok((host, reply))
            }
        });
        let replies = all_at_once(calls).await?;
        let generations: BTreeSet<u64> = replies
            .iter()
            .map(|(_, reply)| generation_of(reply, "r"))
            .collect::<anyhow::Result<_>>()?;
        assert_eq!(generations.len(), replies.len(), "{replies:?}");
        let (last_host, _) = replies
            .iter()
            .max_by_key(|(_, reply)| reply.log_index)
            .expect("four replies");
        let state = node.state().borrow().clone();
        let record = &state.routes[&ObjectName::new("default", "r")];
        let newest = record
            .pending
            .as_ref()
            .map(|p| &p.target.spec)
            .or(record.active.as_ref().map(|a| &a.spec))
            .ok_or_else(|| anyhow::anyhow!("r has no spec: {record:?}"))?;
        assert_eq!(
            newest.hostnames,
            std::slice::from_ref(last_host),
            "{record:?}"
        );
    }
    Ok(())
}

/// The leader's count of heartbeat answers it held (`fleet_paced_answers`).
fn paced_answers(coordinator: &Coordinator) -> anyhow::Result<f64> {
    let text = coordinator.metrics_text()?;
    text.lines()
        .find_map(|l| l.strip_prefix("switchyard_coordinator_fleet_paced_answers_total "))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no paced-answers counter in:\n{text}"))
}

/// While clients' applies pile up (groups of two or more), the leader
/// holds each heartbeat's answer for its proxy's share of the paced rate
/// (here one proxy at 10 calls a second: 100 ms); applies sent one at a
/// time, and a second after the pile, hold nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_applies_pile_up_the_leader_holds_heartbeat_answers_and_not_otherwise()
-> anyhow::Result<()> {
    let coordinator = Coordinator::start_paced(10).await?;
    let mut fleet = coordinator.fleet_client();
    let heartbeat = coordinator.registered_heartbeat("p0", "a").await?;
    let mut admin = coordinator.admin_client();
    apply(&mut admin, vec![green_service()]).await?;
    for i in 0..3 {
        apply(&mut admin, vec![route(&format!("alone{i}"), "alone.test")]).await?;
        assert!(fleet.heartbeat(heartbeat.clone()).await?.into_inner().known);
    }
    assert_eq!(paced_answers(&coordinator)?, 0.0, "applies one at a time");

    // Clients applying at once, round after round, until stopped.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let piling = {
        let stop = stop.clone();
        let clients: Vec<_> = (0..CLIENTS).map(|_| coordinator.admin_client()).collect();
        tokio::spawn(async move {
            let mut round = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                round += 1;
                let calls = clients.iter().enumerate().map(|(i, client)| {
                    let mut client = client.clone();
                    let host = format!("round{round}.r{i}.test");
                    async move { apply(&mut client, vec![route(&format!("r{i}"), &host)]).await }
                });
                all_at_once(calls).await?;
            }
            anyhow::Ok(())
        })
    };
    let took = eventually("a heartbeat answer held", WAIT, async || {
        let counted = || paced_answers(&coordinator).map_err(|e| e.to_string());
        let before = counted()?;
        let sent = std::time::Instant::now();
        let answer = fleet.heartbeat(heartbeat.clone()).await;
        let took = sent.elapsed();
        let known = answer.map_err(|e| e.to_string())?.into_inner().known;
        holds(known, || "p0 unknown".to_string())?;
        holds(counted()? > before, || {
            format!("answered in {took:?}, not held")
        })
        .map(|()| took)
    })
    .await?;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    piling.await??;
    assert!(
        took >= std::time::Duration::from_millis(100),
        "a held answer came after {took:?}, not after the proxy's 100 ms share"
    );

    // The pile is over: after its hold, answers come at once again.
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let before = paced_answers(&coordinator)?;
    assert!(fleet.heartbeat(heartbeat.clone()).await?.into_inner().known);
    assert_eq!(paced_answers(&coordinator)?, before, "no pile, no hold");
    Ok(())
}
