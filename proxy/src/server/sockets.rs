//! The proxy's listener sockets: binding each `--listener` (a
//! [`ListenerSpec`]), retrying one that cannot be bound — its port taken
//! by another process, say — until it can, and the `SocketTable` of
//! what is bound that the control client reports to the coordinators
//! (a Gateway listener is `Programmed` only when the proxies bound its
//! port).
//!
//! Why retry rather than exit: a proxy that exits on a taken port is
//! restarted in a loop and never tells anyone why; one that serves its
//! other listeners and reports the failure lets the Gateway's status say
//! `PortUnavailable` with the error, and heals by itself once the port is
//! free.
//!
//! Not here: accepting connections (`server`), what the reports mean for
//! a Gateway listener (`gateway_api::listener_port_state`).

use super::{BoundListener, bind_reuseport};
use crate::router::ListenerKey;
use std::io;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use switchyard_proto::model::ListenerBinding;
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// The first pause before binding a socket again; it doubles per failure.
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest pause between two attempts to bind a socket.
const MAX_RETRY: Duration = Duration::from_secs(5);

/// A socket to bind: a `--listener [NS/GATEWAY:]PORT=ADDR` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Name for logs (the flag's left-hand side).
    pub name: String,
    /// The Gateway listener requests on this socket are routed as.
    pub key: ListenerKey,
    /// The local address to bind.
    pub address: SocketAddr,
}

/// One listener socket, bound or still to bind.
#[derive(Debug)]
pub(crate) enum Entry {
    /// Bound and ready to accept.
    Bound(BoundListener),
    /// Not bound yet: the last error; serving retries it.
    Unbound {
        spec: ListenerSpec,
        error: io::Error,
    },
}

/// The sockets a proxy serves, in flag order: those bound and those that
/// serving keeps trying to bind.
#[derive(Debug, Default)]
pub struct Listeners {
    pub(crate) entries: Vec<Entry>,
}

impl Listeners {
    /// Binds every spec now (see [`bind_reuseport`]); one that fails is
    /// kept, with its error, for serving to retry.
    pub fn bind(specs: impl IntoIterator<Item = ListenerSpec>) -> Listeners {
        let entries = specs
            .into_iter()
            .map(|spec| match bind_reuseport(spec.address) {
                Ok(listener) => Entry::Bound(BoundListener {
                    name: spec.name,
                    key: spec.key,
                    listener,
                }),
                Err(error) => Entry::Unbound { spec, error },
            })
            .collect();
        Listeners { entries }
    }

    /// The bound sockets.
    pub fn bound(&self) -> impl Iterator<Item = &BoundListener> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Bound(b) => Some(b),
            Entry::Unbound { .. } => None,
        })
    }

    /// The sockets not bound yet, with why.
    pub fn unbound(&self) -> impl Iterator<Item = (&ListenerSpec, &io::Error)> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Bound(_) => None,
            Entry::Unbound { spec, error } => Some((spec, error)),
        })
    }
}

impl From<Vec<BoundListener>> for Listeners {
    fn from(bound: Vec<BoundListener>) -> Self {
        Listeners {
            entries: bound.into_iter().map(Entry::Bound).collect(),
        }
    }
}

/// What each socket of the proxy is, as the control client reports it:
/// `None` until serving starts (unknown, not "no sockets").
#[derive(Debug)]
pub(crate) struct SocketTable {
    sockets: Mutex<Option<Vec<ListenerBinding>>>,
    changes: watch::Sender<u64>,
}

impl Default for SocketTable {
    fn default() -> Self {
        SocketTable {
            sockets: Mutex::new(None),
            changes: watch::Sender::new(0),
        }
    }
}

impl SocketTable {
    /// Starts the table from what `listeners` holds now.
    pub(crate) fn start(&self, listeners: &Listeners) {
        let rows = listeners.entries.iter().map(binding).collect();
        *self.lock() = Some(rows);
        self.changes.send_modify(|n| *n += 1);
    }

    /// Replaces socket `index`'s row.
    fn set(&self, index: usize, row: ListenerBinding) {
        let mut sockets = self.lock();
        if let Some(slot) = sockets.as_mut().and_then(|s| s.get_mut(index))
            && *slot != row
        {
            *slot = row;
            drop(sockets);
            self.changes.send_modify(|n| *n += 1);
        }
    }

    /// Every socket's row; `None` before serving started.
    pub(crate) fn snapshot(&self) -> Option<Vec<ListenerBinding>> {
        self.lock().clone()
    }

    /// Changes whenever a row changes.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Vec<ListenerBinding>>> {
        self.sockets.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A socket's row.
fn binding(entry: &Entry) -> ListenerBinding {
    match entry {
        Entry::Bound(b) => bound_row(b),
        Entry::Unbound { spec, error } => unbound_row(spec, error),
    }
}

fn bound_row(b: &BoundListener) -> ListenerBinding {
    ListenerBinding {
        gateway: b.key.gateway.clone(),
        port: b.key.port,
        address: b
            .listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        bound: true,
        error: None,
    }
}

fn unbound_row(spec: &ListenerSpec, error: &io::Error) -> ListenerBinding {
    ListenerBinding {
        gateway: spec.key.gateway.clone(),
        port: spec.key.port,
        address: spec.address.to_string(),
        bound: false,
        error: Some(format!("cannot bind {}: {error}", spec.address)),
    }
}

/// Binds socket `index` of `table` until it can (back-off doubling from
/// [`FIRST_RETRY`] to [`MAX_RETRY`]), recording each outcome; `None`
/// when `drain` starts first. The first failure is a warning (a port
/// taken is an operator's problem), the repeats are debug lines.
pub(crate) async fn bind_retrying(
    spec: ListenerSpec,
    error: io::Error,
    table: &SocketTable,
    index: usize,
    mut drain: watch::Receiver<bool>,
) -> Option<BoundListener> {
    warn!(listener = %spec.name, address = %spec.address, %error,
        "cannot bind listener; serving the others, retrying, and reporting it to the coordinators");
    let mut pause = FIRST_RETRY;
    loop {
        if *drain.borrow_and_update() {
            return None;
        }
        tokio::select! {
            biased;
            changed = drain.changed() => if changed.is_err() { return None },
            () = tokio::time::sleep(pause) => {}
        }
        if *drain.borrow_and_update() {
            return None;
        }
        match bind_reuseport(spec.address) {
            Ok(listener) => {
                let bound = BoundListener {
                    name: spec.name,
                    key: spec.key,
                    listener,
                };
                table.set(index, bound_row(&bound));
                info!(listener = %bound.name, "listener bound after retrying");
                return Some(bound);
            }
            Err(error) => {
                debug!(listener = %spec.name, address = %spec.address, %error, "listener still cannot bind");
                table.set(index, unbound_row(&spec, &error));
                pause = (pause * 2).min(MAX_RETRY);
            }
        }
    }
}
