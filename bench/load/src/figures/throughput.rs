//! Committed route updates per second with many clients: each client owns
//! one route and applies it back to back for a fixed time over its own
//! connection to the leader, cycling through [`RING`] header values, so
//! every apply is a new generation (checked: one that is not counts as an
//! error). Payloads are encoded before the clock
//! starts; an apply counts once its reply (= commit on a majority) is in.
//! Apart from it, how many of those changes were cut over within the
//! time (the leader's `cutover_commits` counter): a client's next apply
//! supersedes a change still pending, so applies and cutovers differ
//! unless each apply carries its own commit.

use super::Context;
use crate::admin;
use crate::report::Throughput;
use crate::routes::{self, Variant};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The header value a client's template carries, replaced in every apply
/// by a value of its own: a number no change counter reaches.
const MARKER: u64 = 987_654_321_987_654;

/// One client's route as encoded JSON around the header value, which
/// every apply fills with a value never used before: going back to the
/// spec a route is active at would withdraw its pending change without a
/// new generation (a ring of 64 specs did, when 64 applies passed without
/// a commit), and encoding the route afresh each time would cost the
/// coordinators' CPU (the tool shares their cores).
struct Template {
    before: Vec<u8>,
    after: Vec<u8>,
}

impl Template {
    fn new(json: &[u8]) -> anyhow::Result<Template> {
        let marker = MARKER.to_string();
        let text = std::str::from_utf8(json)?;
        let (before, after) = text
            .split_once(&marker)
            .ok_or_else(|| anyhow::anyhow!("the route's JSON lacks its header value"))?;
        Ok(Template {
            before: before.as_bytes().to_vec(),
            after: after.as_bytes().to_vec(),
        })
    }

    /// The route with header value `value`.
    fn with(&self, value: &str) -> Vec<u8> {
        let mut json = Vec::with_capacity(self.before.len() + value.len() + self.after.len());
        json.extend_from_slice(&self.before);
        json.extend_from_slice(value.as_bytes());
        json.extend_from_slice(&self.after);
        json
    }
}

/// Runs `clients` clients on routes `first..first + clients` for
/// `seconds`.
pub async fn run(
    ctx: &mut Context,
    first: usize,
    clients: usize,
    seconds: f64,
) -> anyhow::Result<Throughput> {
    let mut payloads = Vec::with_capacity(clients);
    for i in first..first + clients {
        let json = admin::encode(&routes::update(i, Variant::Header(MARKER), ctx.endpoints)?)?;
        // This run's values for the route: `<change>-<k>`, a change number
        // no other phase uses.
        payloads.push((i, Template::new(&json)?, ctx.next_change()));
    }
    let run_for = Duration::from_secs_f64(seconds);
    let barrier = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = Vec::new();
    for (i, template, change) in payloads {
        let mut client = admin::client(&ctx.leader, &ctx.security)?;
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let name = routes::route_name(i);
            let (mut commits, mut errors, mut last) = (0u64, 0u64, 0u64);
            let mut first_error = None;
            barrier.wait().await;
            let start = Instant::now();
            let mut k = 0usize;
            // Bounded: stops at the deadline (each call has its own).
            while start.elapsed() < run_for {
                let json = template.with(&format!("{change}-{k}"));
                k += 1;
                match admin::apply(&mut client, json).await {
                    Ok(reply) => {
                        let g = admin::generation_of(&reply, &name).unwrap_or(0);
                        if g > last {
                            commits += 1;
                            last = g;
                        } else {
                            errors += 1;
                            first_error.get_or_insert_with(|| {
                                format!("{name}: apply gave no new generation")
                            });
                        }
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| e.to_string());
                    }
                }
            }
            (commits, errors, first_error)
        }));
    }
    let cutovers_before = leader_cutovers(ctx).await;
    barrier.wait().await;
    let start = Instant::now();
    let (mut commits, mut errors) = (0, 0);
    for task in tasks {
        let (c, e, why) = task.await?;
        commits += c;
        errors += e;
        if let Some(why) = why {
            ctx.notes.push(format!("throughput: {why}"));
        }
    }
    let elapsed = start.elapsed();
    let cutovers = match (cutovers_before, leader_cutovers(ctx).await) {
        (Some(before), Some(after)) => Some((after - before).max(0.0) as u64),
        _ => None,
    };
    ctx.updates += commits;
    Ok(Throughput {
        clients,
        commits,
        cutovers,
        errors,
        elapsed,
    })
}

/// The leader's count of cutovers committed, when it was started here.
async fn leader_cutovers(ctx: &Context) -> Option<f64> {
    let admin = ctx.cluster.member(&ctx.leader)?.admin.clone();
    crate::cluster::scrape(admin)
        .await
        .get("switchyard_coordinator_cutover_commits_total")
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::Endpoints;

    #[test]
    fn every_apply_carries_a_header_value_of_its_own() {
        let json =
            admin::encode(&routes::update(3, Variant::Header(MARKER), Endpoints::MadeUp).unwrap())
                .unwrap();
        let template = Template::new(&json).unwrap();
        let (a, b) = (template.with("7-1"), template.with("7-2"));
        assert_ne!(a, b);
        let a: serde_json::Value = serde_json::from_slice(&a).expect("still JSON");
        let text = a.to_string();
        assert!(
            text.contains("\"7-1\"") && !text.contains(&MARKER.to_string()),
            "{text}"
        );
    }
}
