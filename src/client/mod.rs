//! The admin client `apply`, `delete` and `status` use: tries the given
//! coordinators in turn, follows the leader's address when a follower
//! refuses, retries only what is safe to retry and only while waiting can
//! help (not when every coordinator refuses connections or fails TLS), and
//! gives up at a deadline.

mod wait;

pub use wait::WaitError;

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;
use switchyard_proto::pb::admin_service_client::AdminServiceClient;
use switchyard_tls::Security;
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::{Code, Status};

pub use switchyard_proto::LEADER_HEADER;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A coordinator answered and refused the request; retrying will not help.
    #[error("{}", .0.message())]
    Refused(Status),
    /// Every coordinator failed in one round in a way waiting does not
    /// change (nothing listens there, TLS cannot be established), so the
    /// call ended at once instead of at the deadline.
    #[error("no coordinator can be reached: {}", join(.failures))]
    Unusable {
        /// What each address said, in the order tried.
        failures: Vec<AddressFailure>,
    },
    /// No coordinator could complete the request before the deadline.
    #[error("no coordinator answered within {timeout:?}: {}", join(.failures))]
    Unreachable {
        /// The overall deadline.
        timeout: Duration,
        /// The last failure of each address tried, in the order tried.
        failures: Vec<AddressFailure>,
    },
}

/// One coordinator address and why the last attempt at it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressFailure {
    /// HOST:PORT.
    pub address: String,
    /// Why, with what to check when that is known.
    pub reason: String,
}

impl std::fmt::Display for AddressFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.address, self.reason)
    }
}

fn join(failures: &[AddressFailure]) -> String {
    if failures.is_empty() {
        return "no coordinator address given".into();
    }
    failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// How one failed attempt bears on retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Waiting cannot fix it: the address refuses connections, or TLS
    /// with it fails (certificates, CA, TLS on one side only).
    Useless,
    /// It can change: no leader yet, a timeout, a connection lost.
    Useful,
}

/// The last failure of each address, in the order first tried.
#[derive(Default)]
struct Failures(Vec<(AddressFailure, Retry)>);

impl Failures {
    fn note(&mut self, address: &str, reason: String, retry: Retry) {
        let failure = AddressFailure {
            address: address.to_string(),
            reason,
        };
        match self.0.iter_mut().find(|(f, _)| f.address == address) {
            Some(slot) => *slot = (failure, retry),
            None => self.0.push((failure, retry)),
        }
    }

    fn all(&self) -> Vec<AddressFailure> {
        self.0.iter().map(|(f, _)| f.clone()).collect()
    }
}

/// A client for a set of coordinators.
pub struct AdminClient {
    addresses: Vec<String>,
    timeout: Duration,
    channels: HashMap<String, Channel>,
    /// Where to try first: the last leader we heard of.
    preferred: Option<String>,
    /// Mutual TLS as an admin, or `--insecure`.
    security: Security,
}

impl AdminClient {
    /// A client for `addresses` (HOST:PORT); every call gives up after
    /// `timeout`; connections are secured as `security` says.
    pub fn new(addresses: Vec<String>, timeout: Duration, security: Security) -> Self {
        AdminClient {
            addresses,
            timeout,
            channels: HashMap::new(),
            preferred: None,
            security,
        }
    }

    fn channel(&mut self, address: &str) -> Result<Channel, String> {
        if let Some(c) = self.channels.get(address) {
            return Ok(c.clone());
        }
        let timeout = self.timeout;
        let channel = switchyard_tls::client::channel(
            address,
            &self.security,
            None,
            Duration::from_secs(1),
            |endpoint| endpoint.timeout(timeout),
        )
        .map_err(|e| format!("{address}: not a valid address: {e}"))?;
        self.channels.insert(address.to_string(), channel.clone());
        Ok(channel)
    }

    /// One round: the leader we last heard of, then every address given,
    /// each once.
    fn round(&self) -> Vec<String> {
        let mut order: Vec<String> = self.preferred.iter().cloned().collect();
        for address in &self.addresses {
            if !order.contains(address) {
                order.push(address.clone());
            }
        }
        order
    }

