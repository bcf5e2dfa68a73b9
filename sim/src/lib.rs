//! The seeded simulation: the pure cores — the replicated state machine
//! ([`ReplicatedState::apply`]), the leader's cutover engine
//! ([`CutoverEngine`]) and each proxy's apply guard ([`ApplyGuard`]) —
//! driven by a random but reproducible schedule of user changes and
//! faults, with the design's invariants checked after every step and a
//! heal phase that checks convergence at the end.
//!
//! No clocks, sockets or threads: time is a number the run advances, the
//! network is a queue, Raft is a shared committed log. One seed fixes the
//! whole run; a failure prints the seed, the invariant, the step, the last
//! events and the command that reruns exactly that seed.
//!
//! # Layout
//!
//! - [`config`]: sizes, timings, fault rates, profiles, fault hooks.
//! - `run`: one seed — the world and the fault-phase step loop;
//!   `control`, `fleet`, `user`: what the coordinators, proxies and users
//!   do in a step; `heal`: the heal phase and its convergence check.
//! - `cluster` (Raft, abstractly), `proxy` (a proxy around the real
//!   guard), `network`, `world` (backends and resources), `truth` (ground
//!   truth of warm-up), `lease_model` (reference liveness), `rng`, `trace`.
//! - [`invariants`]: one checker per invariant, one file each.
//! - [`runner`]: which seeds to run, from the environment.
//!
//! Deliberately abstracted away: Raft's votes and uncommitted entries,
//! request routing and load balancing, the watch stream's transport (a
//! proxy is simply handed a snapshot from some coordinator, possibly an
//! old one), route deletion.
//!
//! [`ReplicatedState::apply`]: switchyard_coordinator::state::ReplicatedState::apply
//! [`CutoverEngine`]: switchyard_coordinator::cutover::CutoverEngine
//! [`ApplyGuard`]: switchyard_proxy::control::guard::ApplyGuard

mod cluster;
pub mod config;
mod control;
mod fleet;
mod heal;
pub mod invariants;
mod lease_model;
mod network;
mod proxy;
mod rng;
mod run;
pub mod runner;
mod trace;
mod truth;
mod user;
mod world;

pub use config::SimConfig;
pub use run::{SimStats, run_seed};
pub use runner::{Summary, run_seeds, seeds_from_env};
pub use trace::Failure;
