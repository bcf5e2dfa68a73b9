//! The admin client against fake coordinators (in-process gRPC servers on
//! 127.0.0.1, port 0): what it retries and what ends a call at once. A
//! follower naming a dead leader (a failover under way) is asked again
//! until a new leader answers; a follower without a leader is retried
//! until the deadline; a hint to a live leader is followed at once;
//! addresses that all refuse connections end the call after one round.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use switchyard::client::{AdminClient, ClientError, LEADER_HEADER};
use switchyard_harness::free_port;
use switchyard_proto::pb::admin_service_server::{AdminService, AdminServiceServer};
use switchyard_proto::pb::{self};
use switchyard_tls::Security;
use tonic::codegen::tokio_stream;
use tonic::{Request, Response, Status};

/// What a fake coordinator says to `Status` calls: `refusals` times
/// "unavailable" (naming `leader` when set), then an answer.
struct Fake {
    refusals: usize,
    leader: Option<String>,
    calls: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl AdminService for Fake {
    async fn apply(
        &self,
        _: Request<pb::ApplyRequest>,
    ) -> Result<Response<pb::ApplyReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn delete(
        &self,
        _: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn status(
        &self,
        _: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusReply>, Status> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n >= self.refusals {
            return Ok(Response::new(pb::StatusReply {
                status_json: b"answered".to_vec(),
            }));
        }
        let mut status = Status::unavailable("no leader yet");
        if let Some(leader) = &self.leader {
            status = Status::unavailable(format!("not the leader; the leader is {leader}"));
            status.metadata_mut().insert(
                LEADER_HEADER,
                leader.parse().map_err(|_| Status::internal("hint"))?,
            );
        }
        Err(status)
    }

    type WatchStatusStream = tokio_stream::Empty<Result<pb::StatusReply, Status>>;

    async fn watch_status(
        &self,
        _: Request<pb::StatusRequest>,
    ) -> Result<Response<Self::WatchStatusStream>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn add_coordinator(
        &self,
        _: Request<pb::AddCoordinatorRequest>,
    ) -> Result<Response<pb::MembershipReply>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn remove_coordinator(
        &self,
        _: Request<pb::RemoveCoordinatorRequest>,
    ) -> Result<Response<pb::MembershipReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
}

/// Serves a [`Fake`] on 127.0.0.1; returns its address and call counter.
async fn fake(
    refusals: usize,
    leader: Option<String>,
) -> anyhow::Result<(String, Arc<AtomicUsize>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address: SocketAddr = listener.local_addr()?;
    let calls = Arc::new(AtomicUsize::new(0));
    let service = AdminServiceServer::new(Fake {
        refusals,
        leader,
        calls: calls.clone(),
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    Ok((address.to_string(), calls))
}

fn client(addresses: &[&str], timeout: Duration) -> AdminClient {
    let addresses = addresses.iter().map(|a| a.to_string()).collect();
    AdminClient::new(addresses, timeout, Security::Insecure)
}

async fn status(client: &mut AdminClient) -> Result<Vec<u8>, ClientError> {
    let reply = client
        .call(true, |mut c| async move {
            c.status(pb::StatusRequest::default()).await
        })
        .await?;
    Ok(reply.status_json)
}

fn nobody() -> String {
    format!("127.0.0.1:{}", free_port())
}

#[tokio::test]
async fn a_follower_naming_a_dead_leader_is_asked_again_until_a_new_leader_answers()
-> anyhow::Result<()> {
    let dead = nobody();
    let (follower, calls) = fake(5, Some(dead.clone())).await?;
    let started = Instant::now();
    let reply = status(&mut client(&[&follower], Duration::from_secs(10))).await?;
    assert_eq!(reply, b"answered");
    assert_eq!(calls.load(Ordering::SeqCst), 6);
    // Paced between rounds (a pause each time the hint names the address
    // that just refused), not spinning, and far from the deadline.
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    Ok(())
}

#[tokio::test]
async fn a_follower_without_a_leader_is_retried_until_the_deadline() -> anyhow::Result<()> {
    let (follower, calls) = fake(usize::MAX, None).await?;
    let dead = nobody();
    let started = Instant::now();
    let err = status(&mut client(&[&dead, &follower], Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(calls.load(Ordering::SeqCst) > 3, "retried");
    let text = err.to_string();
    assert!(
        text.starts_with("no coordinator answered within 1s: "),
        "{text}"
    );
    assert!(
        text.contains(&format!("{dead}: connection refused")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{follower}: no leader yet")),
        "{text}"
    );
    Ok(())
}

#[tokio::test]
async fn a_hint_to_a_live_leader_is_followed_at_once() -> anyhow::Result<()> {
    let (leader, leader_calls) = fake(0, None).await?;
    let (follower, follower_calls) = fake(usize::MAX, Some(leader)).await?;
    let started = Instant::now();
    let mut client = client(&[&follower], Duration::from_secs(10));
    assert_eq!(status(&mut client).await?, b"answered");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(follower_calls.load(Ordering::SeqCst), 1);
    assert_eq!(leader_calls.load(Ordering::SeqCst), 1);
    // The leader is asked first from then on.
    assert_eq!(status(&mut client).await?, b"answered");
    assert_eq!(follower_calls.load(Ordering::SeqCst), 1);
    Ok(())
}

#[tokio::test]
async fn addresses_that_all_refuse_connections_end_the_call_after_one_round() -> anyhow::Result<()>
{
    let (a, b) = (nobody(), nobody());
    let started = Instant::now();
    let err = status(&mut client(&[&a, &b], Duration::from_secs(30)))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    let ClientError::Unusable { failures } = &err else {
        panic!("{err}");
    };
    let addresses: Vec<&str> = failures.iter().map(|f| f.address.as_str()).collect();
    assert_eq!(addresses, [a.as_str(), b.as_str()]);
    assert!(
        err.to_string()
            .starts_with("no coordinator can be reached: "),
        "{err}"
    );
    Ok(())
}
