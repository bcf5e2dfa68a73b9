//! The coordinators a proxy talks to: one reused gRPC channel per address,
//! own-zone coordinators first, and the leader's address when a follower
//! names it. Connections are mutual TLS as this proxy unless `--insecure`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use switchyard_proto::pb::fleet_service_client::FleetServiceClient;
use switchyard_tls::Security;
use tonic::transport::Channel;

/// Metadata key with which a follower names the leader's address.
pub const LEADER_HEADER: &str = "x-switchyard-leader";

/// Largest message this proxy accepts from a coordinator (the
/// configuration): above any `--max-message-bytes` a coordinator is
/// likely to run with.
pub const MAX_CONFIG_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// One `--coordinators` entry: `[ZONE=]HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorAddress {
    /// The coordinator's zone, when given.
    pub zone: Option<String>,
    /// HOST:PORT of its gRPC listener.
    pub address: String,
}

impl CoordinatorAddress {
    /// Parses `[ZONE=]HOST:PORT`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (zone, address) = match text.split_once('=') {
            Some((zone, address)) => (Some(zone.trim().to_string()), address.trim()),
            None => (None, text.trim()),
        };
        if !address.contains(':') || address.starts_with(':') {
            return Err(format!(
                "coordinator {text:?} must look like [ZONE=]HOST:PORT"
            ));
        }
        Ok(CoordinatorAddress {
            zone,
            address: address.to_string(),
        })
    }
}

/// Channels to the coordinators, in the order to try them.
pub struct Coordinators {
    order: Vec<String>,
    channels: Mutex<HashMap<String, Channel>>,
    leader: Mutex<Option<String>>,
    rpc_timeout: Duration,
    security: Security,
}

impl Coordinators {
    /// `addresses` ordered with those in `zone` first; every unary RPC gets
    /// `rpc_timeout`.
    pub fn new(
        addresses: &[CoordinatorAddress],
        zone: &str,
        rpc_timeout: Duration,
        security: Security,
    ) -> Self {
        let mut order: Vec<&CoordinatorAddress> = addresses.iter().collect();
        order.sort_by_key(|c| c.zone.as_deref() != Some(zone));
        Coordinators {
            order: order.into_iter().map(|c| c.address.clone()).collect(),
            channels: Mutex::new(HashMap::new()),
            leader: Mutex::new(None),
            rpc_timeout,
            security,
        }
    }

    /// Addresses in preference order.
    pub fn order(&self) -> &[String] {
        &self.order
    }

    /// A client for `address` over its (reused) channel. `streaming`
    /// clients get no per-call timeout (a watch lives as long as it can).
    pub fn client(
        &self,
        address: &str,
        streaming: bool,
    ) -> Result<FleetServiceClient<Channel>, String> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        let key = format!("{address}/{streaming}");
        let channel = match channels.get(&key) {
            Some(c) => c.clone(),
            None => {
                let rpc_timeout = self.rpc_timeout;
                let channel = switchyard_tls::client::channel(
                    address,
                    &self.security,
                    None,
                    rpc_timeout,
                    |endpoint| {
                        let endpoint = endpoint
                            .http2_keep_alive_interval(Duration::from_secs(5))
                            .keep_alive_timeout(Duration::from_secs(5));
                        if streaming {
                            endpoint
                        } else {
                            endpoint.timeout(rpc_timeout)
                        }
                    },
                )
                .map_err(|e| format!("{address}: {e}"))?;
                channels.insert(key, channel.clone());
                channel
            }
        };
        // The coordinators' `--max-message-bytes` bounds the configuration
        // (they refuse applies that would not fit it); this side accepts
        // whatever they send.
        Ok(FleetServiceClient::new(channel)
            .max_decoding_message_size(MAX_CONFIG_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_CONFIG_MESSAGE_BYTES))
    }

    /// The leader's address if a follower told us, else the first choice.
    pub fn leader_or_first(&self) -> Option<String> {
        let leader = self
            .leader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        leader.or_else(|| self.order.first().cloned())
    }

    /// Remembers what a refusal said about the leader; forgets a leader
    /// that failed.
    pub fn note_error(&self, address: &str, status: &tonic::Status) {
        let hint = status
            .metadata()
            .get(LEADER_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut leader = self.leader.lock().unwrap_or_else(|e| e.into_inner());
        match hint {
            Some(h) => *leader = Some(h),
            None if leader.as_deref() == Some(address) => *leader = None,
            None => {
                // Rotate: the next call tries the next address.
                let next = self
                    .order
                    .iter()
                    .position(|a| a == address)
                    .map(|i| self.order[(i + 1) % self.order.len()].clone());
                *leader = next;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_zone_first_and_leader_hints_are_followed() {
        let list: Vec<CoordinatorAddress> = ["a=127.0.0.1:1", "b=127.0.0.1:2", "127.0.0.1:3"]
            .iter()
            .map(|t| CoordinatorAddress::parse(t).unwrap())
            .collect();
        let c = Coordinators::new(&list, "b", Duration::from_secs(1), Security::Insecure);
        assert_eq!(c.order()[0], "127.0.0.1:2");
        assert_eq!(c.leader_or_first().as_deref(), Some("127.0.0.1:2"));
        let mut refusal = tonic::Status::unavailable("not the leader");
        refusal
            .metadata_mut()
            .insert(LEADER_HEADER, "127.0.0.1:3".parse().unwrap());
        c.note_error("127.0.0.1:2", &refusal);
        assert_eq!(c.leader_or_first().as_deref(), Some("127.0.0.1:3"));
        assert!(CoordinatorAddress::parse("nope").is_err());
    }
}
