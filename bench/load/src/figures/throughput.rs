//! Committed route updates per second with many clients: each client owns
//! one route and applies it back to back for a fixed time over its own
//! connection to the leader, cycling through [`RING`] header values, so
//! every apply is a new generation (checked: one that is not counts as an
//! error). Payloads are encoded before the clock
//! starts; an apply counts once its reply (= commit on a majority) is in.

use super::Context;
use crate::admin;
use crate::report::Throughput;
use crate::routes::{self, Variant};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Distinct specs each client cycles through. Going back to the spec a
/// route is active at withdraws its pending change without a new
/// generation, so a client never re-applies one of its last few specs.
const RING: usize = 64;

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
        let mut ring = Vec::with_capacity(RING);
        for _ in 0..RING {
            ring.push(admin::encode(&routes::update(
                i,
                Variant::Header(ctx.next_change()),
                ctx.endpoints,
            )?)?);
        }
        payloads.push((i, ring));
    }
    let run_for = Duration::from_secs_f64(seconds);
    let barrier = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = Vec::new();
    for (i, ring) in payloads {
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
                let json = ring[k % RING].clone();
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
    ctx.updates += commits;
    Ok(Throughput {
        clients,
        commits,
        errors,
        elapsed: start.elapsed(),
    })
}
