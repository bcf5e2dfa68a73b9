//! The downstream side: listeners, connections, graceful drain.
//!
//! [`serve`] accepts on every [`BoundListener`] until `shutdown` resolves,
//! then drains: it stops accepting (taking what the kernel already queued,
//! because closing a listening socket resets connections still in its
//! queue) and closes its sockets, then lets every connection finish per
//! `conn`'s protocol, and returns when all are closed or the drain
//! timeout passed.
//!
//! At most `max_connections` client connections are open at once; one
//! accepted beyond that is closed at once and counted. Closing rather than
//! pausing the accept loop: a paused loop leaves new clients waiting in the
//! kernel's queue with no answer until their own timeouts, while a prompt
//! close lets them retry elsewhere (another replica) right away, and keeps
//! the loop free to notice the drain.
//!
//! [`bind_reuseport`] lets a replacement process bind the same address
//! while the old one still serves: both accept until the old one drains.
//! [`handoff`] passes the listening sockets themselves to a replacement,
//! so that nothing queued in them is reset when the old process closes.
//! [`sockets`] binds the `--listener` sockets, listens on them only once
//! the data plane is ready (so a replacement gets no connection it cannot
//! serve), keeps retrying one that cannot be bound while the others
//! serve, and keeps the table of what is bound that the proxy reports to
//! the coordinators.
//!
//! Request hygiene lives beside it: [`inbound`] (Host settled and path
//! normalized before routing, [`host`], [`path`]), [`headers`] (hop-by-hop),
//! `forwarded` (X-Forwarded-For and friends), `upload` (the client's body,
//! watched for pauses). HTTP/1.1 upgrades: `upgrade` (which requests, which
//! headers) and `tunnel` (the switched connections, run by the client
//! connection's task so that drain and connection limits cover them).
//!
//! Not here: what a request does (`service`), upstream connections.

mod conn;
mod forwarded;
mod grpc_answers;
pub mod handoff;
pub mod headers;
pub mod host;
pub mod inbound;
pub mod path;
pub(crate) mod service;
pub mod sockets;
mod tunnel;
mod upgrade;
mod upload;
mod wake_gate;
pub mod workers;

use crate::dataplane::DataPlane;
use crate::metrics::Limit;
use crate::router::ListenerKey;
use crate::settings::DataPlaneSettings;
use hyper_util::rt::TokioTimer;
use hyper_util::server::conn::auto::Builder;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// A bound socket and the Gateway listener it serves.
#[derive(Debug)]
pub struct BoundListener {
    /// Name for logs (e.g. the `--listener` flag value).
    pub name: String,
    /// The Gateway listener requests on this socket are routed as.
    pub key: ListenerKey,
    /// The socket.
    pub listener: TcpListener,
}

/// Pending connections a listening socket holds before they are accepted.
const BACKLOG: u32 = 1024;

/// Binds `addr` with `SO_REUSEADDR` and `SO_REUSEPORT`, so a replacement
/// process can bind the same address and both accept until this one
/// drains. Must be called inside a Tokio runtime.
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<TcpListener> {
    reserve_reuseport(addr)?.listen(BACKLOG)
}

/// [`bind_reuseport`] without the `listen`: the address is held (another
/// process without `SO_REUSEPORT` cannot take it), but the kernel sends
/// this socket no connections until it listens.
pub(crate) fn reserve_reuseport(addr: SocketAddr) -> io::Result<TcpSocket> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    #[cfg(unix)]
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// Runs each HTTP/2 stream hyper hands over as a task, boxed first. A
/// stream's future holds the whole request stack's (several KiB); moved
/// into a task unboxed it is copied whole several times on the way (about
/// a tenth of an h2c request's instructions, bench/RESULTS.md), boxed it
/// is copied once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamExecutor;

impl<F> hyper::rt::Executor<F> for StreamExecutor
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        tokio::spawn(Box::pin(future));
    }
}

