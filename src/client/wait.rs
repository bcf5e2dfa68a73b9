//! Waiting for Ready: the status as the leader sees it, and
//! `apply --wait`'s judgement of one route's row — its own generation
//! active and Ready, or why that will never happen.

use super::{AdminClient, ClientError};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use switchyard_proto::model::{ClusterStatus, ObjectName};
use switchyard_proto::pb;
use tokio::time::Instant;

/// Why waiting for Ready failed.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The coordinators could not be asked.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The status reply did not decode.
    #[error("status reply is not valid JSON: {0}")]
    BadStatus(String),
    /// A route's cutover ended without reaching the generation.
    #[error("route {route} generation {generation} did not become active: {why}")]
    Failed {
        /// The route.
        route: ObjectName,
        /// The generation waited for.
        generation: u64,
        /// What status says.
        why: String,
    },
    /// The route attaches to no listener: proxies have nothing to serve.
    #[error("route {route} generation {generation} is not served: {why}")]
    NotServed {
        /// The route.
        route: ObjectName,
        /// The generation waited for.
        generation: u64,
        /// Each parentRef's reason.
        why: String,
    },
    /// The generation became active through `on-timeout: force`, without
    /// its backends shown ready.
    #[error(
        "route {route} generation {generation} was forced after its cutover timeout (its backends were not shown ready): {why}"
    )]
    Forced {
        /// The route.
        route: ObjectName,
        /// The generation.
        generation: u64,
        /// The evidence at the time, as status says.
        why: String,
    },
    /// A newer apply replaced the spec before it was served.
    #[error(
        "route {route} generation {generation} was superseded by generation {by} before it was served"
    )]
    Superseded {
        /// The route.
        route: ObjectName,
        /// The generation waited for.
        generation: u64,
        /// The newer one.
        by: u64,
    },
    /// The route was deleted while waiting.
    #[error(
        "route {route} no longer exists (deleted while waiting; coordinator {answered_by} at applied index {applied_index} says so)"
    )]
    Deleted {
        /// The route.
        route: ObjectName,
        /// Who said so.
        answered_by: u64,
        /// At which applied index.
        applied_index: u64,
    },
    /// The deadline passed.
    #[error("timed out after {timeout:?} waiting for Ready: {progress}")]
    Timeout {
        /// The deadline.
        timeout: Duration,
        /// The last progress line.
        progress: String,
    },
}

/// Where `row` stands for `generation` of `route`: `None` once that very
/// generation is active and Ready, what it waits for while it is pending or
/// being applied, or why it never will be (abandoned, withdrawn, or
/// superseded by a newer generation — generations are never reused, so a
/// newer number is a different spec).
fn route_progress(
    route: &ObjectName,
    generation: u64,
    row: &switchyard_proto::model::RouteStatus,
) -> Result<Option<String>, WaitError> {
    let active = row.active_generation.unwrap_or(0);
    let newest = active.max(row.pending_generation.unwrap_or(0));
    if let Some(why) = &row.not_served
        && newest == generation
    {
        return Err(WaitError::NotServed {
            route: route.clone(),
            generation,
            why: why.clone(),
        });
    }
    if newest > generation {
        return Err(WaitError::Superseded {
            route: route.clone(),
            generation,
            by: newest,
        });
    }
    if active < generation && row.pending_generation != Some(generation) {
        return Err(WaitError::Failed {
            route: route.clone(),
            generation,
            why: row
                .last_failure
                .clone()
                .unwrap_or_else(|| "withdrawn: an apply restored the active spec".into()),
        });
    }
    if active == generation && row.forced {
        return Err(WaitError::Forced {
            route: route.clone(),
            generation,
            why: row.last_failure.clone().unwrap_or_default(),
        });
    }
    if active == generation && row.ready {
        return Ok(None);
    }
    Ok(Some(
        row.evidence
            .clone()
            .or_else(|| row.applied.clone())
            .unwrap_or_else(|| "waiting for the leader".into()),
    ))
}

impl AdminClient {
    /// The status, from the leader when it can be reached (only the leader
    /// knows leases and evidence).
    pub async fn fetch_status(&mut self) -> Result<ClusterStatus, WaitError> {
        self.fetch_status_of(None).await
    }

    /// [`AdminClient::fetch_status`] with route rows for `only` (every
    /// route for `None`): a status of a few routes costs the coordinator
    /// what they cost, not the whole store.
    pub async fn fetch_status_of(
        &mut self,
        only: Option<&BTreeSet<ObjectName>>,
    ) -> Result<ClusterStatus, WaitError> {
        self.fetch_scoped(status_request(only)).await
    }

    /// [`AdminClient::fetch_status_of`] for `request`.
    async fn fetch_scoped(
        &mut self,
        request: pb::StatusRequest,
    ) -> Result<ClusterStatus, WaitError> {
        let mut status = self.status_once(&request).await?;
        if let Some(leader) = status.leader
            && leader != status.answered_by
            && let Some(address) = status.members.get(&leader).cloned()
        {
            // Ask the leader, and keep asking it first from now on (its
            // channel is cached like every other).
            self.preferred = Some(address);
            if let Ok(from_leader) = self.status_once(&request).await {
                status = from_leader;
            }
        }
        Ok(status)
    }

