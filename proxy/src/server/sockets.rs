//! The proxy's listener sockets: binding each `--listener` (a
//! [`ListenerSpec`]), listening on it once the data plane is ready,
//! retrying one that cannot be bound — its port taken by another process,
//! say — until it can, and the `SocketTable` of what is bound that the
//! control client reports to the coordinators (a Gateway listener is
//! `Programmed` only when the proxies bound its port).
//!
//! Why bind at start but listen only when ready: the sockets share their
//! address through `SO_REUSEPORT`, and the kernel spreads new connections
//! over every socket *listening* on it. A replacement process that
//! listened at start would get its share of new clients while it still
//! waits for its configuration, and answer them 503 or 404 while the old
//! process could have served them. Bound but not listening, it holds its
//! address (the bind error, if any, is known and reported at once) and
//! gets nothing until it can serve.
//!
//! A replacement started with `--handoff-socket` takes the old process's
//! sockets instead of binding its own ([`super::handoff`]): they listen
//! already, and the old process accepts from them until it drains, but
//! the same rule holds — this process accepts from them only once ready.
//!
//! Why retry rather than exit: a proxy that exits on a taken port is
//! restarted in a loop and never tells anyone why; one that serves its
//! other listeners and reports the failure lets the Gateway's status say
//! `PortUnavailable` with the error, and heals by itself once the port is
//! free.
//!
//! Not here: accepting connections (`server`), what the reports mean for
//! a Gateway listener (`gateway_api::listener_port_state`).

use super::handoff::HandedSocket;
use super::{BACKLOG, BoundListener, reserve_reuseport};
use crate::router::ListenerKey;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use switchyard_proto::model::ListenerBinding;
use tokio::net::TcpSocket;
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

/// A socket bound to its address but not listening yet.
#[derive(Debug)]
pub(crate) struct Reserved {
    spec: ListenerSpec,
    socket: TcpSocket,
    /// Where it is bound (`spec.address` with port 0 resolved).
    local: SocketAddr,
}

/// One listener socket, bound or still to bind.
#[derive(Debug)]
pub(crate) enum Entry {
    /// Listening: accepts from the start.
    Bound(BoundListener),
    /// Bound; listens once the data plane is ready.
    Reserved(Reserved),
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
    /// Binds every spec now (with `SO_REUSEPORT`, see
    /// [`bind_reuseport`](super::bind_reuseport)) without listening:
    /// serving listens on them once the data plane is ready (the module
    /// docs say why). One that fails is kept, with its error, for serving
    /// to retry.
    pub fn bind(specs: impl IntoIterator<Item = ListenerSpec>) -> Listeners {
        Self::bind_taking(specs, Vec::new())
    }

    /// [`bind`](Self::bind), but a spec whose address one of `handed`
    /// sockets is bound to takes that socket (handed over by the process
    /// this one replaces, see [`super::handoff`]) instead of binding its
    /// own. Handed sockets no spec names are closed (logged).
    pub fn bind_taking(
        specs: impl IntoIterator<Item = ListenerSpec>,
        mut handed: Vec<HandedSocket>,
    ) -> Listeners {
        let entries = specs
            .into_iter()
            .map(|spec| {
                let taken = handed
                    .iter()
                    .position(|h| h.address == spec.address)
                    .map(|i| handed.swap_remove(i));
                let reserved = match taken {
                    Some(socket) => adopt(spec, socket),
                    None => reserve(spec),
                };
                match reserved {
                    Ok(reserved) => Entry::Reserved(reserved),
                    Err((spec, error)) => Entry::Unbound { spec, error },
                }
            })
            .collect();
        for unused in handed {
            info!(address = %unused.address, "closing a handed-over socket no --listener names");
        }
        Listeners { entries }
    }

    /// Copies of every bound socket (listening or not), with its address,
    /// to hand to a replacement process. A socket bound later, after
    /// retrying, is not among them: the replacement binds its own.
    pub fn handoff_copies(&self) -> io::Result<Vec<HandedSocket>> {
        self.entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Bound(b) => Some((b.listener.local_addr(), b.listener.as_fd())),
                Entry::Reserved(r) => Some((Ok(r.local), r.socket.as_fd())),
                Entry::Unbound { .. } => None,
            })
            .map(|(address, fd)| {
                Ok(HandedSocket {
                    address: address?,
                    fd: fd.try_clone_to_owned()?,
                })
            })
            .collect()
    }

    /// Listens now on every socket still waiting to: for a proxy that is
    /// ready before it serves (a fixed configuration), so that it listens
    /// before it says so. One that cannot listen is kept, with its error,
    /// for serving to retry.
    pub fn listen_now(&mut self) {
        self.entries = std::mem::take(&mut self.entries)
            .into_iter()
            .map(|entry| match entry {
                Entry::Reserved(reserved) => match listen(reserved) {
                    Ok(bound) => Entry::Bound(bound),
                    Err((spec, error)) => Entry::Unbound { spec, error },
                },
                other => other,
            })
            .collect();
    }

    /// The bound sockets (listening or not), by name, with their local
    /// address.
    pub fn bound(&self) -> impl Iterator<Item = (&str, SocketAddr)> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Bound(b) => Some((b.name.as_str(), b.listener.local_addr().ok()?)),
            Entry::Reserved(r) => Some((r.spec.name.as_str(), r.local)),
            Entry::Unbound { .. } => None,
        })
    }

    /// The sockets not bound yet, with why.
    pub fn unbound(&self) -> impl Iterator<Item = (&ListenerSpec, &io::Error)> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Bound(_) | Entry::Reserved(_) => None,
            Entry::Unbound { spec, error } => Some((spec, error)),
        })
    }
}

