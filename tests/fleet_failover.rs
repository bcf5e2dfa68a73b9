//! A proxy's heartbeat that reaches a surviving coordinator just after the
//! leader was killed is held until a new leader is elected, then served or
//! pointed at the new leader — never at the dead one. (Answered at once, a
//! follower names the leader it last heard from until its own election
//! timeout runs out, so every proxy was sent to the dead leader, then left
//! to retry blind after a back-off, and the new leader judged nothing until
//! it had heard from all of them.)

mod support;

use std::time::{Duration, Instant};
use support::*;
use switchyard_proto::LEADER_HEADER;
use switchyard_proto::pb::{self, fleet_service_client::FleetServiceClient};

/// What one heartbeat got: served, or refused naming a leader (or none).
#[derive(Debug, PartialEq)]
enum Answer {
    Served,
    Refused { leader: Option<String> },
}

async fn heartbeat(address: &str, proxy: &str, registration: u64) -> anyhow::Result<Answer> {
    let mut client = FleetServiceClient::connect(format!("http://{address}")).await?;
    let request = pb::HeartbeatRequest {
        proxy_id: proxy.to_owned(),
        registration,
        ..Default::default()
    };
    match client.heartbeat(request).await {
        Ok(_) => Ok(Answer::Served),
        Err(status) if status.code() == tonic::Code::Unavailable => Ok(Answer::Refused {
            leader: status
                .metadata()
                .get(LEADER_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        }),
        Err(status) => anyhow::bail!("heartbeat to {address}: {status}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_reaching_a_survivor_after_the_leader_died_is_sent_to_the_new_leader()
-> anyhow::Result<()> {
    // Heartbeats every 50 ms, elections after 300–600 ms of silence.
    let mut cluster = Cluster::start(&[])?;
    let dead = cluster.wait_leader(Duration::from_secs(15))?;
    let dead_address = cluster.addresses[dead].clone();
    let mut fleet = FleetServiceClient::connect(format!("http://{dead_address}")).await?;
    let registration = fleet
        .register(pb::RegisterRequest::for_proxy("proxy-a", "zone-a", ""))
        .await?
        .into_inner()
        .registration;
    assert_eq!(
        heartbeat(&dead_address, "proxy-a", registration).await?,
        Answer::Served
    );

    cluster.nodes[dead].kill();
    // Past two heartbeat intervals (the survivors no longer count the dead
    // leader as live), well before an election timeout (they still name
    // it as their leader).
    tokio::time::sleep(Duration::from_millis(150)).await;
    let survivors: Vec<String> = (0..3)
        .filter(|i| *i != dead)
        .map(|i| cluster.addresses[i].clone())
        .collect();
    // Each survivor is asked as a proxy would ask: again after a refusal
    // that names nobody (an election that outlasted the hold).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut finals = Vec::new();
    for address in &survivors {
        let answer = loop {
            let answer = heartbeat(address, "proxy-a", registration).await?;
            if let Answer::Refused {
                leader: Some(leader),
            } = &answer
            {
                assert_ne!(
                    leader, &dead_address,
                    "{address} sent the proxy to the leader that was killed"
                );
            }
            if answer != (Answer::Refused { leader: None }) || Instant::now() >= deadline {
                break answer;
            }
        };
        finals.push((address.clone(), answer));
    }
    let leaders: Vec<&String> = finals
        .iter()
        .filter(|(_, answer)| *answer == Answer::Served)
        .map(|(address, _)| address)
        .collect();
    assert_eq!(
        leaders.len(),
        1,
        "exactly the new leader serves: {finals:?}"
    );
    for (address, answer) in &finals {
        if address != leaders[0] {
            assert_eq!(
                answer,
                &Answer::Refused {
                    leader: Some(leaders[0].clone())
                },
                "{address} points the proxy at the new leader"
            );
        }
    }
    Ok(())
}

/// The next update on `stream` that names a leader, within `wait`.
async fn next_leader_notice(
    stream: &mut tonic::Streaming<pb::ConfigUpdate>,
    wait: Duration,
) -> anyhow::Result<pb::ConfigUpdate> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let update = tokio::time::timeout_at(deadline, stream.message())
            .await
            .map_err(|_| anyhow::anyhow!("no update naming a leader within {wait:?}"))??
            .ok_or_else(|| anyhow::anyhow!("the watch stream ended"))?;
        if !update.leader.is_empty() {
            return Ok(update);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_stream_on_a_survivor_names_the_new_leader_once_it_is_elected() -> anyhow::Result<()>
{
    let mut cluster = Cluster::start(&[])?;
    let dead = cluster.wait_leader(Duration::from_secs(15))?;
    let dead_address = cluster.addresses[dead].clone();
    let survivor = (dead + 1) % 3;
    let mut fleet =
        FleetServiceClient::connect(format!("http://{}", cluster.addresses[survivor])).await?;
    let mut stream = fleet
        .watch(pb::WatchRequest {
            proxy_id: "proxy-w".into(),
            known_version: 0,
            accepts_deltas: true,
            accepts_lz4: false,
        })
        .await?
        .into_inner();
    // At the start of the stream: the leader the survivor follows, in a
    // bare update at the version the stream holds (no payload to apply).
    let first = next_leader_notice(&mut stream, Duration::from_secs(10)).await?;
    assert_eq!(first.leader, dead_address);
    assert!(first.snapshot_json.is_empty() && first.delta_json.is_empty());
    assert_eq!(first.base_version, first.version, "{first:?}");

    cluster.nodes[dead].kill();
    // Then, without the proxy calling anyone, the one elected after it.
    let notice = next_leader_notice(&mut stream, Duration::from_secs(15)).await?;
    assert_ne!(
        notice.leader, dead_address,
        "named the leader that was killed"
    );
    assert!(notice.snapshot_json.is_empty() && notice.delta_json.is_empty());
    let elected = cluster.wait_leader(Duration::from_secs(15))?;
    assert_eq!(notice.leader, cluster.addresses[elected]);
    Ok(())
}