    /// The status as the first reachable coordinator sees it, without
    /// going on to the leader (to compare coordinators with each other).
    pub async fn fetch_status_here(&mut self) -> Result<ClusterStatus, WaitError> {
        self.status_once(&status_request(None)).await
    }

    async fn status_once(
        &mut self,
        request: &pb::StatusRequest,
    ) -> Result<ClusterStatus, WaitError> {
        let reply = self
            .call(true, |mut c| {
                let request = request.clone();
                async move { c.status(request).await }
            })
            .await?;
        serde_json::from_slice(&reply.status_json).map_err(|e| WaitError::BadStatus(e.to_string()))
    }

    /// Polls the leader's status until every target route is Ready at (or
    /// past) its generation, or one of them fails. `after_index` is the log
    /// index of the apply that produced the targets: a coordinator that has
    /// not applied that far yet (a follower, or a leader just elected) is
    /// not believed. `progress` is called with a line each time the
    /// progress changes.
    pub async fn wait_ready(
        &mut self,
        targets: &BTreeMap<ObjectName, u64>,
        after_index: u64,
        timeout: Duration,
        mut progress: impl FnMut(&str),
    ) -> Result<(), WaitError> {
        let deadline = Instant::now() + timeout;
        let mut last_line = String::new();
        let only: BTreeSet<ObjectName> = targets.keys().cloned().collect();
        // Route rows only: polled every few milliseconds, an answer with
        // every proxy's row would cost the leader O(proxies) each time.
        let request = pb::StatusRequest {
            without_proxies: true,
            ..status_request(Some(&only))
        };
        loop {
            let status = self.fetch_scoped(request.clone()).await?;
            let mut waiting = Vec::new();
            let behind = status.applied_index < after_index;
            if behind {
                waiting.push(format!(
                    "coordinator {} has applied up to {} of {after_index}",
                    status.answered_by, status.applied_index
                ));
            }
            for (name, generation) in targets.iter().filter(|_| !behind) {
                let row = status
                    .routes
                    .iter()
                    .find(|r| r.namespace == name.namespace && r.name == name.name)
                    .ok_or_else(|| WaitError::Deleted {
                        route: name.clone(),
                        answered_by: status.answered_by,
                        applied_index: status.applied_index,
                    })?;
                if let Some(detail) = route_progress(name, *generation, row)? {
                    waiting.push(format!("{name}: {detail}"));
                }
            }
            if waiting.is_empty() {
                return Ok(());
            }
            let line = waiting.join("; ");
            if Instant::now() >= deadline {
                return Err(WaitError::Timeout {
                    timeout,
                    progress: line,
                });
            }
            if line != last_line {
                progress(&line);
                last_line = line;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The status request for route rows of `only` (every route for `None`).
pub fn status_request(only: Option<&BTreeSet<ObjectName>>) -> pb::StatusRequest {
    match only {
        None => pb::StatusRequest::default(),
        Some(names) => pb::StatusRequest {
            routes: names.iter().map(ToString::to_string).collect(),
            only_routes: true,
            without_proxies: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_proto::model::RouteStatus;

    fn row(active: Option<u64>, pending: Option<u64>, ready: bool) -> RouteStatus {
        RouteStatus {
            namespace: "ns".into(),
            name: "r".into(),
            active_generation: active,
            pending_generation: pending,
            ready,
            evidence: pending.map(|_| "1 of 3 proxies ready".into()),
            ..Default::default()
        }
    }

    #[test]
    fn wait_is_for_its_own_generation_only() {
        let r = ObjectName::new("ns", "r");
        assert_eq!(
            route_progress(&r, 7, &row(Some(7), None, true)).unwrap(),
            None
        );
        assert!(
            route_progress(&r, 7, &row(Some(3), Some(7), false))
                .unwrap()
                .is_some()
        );
        assert!(
            route_progress(&r, 7, &row(Some(7), None, false))
                .unwrap()
                .is_some()
        );
        // A newer generation active or pending is another spec: before, a
        // wait for 7 returned success once 9 was Ready.
        assert!(matches!(
            route_progress(&r, 7, &row(Some(9), None, true)),
            Err(WaitError::Superseded { by: 9, .. })
        ));
        assert!(matches!(
            route_progress(&r, 7, &row(Some(3), Some(9), false)),
            Err(WaitError::Superseded { by: 9, .. })
        ));
        // Withdrawn or abandoned: the active spec stayed older.
        assert!(matches!(
            route_progress(&r, 7, &row(Some(3), None, true)),
            Err(WaitError::Failed { .. })
        ));
        // Served nowhere, or forced: never Ready, and waiting says why.
        let mut orphan = row(Some(3), Some(7), false);
        orphan.not_served = Some("parentRef 0: Gateway ns/gw does not exist".into());
        assert!(matches!(
            route_progress(&r, 7, &orphan),
            Err(WaitError::NotServed { .. })
        ));
        let mut forced = row(Some(7), None, true);
        forced.forced = true;
        assert!(matches!(
            route_progress(&r, 7, &forced),
            Err(WaitError::Forced { .. })
        ));
    }
}
