//! What can go wrong between this proxy and a coordinator, told apart.
//!
//! Owns: [`ControlError`] — a call that did not get through (transport), a
//! configuration that does not decode, a coordinator that answered and
//! refused (not the leader, an unknown registration, permission denied),
//! an update out of sequence with the configuration held, and a watch
//! stream that lags behind the leader — with the coordinator
//! (and the version or registration) each one is about; the one mapping
//! from a `tonic::Status` to it ([`ControlError::from_status`]); and the
//! level each kind is logged at by default ([`ControlError::level`]).
//!
//! Does not own: what to do about an error. Every kind is retryable — the
//! client never gives up on the control plane, and the data plane keeps
//! serving what it has meanwhile (static stability) — so there is no
//! separate fatal type here; the watch, apply and membership tasks decide
//! where to retry and after which back-off.

use std::fmt;
use switchyard_proto::LEADER_HEADER;
use tonic::Code;
use tracing::Level;

/// One RPC of `FleetService`, for errors and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `Register`.
    Register,
    /// `Heartbeat`.
    Heartbeat,
    /// `ReportReadiness`.
    ReportReadiness,
    /// `Deregister`.
    Deregister,
    /// `Watch` (opening the stream or reading from it).
    Watch,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Call::Register => "Register",
            Call::Heartbeat => "Heartbeat",
            Call::ReportReadiness => "ReportReadiness",
            Call::Deregister => "Deregister",
            Call::Watch => "Watch",
        })
    }
}

/// Why a coordinator that answered did not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// It is not the leader (or leads without a quorum); `leader` is the
    /// address it named in [`LEADER_HEADER`], if any.
    NotLeader {
        /// The leader's `HOST:PORT`, as the refusing coordinator named it.
        leader: Option<String>,
    },
    /// The leader does not know this registration (its lease expired, or a
    /// new leader has not heard of it): the proxy must register again.
    UnknownRegistration {
        /// The registration the call named.
        registration: u64,
    },
    /// This proxy's identity may not make the call (a certificate for
    /// another proxy, or none). Retrying does not help until the
    /// certificate changes.
    PermissionDenied,
    /// Any other answer that is not a success (a request the coordinator
    /// found invalid, an internal error on its side).
    Other {
        /// The gRPC code it answered with.
        code: Code,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotLeader { leader: Some(l) } => write!(f, "not the leader ({l} leads)"),
            Refusal::NotLeader { leader: None } => f.write_str("not the leader (none named)"),
            Refusal::UnknownRegistration { registration } => {
                write!(f, "registration {registration} is unknown to the leader")
            }
            Refusal::PermissionDenied => f.write_str("permission denied"),
            Refusal::Other { code } => write!(f, "{code:?}"),
        }
    }
}