fn http_builder(settings: &DataPlaneSettings) -> Builder<StreamExecutor> {
    let mut builder = Builder::new(StreamExecutor);
    builder
        .http1()
        .timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(settings.header_read_timeout)
        // hyper answers 431 when a request head outgrows the read buffer;
        // it refuses buffers below 8 KiB.
        .max_buf_size(settings.max_header_bytes.max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        // RFC 8441: WebSocket over HTTP/2 (`upgrade::take`).
        .enable_connect_protocol()
        .max_header_list_size(u32::try_from(settings.max_header_bytes).unwrap_or(u32::MAX));
    builder
}

/// State one `serve` call shares with its accept loops.
struct Accepting {
    dp: Arc<DataPlane>,
    builder: Arc<Builder<StreamExecutor>>,
    draining: Arc<AtomicBool>,
    /// Turns true when the accept loops are to stop (and close their
    /// sockets); before `drain`, see `serve`.
    stop_accepting: watch::Receiver<bool>,
    drain: watch::Receiver<bool>,
    force: watch::Receiver<bool>,
    alive: mpsc::Sender<()>,
    /// One permit per open client connection, over all listeners.
    slots: Arc<Semaphore>,
    /// With more than one worker: the threads connections are handed to.
    workers: Option<Arc<workers::Workers>>,
}

impl Accepting {
    /// Serves `stream` on its own task, or closes it at once (counted)
    /// when `max_connections` are already open.
    fn spawn_connection(&self, stream: TcpStream, listener: &Arc<ListenerKey>) {
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            self.dp.metrics().record_limit_hit(Limit::Connections);
            debug!("closing client connection: max connections open");
            drop(stream);
            return;
        };
        let signals = conn::Signals {
            draining: Arc::clone(&self.draining),
            drain: self.drain.clone(),
            force: self.force.clone(),
            alive: self.alive.clone(),
        };
        let dp = Arc::clone(&self.dp);
        let builder = Arc::clone(&self.builder);
        let listener = Arc::clone(listener);
        let serve =
            move |stream| conn::serve_connection(dp, builder, stream, listener, signals, slot);
        let Some(workers) = &self.workers else {
            tokio::spawn(serve(stream));
            return;
        };
        // Moved to the worker's runtime: out of this one's epoll set first.
        match stream.into_std() {
            Ok(stream) => workers.dispatch(workers::Job {
                stream,
                serve: Box::new(move |stream| Box::pin(serve(stream))),
            }),
            Err(error) => debug!(%error, "closing client connection: cannot hand it to a worker"),
        }
    }
}