    /// Calls `f` on a coordinator until one answers. Refusals that name a
    /// leader are retried there at once; unreachable coordinators are
    /// skipped. `idempotent` calls are also retried after an ambiguous
    /// failure (the request may or may not have been applied); others
    /// return it.
    ///
    /// Retries go on until the deadline only while they can help: when, in
    /// one round over every address, each one refused the connection or
    /// failed TLS (and none answered or named a leader), the call ends at
    /// once with [`ClientError::Unusable`]. No leader yet, a leader that
    /// cannot be reached during a failover, and timeouts are retried.
    pub async fn call<T, F, Fut>(&mut self, idempotent: bool, f: F) -> Result<T, ClientError>
    where
        F: Fn(AdminServiceClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        if self.addresses.is_empty() && self.preferred.is_none() {
            return Err(ClientError::Unusable {
                failures: Vec::new(),
            });
        }
        let deadline = Instant::now() + self.timeout;
        let mut failures = Failures::default();
        // Addresses tried since the last pause; a leader hint to one of
        // them (a follower still naming a dead leader) waits before the
        // next try instead of spinning.
        let mut tried: Vec<String> = Vec::new();
        while Instant::now() < deadline {
            let mut redirected = None;
            let mut useless_everywhere = true;
            let mut attempted = Vec::new();
            for address in &self.round() {
                if Instant::now() >= deadline {
                    break;
                }
                tried.push(address.clone());
                attempted.push(address.clone());
                let channel = match self.channel(address) {
                    Ok(c) => c,
                    Err(e) => return Err(ClientError::Refused(Status::invalid_argument(e))),
                };
                let client = AdminServiceClient::new(channel)
                    .max_decoding_message_size(64 * 1024 * 1024)
                    .max_encoding_message_size(64 * 1024 * 1024);
                let status = match f(client).await {
                    Ok(response) => {
                        self.preferred = Some(address.clone());
                        return Ok(response.into_inner());
                    }
                    Err(status) => status,
                };
                let leader = status
                    .metadata()
                    .get(LEADER_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let (reason, retry) = self.explain(&status);
                failures.note(address, reason, retry);
                if retry == Retry::Useless {
                    // The request never reached the service (no
                    // connection, no TLS): try the next address, whatever
                    // the code and even if the call is not idempotent.
                    if self.preferred.as_deref() == Some(address.as_str()) {
                        self.preferred = None;
                    }
                    continue;
                }
                useless_everywhere = false;
                match status.code() {
                    Code::Unavailable => {
                        // Not applied anywhere: a follower without a
                        // leader, or a coordinator that is down.
                        if let Some(leader) = leader {
                            redirected = Some(leader);
                            break;
                        }
                        if self.preferred.as_deref() == Some(address.as_str()) {
                            self.preferred = None;
                        }
                    }
                    Code::DeadlineExceeded | Code::Unknown | Code::Cancelled if idempotent => {}
                    Code::DeadlineExceeded | Code::Unknown | Code::Cancelled => {
                        return Err(ClientError::Refused(Status::new(
                            status.code(),
                            format!(
                                "{address}: {} (the request may or may not have been applied; check `switchyard status`)",
                                status.message()
                            ),
                        )));
                    }
                    _ => return Err(ClientError::Refused(status)),
                }
            }
            match redirected {
                Some(leader) => {
                    let again = tried.contains(&leader);
                    self.preferred = Some(leader);
                    if !again {
                        continue;
                    }
                }
                None if useless_everywhere && round_covers(&attempted, &self.addresses) => {
                    return Err(ClientError::Unusable {
                        failures: failures.all(),
                    });
                }
                None => {}
            }
            tried.clear();
            let pause =
                Duration::from_millis(100).min(deadline.saturating_duration_since(Instant::now()));
            tokio::time::sleep(pause).await;
        }
        Err(ClientError::Unreachable {
            timeout: self.timeout,
            failures: failures.all(),
        })
    }
}

/// Whether a round tried every address given (a round cut short by the
/// deadline or a leader hint did not).
fn round_covers(attempted: &[String], addresses: &[String]) -> bool {
    addresses.iter().all(|a| attempted.contains(a))
}

impl AdminClient {
    /// What a failed attempt means for an operator, and whether retrying
    /// can help. The bare messages (`transport error`, `h2 protocol
    /// error`, rustls' `UnknownIssuer`) say neither.
    fn explain(&self, status: &Status) -> (String, Retry) {
        let message = status.message();
        if let Security::Insecure = self.security
            && message.contains("h2 protocol error")
        {
            let hint = "the coordinator probably requires TLS: pass --ca, --cert and --key instead of --insecure";
            return (format!("{message} ({hint})"), Retry::Useless);
        }
        let Some(io) = io_error_in(status) else {
            return (message.to_string(), Retry::Useful);
        };
        let text = io.to_string();
        match io.kind() {
            std::io::ErrorKind::ConnectionRefused => (
                "connection refused: nothing listens there (is the coordinator running, and is this the port of its --listen?)".into(),
                Retry::Useless,
            ),
            // rustls reports certificate and protocol failures, and alerts
            // the peer sent, as invalid data.
            std::io::ErrorKind::InvalidData => {
                let hint = match &self.security {
                    Security::Tls(_) => tls_hint(&text),
                    Security::Insecure => "the coordinator probably requires TLS: pass --ca, --cert and --key instead of --insecure",
                };
                (format!("{text} ({hint})"), Retry::Useless)
            }
            _ => (text, Retry::Useful),
        }
    }
}

/// The innermost I/O error under a status (the connector's TCP or TLS
/// failure), if there is one.
fn io_error_in(status: &Status) -> Option<&std::io::Error> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    let mut found = None;
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            found = Some(io);
        }
        source = e.source();
    }
    found
}

