//! The coordinators a proxy talks to: one reused gRPC channel per address,
//! own-zone coordinators first, and the leader's address when a follower
//! names it. Connections are mutual TLS as this proxy unless `--insecure`.
//!
//! Owns: parsing `--coordinators`, the channels, and where the next unary
//! call goes. Does not own: classifying failures (`error`) or when to try
//! again (`backoff`, and the tasks that use it).

use super::error::ControlError;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use switchyard_proto::pb::fleet_service_client::FleetServiceClient;
use switchyard_tls::Security;
use tonic::transport::Channel;

/// Largest message this proxy accepts from a coordinator (the
/// configuration): above any `--max-message-bytes` a coordinator is
/// likely to run with.
pub const MAX_CONFIG_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// The port a coordinator address without one means: the port of the
/// coordinator's default `--listen` (`127.0.0.1:7000`), as for
/// `switchyard apply --coordinators HOST` and the proxy's
/// `--coordinators [ZONE=]HOST`.
pub const DEFAULT_COORDINATOR_PORT: u16 = 7000;

/// Parses one coordinator address, `HOST[:PORT]`, into `HOST:PORT`: a host
/// without a port gets [`DEFAULT_COORDINATOR_PORT`] (rather than the port
/// 80 an `http://HOST` URI would mean). IPv6 addresses are bracketed
/// (`[::1]:7000`, or `[::1]`); the port must be 1..=65535.
pub fn parse_host_port(text: &str) -> Result<String, String> {
    let text = text.trim();
    let form = format!("expected HOST:PORT (a HOST alone means port {DEFAULT_COORDINATOR_PORT})");
    if text.is_empty() {
        return Err(format!("empty address; {form}"));
    }
    if text.contains("://") || text.contains('/') {
        return Err(format!("{text:?}: no scheme or path; {form}"));
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{text:?}: unclosed '['; {form}"))?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| format!("{text:?}: expected ':PORT' after ']'; {form}"))?,
            ),
        };
        (format!("[{inside}]"), port)
    } else {
        match text.matches(':').count() {
            0 => (text.to_string(), None),
            1 => {
                let (host, port) = text.split_once(':').unwrap_or((text, ""));
                (host.to_string(), Some(port))
            }
            _ => {
                return Err(format!(
                    "{text:?}: an IPv6 address needs brackets, [ADDRESS]:PORT; {form}"
                ));
            }
        }
    };
    if host.is_empty() || host == "[]" || host.chars().any(char::is_whitespace) {
        return Err(format!("{text:?}: no host; {form}"));
    }
    let port = match port {
        None => DEFAULT_COORDINATOR_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n != 0 => n,
            _ => {
                return Err(format!(
                    "{text:?}: the port must be a number from 1 to 65535; {form}"
                ));
            }
        },
    };
    Ok(format!("{host}:{port}"))
}

/// One `--coordinators` entry: `[ZONE=]HOST[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorAddress {
    /// The coordinator's zone, when given.
    pub zone: Option<String>,
    /// HOST:PORT of its gRPC listener.
    pub address: String,
}

impl CoordinatorAddress {
    /// Parses `[ZONE=]HOST[:PORT]`; the address as [`parse_host_port`]
    /// does (a HOST alone means [`DEFAULT_COORDINATOR_PORT`]).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (zone, address) = match text.split_once('=') {
            Some((zone, address)) => (Some(zone.trim().to_string()), address),
            None => (None, text),
        };
        if zone.as_deref() == Some("") {
            return Err(format!(
                "coordinator {text:?}: empty zone before '='; expected [ZONE=]HOST:PORT"
            ));
        }
        let address = parse_host_port(address).map_err(|e| format!("coordinator {text:?}: {e}"))?;
        Ok(CoordinatorAddress { zone, address })
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
    ) -> Result<FleetServiceClient<Channel>, ControlError> {
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
                .map_err(|source| ControlError::Address {
                    coordinator: address.to_string(),
                    source,
                })?;
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

    /// Calls go to `address` from now on: a coordinator named it the
    /// leader on the watch stream.
    pub fn follow_leader(&self, address: &str) {
        *self.leader.lock().unwrap_or_else(|e| e.into_inner()) = Some(address.to_string());
    }

    /// Remembers what a failed call said about the leader: a "not the
    /// leader" refusal that names one is followed; otherwise a leader that
    /// failed is forgotten, or the next call tries the next address.
    pub fn note_failure(&self, error: &ControlError) {
        let address = error.coordinator();
        let mut leader = self.leader.lock().unwrap_or_else(|e| e.into_inner());
        match error.leader_hint() {
            Some(hint) => *leader = Some(hint.to_string()),
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
    use crate::control::error::Call;
    use switchyard_proto::LEADER_HEADER;

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
        c.note_failure(&ControlError::from_status(
            "127.0.0.1:2",
            Call::Heartbeat,
            &refusal,
        ));
        assert_eq!(c.leader_or_first().as_deref(), Some("127.0.0.1:3"));
    }

    #[test]
    fn addresses_get_the_default_port_or_are_refused_with_the_form() {
        let ok = |text: &str| parse_host_port(text).unwrap();
        assert_eq!(ok("localhost"), "localhost:7000");
        assert_eq!(ok(" localhost:7001 "), "localhost:7001");
        assert_eq!(ok("10.0.0.1"), "10.0.0.1:7000");
        assert_eq!(ok("[::1]"), "[::1]:7000");
        assert_eq!(ok("[::1]:7002"), "[::1]:7002");
        for bad in [
            "",
            ":7000",
            "localhost:",
            "localhost:0",
            "localhost:65536",
            "localhost:http",
            "::1",
            "[::1",
            "[::1]7000",
            "[]:7000",
            "http://localhost:7000",
            "a b:7000",
        ] {
            let err = parse_host_port(bad).unwrap_err();
            assert!(err.contains("expected HOST:PORT"), "{bad:?}: {err}");
        }
        let with_zone = CoordinatorAddress::parse("a=localhost").unwrap();
        assert_eq!(with_zone.zone.as_deref(), Some("a"));
        assert_eq!(with_zone.address, "localhost:7000");
        assert_eq!(
            CoordinatorAddress::parse("nope").unwrap().address,
            "nope:7000"
        );
        let err = CoordinatorAddress::parse("a=localhost:x").unwrap_err();
        assert!(err.starts_with("coordinator \"a=localhost:x\": "), "{err}");
        assert!(CoordinatorAddress::parse("=localhost:1").is_err());
    }
}
