//! Worker threads for `--workers N` with N > 1: N threads, each running a
//! runtime of its own (current-thread), to which the accept loops hand
//! client connections in turn. A connection, its requests, the upstream
//! connections they open and the timers they set all stay on its worker:
//! no work stealing and no wake-ups across threads, which is what makes one
//! thread cheaper per request than a worker of a multi-threaded runtime
//! (bench/RESULTS.md). The upstream pools keep one idle list per worker
//! ([`current`] says whose, the main thread having a list of its own), so a request reuses a connection its own
//! thread runs.
//!
//! The accept loops, the control client, health checks and the admin
//! endpoint stay on the process's main runtime. Handing a connection over
//! costs a channel send and moving the socket between two epoll sets: once
//! per connection, not per request.
//!
//! Not here: what a connection does (`conn`), the drain (`super::serve`,
//! which finishes the workers once every connection has closed).

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use tokio::sync::{mpsc, watch};
use tracing::debug;

thread_local! {
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// This thread's slot among the per-worker lists of a `--workers N`
/// proxy: 1 + I on worker I, 0 on any other thread (the main runtime's:
/// health checks, the control client), so that no worker shares its list
/// with the main thread.
pub fn current() -> usize {
    INDEX.with(Cell::get)
}

/// How many per-thread slots a proxy with `workers` (the `--workers`
/// setting, 0 when not given) needs: with worker threads, one each plus
/// the main thread's; without, one list shared by the runtime's threads.
pub fn slots(workers: usize) -> usize {
    if workers > 1 { workers + 1 } else { 1 }
}

/// A connection's task, built on the worker that runs it.
pub(crate) type Task = Pin<Box<dyn Future<Output = ()> + Send>>;
/// What a worker is handed: a socket and how to serve it there.
pub(crate) struct Job {
    pub stream: std::net::TcpStream,
    pub serve: Box<dyn FnOnce(tokio::net::TcpStream) -> Task + Send>,
}

/// The worker threads of one `serve` call.
pub(crate) struct Workers {
    senders: Vec<mpsc::UnboundedSender<Job>>,
    next: AtomicUsize,
    finished: watch::Sender<bool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Workers {
    /// Starts `count` worker threads (`switchyard-worker-I`).
    pub fn start(count: usize) -> io::Result<Workers> {
        let (finished, _) = watch::channel(false);
        let mut senders = Vec::with_capacity(count);
        let mut threads = Vec::with_capacity(count);
        for index in 0..count {
            let (tx, rx) = mpsc::unbounded_channel();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let done = finished.subscribe();
            let thread = std::thread::Builder::new()
                .name(format!("switchyard-worker-{index}"))
                .spawn(move || {
                    INDEX.with(|i| i.set(index + 1));
                    runtime.block_on(run(rx, done));
                })?;
            senders.push(tx);
            threads.push(thread);
        }
        Ok(Workers {
            senders,
            next: AtomicUsize::new(0),
            finished,
            threads: Mutex::new(threads),
        })
    }

    /// Hands `job` to the next worker in turn.
    pub fn dispatch(&self, job: Job) {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.senders.len();
        if self.senders[index].send(job).is_err() {
            debug!(
                worker = index,
                "closing client connection: its worker has stopped"
            );
        }
    }

    /// Stops every worker (their remaining tasks — idle upstream
    /// connections — are dropped) and waits for the threads to end. Call
    /// once every client connection has closed.
    pub async fn finish(&self) {
        let _ = self.finished.send(true);
        let threads =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        let _ = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
    }
}

/// One worker's loop: serve what it is handed until `finished`.
async fn run(mut jobs: mpsc::UnboundedReceiver<Job>, mut done: watch::Receiver<bool>) {
    let serving = async {
        while let Some(Job { stream, serve }) = jobs.recv().await {
            match tokio::net::TcpStream::from_std(stream) {
                Ok(stream) => {
                    tokio::spawn(serve(stream));
                }
                Err(error) => debug!(%error, "closing client connection: cannot register it"),
            }
        }
        // Every sender is gone; connections may still be open.
        std::future::pending::<()>().await;
    };
    tokio::select! {
        biased;
        _ = done.wait_for(|done| *done) => {}
        () = serving => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Worker threads each have a slot, the main thread one of its own;
    /// without worker threads there is one shared list.
    #[test]
    fn the_main_thread_has_a_slot_no_worker_shares() {
        assert_eq!(current(), 0);
        assert_eq!(slots(0), 1);
        assert_eq!(slots(1), 1);
        assert_eq!(slots(3), 4);
    }

    /// Each connection runs on a worker thread, in turn, and the workers
    /// stop when told.
    #[tokio::test]
    async fn connections_go_to_the_workers_in_turn() {
        let workers = Workers::start(2).expect("workers");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let mut seen = Vec::new();
        for _ in 0..4 {
            let mut client = std::net::TcpStream::connect(address).expect("connect");
            let (stream, _) = listener.accept().expect("accept");
            stream.set_nonblocking(true).expect("nonblocking");
            workers.dispatch(Job {
                stream,
                serve: Box::new(|mut stream| {
                    Box::pin(async move {
                        use tokio::io::AsyncWriteExt;
                        let name = std::thread::current().name().unwrap_or("").to_string();
                        let line = format!("{name} {}\n", current());
                        let _ = stream.write_all(line.as_bytes()).await;
                    })
                }),
            });
            client.flush().expect("flush");
            let mut text = String::new();
            client.read_to_string(&mut text).expect("read");
            seen.push(text);
        }
        assert_eq!(
            seen,
            [
                "switchyard-worker-0 1\n",
                "switchyard-worker-1 2\n",
                "switchyard-worker-0 1\n",
                "switchyard-worker-1 2\n"
            ]
        );
        workers.finish().await;
        assert!(
            workers
                .threads
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
        );
    }
}
