//! Whether the data plane is configured to serve a listener's port: the
//! fact a listener's `Programmed` condition rests on ("the listener has
//! been configured in the data plane and is ready to receive traffic"),
//! read from what the live proxies last reported about their sockets.
//!
//! The rule: a listener's port is bound when **every live proxy that
//! reports its listeners and has a socket for that port bound it**, and
//! at least one did. All, not one: the proxies sit behind one load
//! balancer, so a proxy that could not bind the port turns away its share
//! of that port's clients, and the Gateway API's `Programmed` promises the
//! listener is ready to receive traffic. A live proxy without a socket for
//! the port (a fleet split by `--listener NS/GATEWAY:PORT=…`) is not meant
//! to serve it and does not count either way. A proxy that sends no report
//! (older than the report, or not heard from since this leader took over)
//! is unknown, never failed; when no live proxy reports, the answer is
//! [`PortState::Unknown`] and the caller decides.
//!
//! Not here: liveness (the cutover engine's leases; callers pass
//! [`ProxyStatus::live`]), which listener is conflicted (`conflicts`), and
//! writing conditions (the status writers').

use crate::model::meta::ObjectName;
use crate::model::status::ProxyStatus;
use std::fmt;

/// Whether the live proxies bound one listener's port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortState {
    /// Every live, reporting proxy with a socket for the port bound it.
    Bound {
        /// How many proxies bound it.
        proxies: usize,
    },
    /// Some live proxy failed to bind it: `PortUnavailable`.
    Unavailable {
        /// Per failed socket: the proxy id, its address and the error.
        failed: Vec<FailedBind>,
        /// How many proxies did bind it.
        bound: usize,
    },
    /// No live, reporting proxy has a socket for the port (none was given
    /// a `--listener` for it): nothing can serve it, `PortUnavailable`.
    NotListened {
        /// How many live proxies reported their listeners.
        reporting: usize,
    },
    /// No live proxy reported its listeners (old proxies, none live, a
    /// new leader not heard from them yet, or a follower's view).
    Unknown,
}

/// A socket a proxy failed to bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedBind {
    /// The proxy.
    pub proxy: String,
    /// The address it tried.
    pub address: String,
    /// Why it failed, as the proxy said.
    pub error: String,
}

impl PortState {
    /// `Some(true)` when bound, `Some(false)` when the port is unavailable
    /// (`PortUnavailable`), `None` when unknown.
    pub fn programmed(&self) -> Option<bool> {
        match self {
            PortState::Bound { .. } => Some(true),
            PortState::Unavailable { .. } | PortState::NotListened { .. } => Some(false),
            PortState::Unknown => None,
        }
    }

    /// The listener `Programmed` condition's reason this state gives:
    /// `Programmed` (bound), `PortUnavailable` (not bound, or no socket
    /// for the port), `Pending` (unknown: the status writer should not
    /// claim either way yet).
    pub fn reason(&self) -> &'static str {
        match self.programmed() {
            Some(true) => "Programmed",
            Some(false) => "PortUnavailable",
            None => "Pending",
        }
    }
}

impl fmt::Display for PortState {
    /// A condition message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortState::Bound { proxies } => write!(f, "bound by {proxies} live proxies"),
            PortState::Unavailable { failed, bound } => {
                let each: Vec<String> = failed
                    .iter()
                    .map(|b| format!("proxy {} cannot bind {}: {}", b.proxy, b.address, b.error))
                    .collect();
                write!(
                    f,
                    "{} (bound by {bound} other live proxies)",
                    each.join("; ")
                )
            }
            PortState::NotListened { reporting } => write!(
                f,
                "none of the {reporting} live proxies has a listener socket for this port"
            ),
            PortState::Unknown => f.write_str("no live proxy has reported its listener sockets"),
        }
    }
}

/// Whether the live proxies among `proxies` bound the port of `gateway`'s
/// listener on `port` (see the module docs for the rule).
///
/// Cost: one pass over the proxies' sockets.
pub fn listener_port_state(proxies: &[ProxyStatus], gateway: &ObjectName, port: u16) -> PortState {
    let mut reporting = 0;
    let mut bound = 0;
    let mut failed = Vec::new();
    for proxy in proxies.iter().filter(|p| p.live) {
        let Some(listeners) = &proxy.listeners else {
            continue;
        };
        reporting += 1;
        let mut sockets = listeners
            .iter()
            .filter(|l| l.serves(gateway, port))
            .peekable();
        if sockets.peek().is_none() {
            continue;
        }
        let before = failed.len();
        for socket in sockets.filter(|s| !s.bound) {
            failed.push(FailedBind {
                proxy: proxy.id.clone(),
                address: socket.address.clone(),
                error: socket
                    .error
                    .clone()
                    .unwrap_or_else(|| "not bound".to_string()),
            });
        }
        if failed.len() == before {
            bound += 1;
        }
    }
    if reporting == 0 {
        PortState::Unknown
    } else if !failed.is_empty() {
        PortState::Unavailable { failed, bound }
    } else if bound == 0 {
        PortState::NotListened { reporting }
    } else {
        PortState::Bound { proxies: bound }
    }
}

#[cfg(test)]
mod tests;