/// A failed conversation with one coordinator. Every variant names the
/// coordinator (`HOST:PORT` as configured, or as a leader hint named it).
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No channel could be built for the address (it is not a valid URI
    /// authority). Configuration is parsed before the client starts, so
    /// this means an address a leader hint named.
    #[error("coordinator {coordinator}: cannot build a channel to this address")]
    Address {
        /// The address.
        coordinator: String,
        /// tonic's complaint.
        #[source]
        source: tonic::transport::Error,
    },
    /// The call did not get through, or broke off: connection refused or
    /// reset, deadline exceeded, the stream cut. Nothing is known about
    /// what the coordinator thinks.
    #[error("coordinator {coordinator}: {call} did not get through: {message}")]
    Transport {
        /// The coordinator.
        coordinator: String,
        /// The call.
        call: Call,
        /// The gRPC code tonic gave the failure.
        code: Code,
        /// tonic's description of it.
        message: String,
    },
    /// A configuration arrived but is not a `ConfigSnapshot` this proxy
    /// can read (a coordinator of another version, or a bug). The stream
    /// is dropped; the configuration held so far keeps serving.
    #[error("coordinator {coordinator}: configuration version {version} does not decode")]
    Decode {
        /// The coordinator that sent it.
        coordinator: String,
        /// The version it carried.
        version: u64,
        /// Why it does not decode.
        #[source]
        source: serde_json::Error,
    },
    /// A configuration arrived compressed and does not decompress (a
    /// payload cut or altered on the way, or a bug). Handled as
    /// [`ControlError::Decode`].
    #[error(
        "coordinator {coordinator}: configuration version {version} does not decompress: {reason}"
    )]
    Encoding {
        /// The coordinator that sent it.
        coordinator: String,
        /// The version it carried.
        version: u64,
        /// Why.
        reason: String,
    },
    /// An update that does not fit the configuration held: a delta or a
    /// bare version based on another version, chunks out of order or cut
    /// short, a delta that does not apply. Nothing of it was applied (the
    /// configuration held keeps serving); the proxy watches again for a
    /// full snapshot.
    #[error(
        "coordinator {coordinator}: configuration version {version} is out of sequence: {reason}"
    )]
    OutOfSequence {
        /// The coordinator that sent it.
        coordinator: String,
        /// The version it carried.
        version: u64,
        /// What did not fit.
        reason: String,
    },
    /// The coordinator answered and refused.
    #[error(
        "coordinator {coordinator} refused {call}: {refusal}{}",
        detail(message)
    )]
    Refused {
        /// The coordinator.
        coordinator: String,
        /// The call.
        call: Call,
        /// Why.
        refusal: Refusal,
        /// What the coordinator said, if anything.
        message: String,
    },
    /// The watch stream from this coordinator stays behind the leader's
    /// newest version (heartbeats show it): the coordinator is not getting
    /// the leader's commits, so the proxy watches another one.
    #[error(
        "coordinator {coordinator}: configuration stream holds version {held}, the leader has {leader}"
    )]
    Lagging {
        /// The coordinator being watched.
        coordinator: String,
        /// The newest version the stream has shown.
        held: u64,
        /// The leader's newest version, from the last heartbeat.
        leader: u64,
    },
}