/// Serves `listeners` until `shutdown` resolves, then drains (see the
/// module docs); a socket not bound yet is retried meanwhile and served
/// once bound, and `dp`'s socket table says which are. Returns once every
/// connection closed.
pub async fn serve(
    dp: Arc<DataPlane>,
    listeners: sockets::Listeners,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let settings = dp.settings().clone();
    let (stop_accepting_tx, stop_accepting_rx) = watch::channel(false);
    let (drain_tx, drain_rx) = watch::channel(false);
    let (force_tx, force_rx) = watch::channel(false);
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
    let workers = if settings.workers > 1 {
        info!(
            workers = settings.workers,
            "serving client connections on worker threads"
        );
        Some(Arc::new(workers::Workers::start(settings.workers)?))
    } else {
        None
    };
    let accepting = Arc::new(Accepting {
        dp: Arc::clone(&dp),
        builder: Arc::new(http_builder(&settings)),
        draining: Arc::new(AtomicBool::new(false)),
        stop_accepting: stop_accepting_rx,
        drain: drain_rx,
        force: force_rx,
        alive: alive_tx,
        // `Semaphore::new` panics above MAX_PERMITS (usize::MAX >> 3); no
        // machine holds that many sockets anyway.
        slots: Arc::new(Semaphore::new(
            settings.max_connections.min(Semaphore::MAX_PERMITS),
        )),
        workers: workers.clone(),
    });
    let mut loops = JoinSet::new();
    dp.sockets().start(&listeners);
    for (index, entry) in listeners.entries.into_iter().enumerate() {
        let accepting = Arc::clone(&accepting);
        match entry {
            sockets::Entry::Bound(bound) => {
                loops.spawn(accept_loop(accepting, bound));
            }
            sockets::Entry::Reserved(reserved) => {
                let dp = Arc::clone(&dp);
                loops.spawn(async move {
                    let drain = accepting.stop_accepting.clone();
                    let ready = dp.ready();
                    match sockets::listen_when_ready(reserved, ready, dp.sockets(), index, drain)
                        .await
                    {
                        Some(bound) => accept_loop(accepting, bound).await,
                        None => Ok(()),
                    }
                });
            }
            sockets::Entry::Unbound { spec, error } => {
                let dp = Arc::clone(&dp);
                loops.spawn(async move {
                    let drain = accepting.stop_accepting.clone();
                    let table = dp.sockets();
                    let Some(reserved) =
                        sockets::bind_retrying(spec, error, table, index, drain.clone()).await
                    else {
                        return Ok(());
                    };
                    match sockets::listen_when_ready(reserved, dp.ready(), table, index, drain)
                        .await
                    {
                        Some(bound) => accept_loop(accepting, bound).await,
                        None => Ok(()),
                    }
                });
            }
        }
    }

    shutdown.await;
    info!("draining: no new connections, finishing requests in flight");
    // The sockets close first, and only then are clients told to
    // reconnect (`Connection: close`, GOAWAY). The other way round, the
    // clients of a busy proxy all reconnect at once while its sockets
    // still listen: the kernel hands some of those connections to a
    // socket about to close (a replacement's shares the address), and
    // closing it resets whatever it has not accepted yet.
    let _ = stop_accepting_tx.send(true);
    let mut result = Ok(());
    while let Some(joined) = loops.join_next().await {
        match joined {
            Ok(Ok(())) => {}
            Ok(Err(error)) => result = Err(error),
            Err(error) => warn!(%error, "accept loop panicked"),
        }
    }
    accepting.draining.store(true, Ordering::Relaxed);
    let _ = drain_tx.send(true);
    // Only connections hold senders now.
    drop(accepting);
    if tokio::time::timeout(settings.drain_timeout, alive_rx.recv())
        .await
        .is_err()
    {
        warn!(timeout = ?settings.drain_timeout, "drain timeout passed; closing remaining connections");
        let _ = force_tx.send(true);
        alive_rx.recv().await;
    }
    if let Some(workers) = workers {
        workers.finish().await;
    }
    info!("drained");
    result
}

async fn accept_loop(accepting: Arc<Accepting>, bound: BoundListener) -> io::Result<()> {
    let key = Arc::new(bound.key);
    let listener = bound.listener;
    let mut drain = accepting.stop_accepting.clone();
    if !*drain.borrow_and_update() {
        loop {
            tokio::select! {
                biased;
                _ = drain.changed() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _peer)) => accepting.spawn_connection(stream, &key),
                    Err(error) if is_per_connection(&error) => {
                        debug!(listener = %bound.name, %error, "accept failed for one connection");
                    }
                    Err(error) => {
                        // Typically out of file descriptors: back off
                        // rather than spin.
                        warn!(listener = %bound.name, %error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
            }
        }
    }
    // Take the connections the kernel already completed for this socket:
    // closing it would reset them.
    let std_listener = listener.into_std()?;
    std_listener.set_nonblocking(true)?;
    loop {
        match std_listener.accept() {
            Ok((stream, _peer)) => {
                stream.set_nonblocking(true)?;
                accepting.spawn_connection(TcpStream::from_std(stream)?, &key);
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
            Err(error) if is_per_connection(&error) => {}
            Err(error) => {
                warn!(listener = %bound.name, %error, "accept failed while draining the backlog");
                break;
            }
        }
    }
    debug!(listener = %bound.name, "listener closed");
    Ok(())
}

fn is_per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}
