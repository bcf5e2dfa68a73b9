//! The operator's side: `AdminService` calls to the coordinators (find the
//! leader, apply, read status, wait for a route to be Ready), every one
//! with a deadline.
//!
//! Owns: the admin channels and what "Ready at generation g" means to the
//! tool (the route's status on the leader: active at g, nothing pending,
//! `ready` — every live proxy serves g). Does not own: what is applied
//! (`routes`) or measured (`figures`).

use anyhow::{Context, bail};
use std::time::{Duration, Instant};
use switchyard_proto::model::{ClusterStatus, Resource, RouteStatus};
use switchyard_proto::pb::{self, admin_service_client::AdminServiceClient};
use switchyard_tls::Security;
use tonic::transport::Channel;

/// Largest message the tool accepts (a status of 10,000 routes is big).
const MAX_MESSAGE: usize = 512 * 1024 * 1024;

/// Deadline of one unary admin call.
const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// An admin client of one coordinator.
pub type Client = AdminServiceClient<Channel>;

/// A client of `address`, connecting lazily.
pub fn client(address: &str, security: &Security) -> anyhow::Result<Client> {
    let channel =
        switchyard_tls::client::channel(address, security, None, Duration::from_secs(2), |e| {
            e.timeout(RPC_TIMEOUT).tcp_nodelay(true)
        })
        .with_context(|| format!("bad coordinator address {address}"))?;
    Ok(AdminServiceClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE))
}

/// A client without a per-call deadline, for `WatchStatus`.
fn streaming_client(address: &str, security: &Security) -> anyhow::Result<Client> {
    let channel =
        switchyard_tls::client::channel(address, security, None, Duration::from_secs(2), |e| e)
            .with_context(|| format!("bad coordinator address {address}"))?;
    Ok(AdminServiceClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE))
}

/// A status request with route rows for `only` (routes of
/// [`crate::routes::NAMESPACE`] by name; every route for `None`): a status
/// of a few routes costs the coordinator what they cost, not the store.
pub fn request(only: Option<&[String]>) -> pb::StatusRequest {
    match only {
        None => pb::StatusRequest::default(),
        Some(names) => pb::StatusRequest {
            routes: names
                .iter()
                .map(|n| format!("{}/{n}", crate::routes::NAMESPACE))
                .collect(),
            only_routes: true,
            without_proxies: false,
        },
    }
}

/// The status `client` answers with, with route rows for `only`.
pub async fn status(client: &mut Client, only: Option<&[String]>) -> anyhow::Result<ClusterStatus> {
    let reply = client
        .status(request(only))
        .await
        .map_err(|s| anyhow::anyhow!("status: {}", s.message()))?;
    Ok(serde_json::from_slice(&reply.get_ref().status_json)?)
}

/// The leader's gRPC address, asked of `addresses` in turn until one names
/// a leader (bounded by `within`). `except` is never taken for the leader
/// (a coordinator just killed).
pub async fn leader(
    addresses: &[String],
    security: &Security,
    except: Option<&str>,
    within: Duration,
) -> anyhow::Result<String> {
    let deadline = Instant::now() + within;
    let mut last = String::from("nothing answered");
    loop {
        for address in addresses.iter().filter(|a| Some(a.as_str()) != except) {
            let mut c = client(address, security)?;
            match tokio::time::timeout(Duration::from_secs(5), status(&mut c, Some(&[]))).await {
                Ok(Ok(s)) => {
                    if let Some(id) = s.leader
                        && let Some(a) = s.members.get(&id)
                        && Some(a.as_str()) != except
                    {
                        return Ok(a.clone());
                    }
                    last = format!("{address}: no leader yet");
                }
                Ok(Err(e)) => last = format!("{address}: {e}"),
                Err(_) => last = format!("{address}: status took over 5 s"),
            }
        }
        if Instant::now() >= deadline {
            bail!("no leader within {within:?}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Encodes resources as `ApplyRequest` carries them.
pub fn encode(resources: &[Resource]) -> anyhow::Result<Vec<u8>> {
    Ok(serde_json::to_vec(resources)?)
}

/// Applies already-encoded resources; the reply once committed.
pub async fn apply(client: &mut Client, json: Vec<u8>) -> anyhow::Result<pb::ApplyReply> {
    client
        .apply(pb::ApplyRequest {
            resources_json: json,
        })
        .await
        .map(tonic::Response::into_inner)
        .map_err(|s| anyhow::anyhow!("apply refused ({:?}): {}", s.code(), s.message()))
}

/// The generation an apply gave route `name`.
pub fn generation_of(reply: &pb::ApplyReply, name: &str) -> Option<u64> {
    reply
        .routes
        .iter()
        .find(|g| g.name == name)
        .map(|g| g.generation)
}

/// Whether `route` is Ready at `generation` or newer.
pub fn ready_at(route: &RouteStatus, generation: u64) -> bool {
    route.ready && route.active_generation.is_some_and(|g| g >= generation)
}

/// Whether `route` is committed (active) at `generation` or newer.
pub fn committed_at(route: &RouteStatus, generation: u64) -> bool {
    route.active_generation.is_some_and(|g| g >= generation)
}

/// Follows the leader's `WatchStatus` (route rows for `only`, see
/// [`request`]) until `done` holds for the status (checked on every
/// status the stream shows), within `within`. Returns how many statuses
/// were read.
pub async fn watch_until(
    address: &str,
    security: &Security,
    within: Duration,
    only: Option<&[String]>,
    mut done: impl FnMut(&ClusterStatus) -> bool,
) -> anyhow::Result<u64> {
    let mut c = streaming_client(address, security)?;
    let deadline = tokio::time::Instant::now() + within;
    // Route rows only, as `switchyard apply --wait` asks: every waiter here
    // looks at routes, and a row per proxy in each of the many statuses a
    // change brings would cost the leader (and this process) O(proxies)
    // each.
    let request = pb::StatusRequest {
        without_proxies: true,
        ..request(only)
    };
    let mut stream = tokio::time::timeout_at(deadline, c.watch_status(request))
        .await
        .with_context(|| format!("WatchStatus on {address} did not answer within {within:?}"))?
        .map_err(|s| anyhow::anyhow!("WatchStatus on {address}: {}", s.message()))?
        .into_inner();
    let mut seen = 0u64;
    loop {
        let message = tokio::time::timeout_at(deadline, stream.message())
            .await
            .with_context(|| format!("not done within {within:?} ({seen} statuses seen)"))?
            .map_err(|s| anyhow::anyhow!("WatchStatus on {address}: {}", s.message()))?;
        let Some(reply) = message else {
            bail!("WatchStatus on {address} ended after {seen} statuses");
        };
        seen += 1;
        let status: ClusterStatus = serde_json::from_slice(&reply.status_json)?;
        if done(&status) {
            return Ok(seen);
        }
    }
}