/// What to check for a TLS failure, from rustls' wording (its error type
/// does not survive the connector, only its text does).
fn tls_hint(text: &str) -> &'static str {
    // Two CAs from `certs init` share a name, so a certificate of the other
    // one is found to have a bad signature rather than an unknown issuer.
    if text.contains("UnknownIssuer") || text.contains("BadSignature") {
        "the coordinator's certificate is not signed by the CA given with --ca: another cluster's CA, or the wrong file"
    } else if text.contains("NotValidForName") {
        "the coordinator's certificate does not name coordinator.switchyard.internal: it is not a coordinator certificate"
    } else if text.to_ascii_lowercase().contains("expired") {
        "a certificate has expired: issue new ones with `switchyard certs issue`"
    } else if text.contains("received fatal alert") {
        "the coordinator refused this client certificate: it is not from the coordinator's CA, has expired, or is not an admin certificate"
    } else {
        "the coordinator runs with --insecure, or does not trust this certificate's CA, or the certificate expired"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_failures_say_which_side_to_check() {
        let unknown = "TLS handshake failed: invalid peer certificate: UnknownIssuer";
        assert!(tls_hint(unknown).contains("not signed by the CA given with --ca"));
        let same_name = "TLS handshake failed: invalid peer certificate: BadSignature";
        assert!(tls_hint(same_name).contains("not signed by the CA given with --ca"));
        let alert = "received fatal alert: UnknownCA";
        assert!(tls_hint(alert).contains("refused this client certificate"));
        let name = "TLS handshake failed: invalid peer certificate: NotValidForName";
        assert!(tls_hint(name).contains("not a coordinator certificate"));
    }

    #[test]
    fn a_failure_per_address_the_latest_kept_in_first_tried_order() {
        let mut f = Failures::default();
        f.note("a", "one".into(), Retry::Useless);
        f.note("b", "two".into(), Retry::Useful);
        f.note("a", "three".into(), Retry::Useful);
        assert_eq!(
            join(&f.all()),
            "a: three; b: two",
            "one line, every address once"
        );
        assert_eq!(join(&[]), "no coordinator address given");
        let given = ["a".to_string(), "b".to_string()];
        assert!(round_covers(&given, &given));
        assert!(!round_covers(&given[..1], &given));
    }
}
