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
        .register(pb::RegisterRequest {
            proxy: Some(pb::ProxyIdentity {
                id: "proxy-a".into(),
                zone: "zone-a".into(),
                admin_address: String::new(),
            }),
        })
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