fn detail(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

impl ControlError {
    /// Classifies a failed call to `coordinator`.
    ///
    /// A status tonic made on this side (it carries the underlying error as
    /// its source: a connection, h2 or deadline failure) is
    /// [`ControlError::Transport`]; a status the coordinator sent is a
    /// [`ControlError::Refused`]. `UNAVAILABLE` from a coordinator is how a
    /// follower says "not the leader", with the leader in
    /// [`LEADER_HEADER`] when it knows it.
    pub fn from_status(coordinator: &str, call: Call, status: &tonic::Status) -> Self {
        let coordinator = coordinator.to_string();
        let message = status.message().to_string();
        let from_this_side = std::error::Error::source(status).is_some();
        let refusal = match status.code() {
            _ if from_this_side => None,
            Code::Unavailable => Some(Refusal::NotLeader {
                leader: status
                    .metadata()
                    .get(LEADER_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string),
            }),
            Code::PermissionDenied => Some(Refusal::PermissionDenied),
            // No status came back at all: the deadline or the connection.
            Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => None,
            code => Some(Refusal::Other { code }),
        };
        match refusal {
            Some(refusal) => ControlError::Refused {
                coordinator,
                call,
                refusal,
                message,
            },
            None => ControlError::Transport {
                coordinator,
                call,
                code: status.code(),
                message,
            },
        }
    }

    /// The coordinator this error is about.
    pub fn coordinator(&self) -> &str {
        match self {
            ControlError::Address { coordinator, .. }
            | ControlError::Transport { coordinator, .. }
            | ControlError::Decode { coordinator, .. }
            | ControlError::Encoding { coordinator, .. }
            | ControlError::OutOfSequence { coordinator, .. }
            | ControlError::Refused { coordinator, .. }
            | ControlError::Lagging { coordinator, .. } => coordinator,
        }
    }

    /// The leader a "not the leader" refusal named, if any.
    pub fn leader_hint(&self) -> Option<&str> {
        match self {
            ControlError::Refused {
                refusal: Refusal::NotLeader { leader },
                ..
            } => leader.as_deref(),
            _ => None,
        }
    }

    /// Whether the leader does not know this proxy's registration, so the
    /// proxy must register again.
    pub fn is_unknown_registration(&self) -> bool {
        matches!(
            self,
            ControlError::Refused {
                refusal: Refusal::UnknownRegistration { .. },
                ..
            }
        )
    }

    /// The level this kind of error is logged at where the caller has no
    /// better knowledge: INFO for what a healthy cluster does (being sent
    /// to the leader), WARN for what a failure or failover does (a
    /// coordinator unreachable, a lagging stream, an unknown
    /// registration), ERROR for what retrying will not fix by itself (a
    /// configuration this proxy cannot read, a refused identity, a bad
    /// address).
    pub fn level(&self) -> Level {
        match self {
            ControlError::Refused {
                refusal: Refusal::NotLeader { .. },
                ..
            } => Level::INFO,
            ControlError::Transport { .. }
            | ControlError::Lagging { .. }
            | ControlError::OutOfSequence { .. }
            | ControlError::Refused {
                refusal: Refusal::UnknownRegistration { .. } | Refusal::Other { .. },
                ..
            } => Level::WARN,
            ControlError::Address { .. }
            | ControlError::Decode { .. }
            | ControlError::Encoding { .. }
            | ControlError::Refused {
                refusal: Refusal::PermissionDenied,
                ..
            } => Level::ERROR,
        }
    }
}

/// Displays an error with its chain of sources, `outer: inner: …`, for a
/// log line (the errors' own `Display` never repeats their source).
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

/// Logs `$error` (a [`ControlError`]) at `$level` (a `tracing::Level`
/// value chosen at run time) with the coordinator as a field, the error
/// with its chain, then the message.
macro_rules! log_error {
    ($level:expr, $error:expr, $($message:tt)+) => {{
        let error: &$crate::control::error::ControlError = $error;
        let chain = $crate::control::error::Chain(error);
        let coordinator = error.coordinator();
        match $level {
            ::tracing::Level::ERROR => ::tracing::error!(coordinator, error = %chain, $($message)+),
            ::tracing::Level::WARN => ::tracing::warn!(coordinator, error = %chain, $($message)+),
            ::tracing::Level::INFO => ::tracing::info!(coordinator, error = %chain, $($message)+),
            ::tracing::Level::DEBUG => ::tracing::debug!(coordinator, error = %chain, $($message)+),
            _ => ::tracing::trace!(coordinator, error = %chain, $($message)+),
        }
    }};
}
pub(crate) use log_error;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_followers_refusal_names_the_leader_and_a_local_failure_is_transport() {
        let mut refusal = tonic::Status::unavailable("not the leader; coordinator 2 leads");
        refusal
            .metadata_mut()
            .insert(LEADER_HEADER, "127.0.0.1:7002".parse().unwrap());
        let e = ControlError::from_status("127.0.0.1:7001", Call::Heartbeat, &refusal);
        assert_eq!(e.leader_hint(), Some("127.0.0.1:7002"));
        assert_eq!(e.level(), Level::INFO);
        assert_eq!(
            e.to_string(),
            "coordinator 127.0.0.1:7001 refused Heartbeat: not the leader (127.0.0.1:7002 leads): \
             not the leader; coordinator 2 leads"
        );

        let mut local = tonic::Status::unavailable("error trying to connect");
        local.set_source(std::sync::Arc::new(std::io::Error::other("refused")));
        let e = ControlError::from_status("127.0.0.1:7001", Call::Watch, &local);
        assert!(
            matches!(
                e,
                ControlError::Transport {
                    code: Code::Unavailable,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.leader_hint(), None);

        let denied = tonic::Status::permission_denied("Watch needs proxy \"p1\"");
        let e = ControlError::from_status("c", Call::Watch, &denied);
        assert!(matches!(
            e,
            ControlError::Refused {
                refusal: Refusal::PermissionDenied,
                ..
            }
        ));
        assert_eq!(e.level(), Level::ERROR);
    }

    #[test]
    fn a_decode_error_names_version_and_coordinator_once_and_chains_its_cause() {
        let source = serde_json::from_slice::<u64>(b"nope").unwrap_err();
        let cause = source.to_string();
        let e = ControlError::Decode {
            coordinator: "127.0.0.1:7001".into(),
            version: 42,
            source,
        };
        assert_eq!(
            e.to_string(),
            "coordinator 127.0.0.1:7001: configuration version 42 does not decode"
        );
        assert_eq!(Chain(&e).to_string(), format!("{e}: {cause}"));
    }
}