/// Binds `spec`'s address without listening.
fn reserve(spec: ListenerSpec) -> Result<Reserved, (ListenerSpec, io::Error)> {
    let reserved =
        reserve_reuseport(spec.address).and_then(|socket| Ok((socket.local_addr()?, socket)));
    match reserved {
        Ok((local, socket)) => Ok(Reserved {
            spec,
            socket,
            local,
        }),
        Err(error) => Err((spec, error)),
    }
}

/// Takes `handed` as `spec`'s socket, as it is: listening already when the
/// process that handed it served, else bound only.
fn adopt(spec: ListenerSpec, handed: HandedSocket) -> Result<Reserved, (ListenerSpec, io::Error)> {
    let stream = std::net::TcpStream::from(handed.fd);
    let adopted = stream
        .set_nonblocking(true)
        .map(|()| TcpSocket::from_std_stream(stream));
    match adopted {
        Ok(socket) => {
            info!(listener = %spec.name, address = %handed.address,
                listening = super::handoff::is_listening(&socket),
                "took over the socket of the process this one replaces");
            Ok(Reserved {
                spec,
                socket,
                local: handed.address,
            })
        }
        Err(error) => Err((spec, error)),
    }
}

/// Starts listening on a reserved socket; from here the kernel hands it
/// connections.
fn listen(reserved: Reserved) -> Result<BoundListener, (ListenerSpec, io::Error)> {
    let Reserved { spec, socket, .. } = reserved;
    match socket.listen(BACKLOG) {
        Ok(listener) => Ok(BoundListener {
            name: spec.name,
            key: spec.key,
            listener,
        }),
        Err(error) => Err((spec, error)),
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
        Entry::Bound(b) => bound_row(&b.key, b.listener.local_addr().ok()),
        Entry::Reserved(r) => bound_row(&r.spec.key, Some(r.local)),
        Entry::Unbound { spec, error } => unbound_row(spec, error),
    }
}

/// A bound socket's row, whether it listens yet or not: its address is
/// held either way.
fn bound_row(key: &ListenerKey, local: Option<SocketAddr>) -> ListenerBinding {
    ListenerBinding {
        gateway: key.gateway.clone(),
        port: key.port,
        address: local.map(|a| a.to_string()).unwrap_or_default(),
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

/// Waits for `ready`, then listens on `reserved` (socket `index` of
/// `table`); `None` when `drain` starts first — a socket that never
/// listened has no connections to finish. One that cannot listen is
/// bound again as [`bind_retrying`] does.
pub(crate) async fn listen_when_ready(
    mut reserved: Reserved,
    ready: impl Future<Output = ()>,
    table: &SocketTable,
    index: usize,
    mut drain: watch::Receiver<bool>,
) -> Option<BoundListener> {
    tokio::select! {
        biased;
        _ = drain.wait_for(|draining| *draining) => return None,
        () = ready => {}
    }
    loop {
        let local = reserved.local;
        match listen(reserved) {
            Ok(bound) => {
                info!(listener = %bound.name, address = %local, "ready: listening");
                return Some(bound);
            }
            Err((spec, error)) => {
                table.set(index, unbound_row(&spec, &error));
                reserved = bind_retrying(spec, error, table, index, drain.clone()).await?;
            }
        }
    }
}

/// Binds socket `index` of `table` until it can (back-off doubling from
/// [`FIRST_RETRY`] to [`MAX_RETRY`]), recording each outcome; `None`
/// when `drain` starts first. The first failure is a warning (a port
/// taken is an operator's problem), the repeats are debug lines. The
/// socket is returned bound, not listening: see [`listen_when_ready`].
pub(crate) async fn bind_retrying(
    mut spec: ListenerSpec,
    error: io::Error,
    table: &SocketTable,
    index: usize,
    mut drain: watch::Receiver<bool>,
) -> Option<Reserved> {
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
        match reserve(spec) {
            Ok(reserved) => {
                table.set(index, bound_row(&reserved.spec.key, Some(reserved.local)));
                info!(listener = %reserved.spec.name, "listener bound after retrying");
                return Some(reserved);
            }
            Err((back, error)) => {
                spec = back;
                debug!(listener = %spec.name, address = %spec.address, %error, "listener still cannot bind");
                table.set(index, unbound_row(&spec, &error));
                pause = (pause * 2).min(MAX_RETRY);
            }
        }
    }
}
