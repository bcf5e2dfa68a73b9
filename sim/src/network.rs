//! Proxy-to-leader messages in flight: each one may be lost, duplicated or
//! delayed (so overtaken by later ones), never by more than the configured
//! bound.
//!
//! Configuration snapshots do not travel here: the run hands a proxy a
//! snapshot read from some coordinator (possibly a lagging one, or an old
//! one replayed), which models the watch stream's staleness directly.

use super::rng::Rng;
use std::collections::BTreeMap;
use switchyard_coordinator::cutover::BackendEvidence;
use switchyard_proto::model::{BackendKey, ObjectName};

/// What a proxy tells the leader.
#[derive(Debug, Clone)]
pub enum Message {
    /// Join (or rejoin) the fleet.
    Register {
        /// Proxy number.
        proxy: usize,
        /// The run (incarnation) that sent it: a delayed registration of
        /// an earlier run is not this run's.
        incarnation: u32,
    },
    /// Lease renewal with the generations the proxy routes by.
    Heartbeat {
        /// Proxy number.
        proxy: usize,
        /// The registration it belongs to.
        registration: u64,
        /// Route to served generation.
        applied: BTreeMap<ObjectName, u64>,
    },
    /// Readiness evidence.
    Report {
        /// Proxy number.
        proxy: usize,
        /// The registration it belongs to.
        registration: u64,
        /// What it measured, when it sent this.
        backends: Vec<(BackendKey, BackendEvidence)>,
    },
}

impl Message {
    /// The sending proxy.
    pub fn proxy(&self) -> usize {
        match self {
            Message::Register { proxy, .. }
            | Message::Heartbeat { proxy, .. }
            | Message::Report { proxy, .. } => *proxy,
        }
    }
}

/// How the network treats messages right now.
#[derive(Debug, Clone, Copy)]
pub struct Conditions {
    /// Chance of loss, per mille.
    pub loss_permille: u32,
    /// Chance of a duplicate, per mille.
    pub dup_permille: u32,
    /// Longest delay.
    pub max_delay_ms: u64,
}

#[derive(Debug, Clone)]
struct InFlight {
    deliver_at_ms: u64,
    seq: u64,
    message: Message,
}

/// Messages on their way to the leader.
#[derive(Debug, Default)]
pub struct Network {
    in_flight: Vec<InFlight>,
    seq: u64,
    /// Messages lost so far.
    pub lost: u64,
    /// Extra copies delivered so far.
    pub duplicated: u64,
}

impl Network {
    /// Sends `message` at `now_ms` under `conditions`.
    pub fn send(&mut self, message: Message, now_ms: u64, conditions: Conditions, rng: &mut Rng) {
        if rng.chance(conditions.loss_permille) {
            self.lost += 1;
            return;
        }
        let copies = if rng.chance(conditions.dup_permille) {
            self.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = rng.range(0, conditions.max_delay_ms + 1);
            self.seq += 1;
            self.in_flight.push(InFlight {
                deliver_at_ms: now_ms + delay,
                seq: self.seq,
                message: message.clone(),
            });
        }
    }

    /// Everything due by `now_ms`, in delivery order, each with the time
    /// it arrives (which the receiver must use: the simulation's clock moves
    /// in steps, the network's does not).
    pub fn due(&mut self, now_ms: u64) -> Vec<(u64, Message)> {
        let (mut due, rest): (Vec<InFlight>, Vec<InFlight>) = self
            .in_flight
            .drain(..)
            .partition(|m| m.deliver_at_ms <= now_ms);
        self.in_flight = rest;
        due.sort_by_key(|m| (m.deliver_at_ms, m.seq));
        due.into_iter()
            .map(|m| (m.deliver_at_ms, m.message))
            .collect()
    }
}
