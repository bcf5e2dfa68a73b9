//! Raft's own runtime: openraft's tasks (core, replication, state machine,
//! ticks), the connections to peers and the work of answering peers' Raft
//! RPCs run on threads of their own, apart from the coordinator's services.
//!
//! Why: openraft 0.9 gives every AppendEntries, heartbeats included, a
//! deadline of one heartbeat interval (100 ms by default). On the shared
//! runtime those RPCs queued behind whatever else was runnable, and a
//! failover is exactly when that is the most: hundreds of proxies sending
//! their whole evidence and applied sets to the new leader at once, and
//! every follower streaming configuration to its share of them. Heartbeats
//! then missed their deadline, the leader saw no quorum acknowledgement for
//! an election timeout and paused its decisions, refusing the fleet's calls
//! (measured at 10,000 routes and 200 agents: pending transitions committed
//! 7–9 s after the election, with two or three such pauses in between).
//! Here those RPCs wait only for other Raft work and the operating system's
//! scheduler.
//!
//! Owns: the runtime's threads and their end (the runtime stops when the
//! last handle to it is dropped: dropping the stop signal ends the thread
//! that owns the runtime, which then drops it there, outside any async
//! context). Does not own: what runs on it (the [`super::node`] starts Raft
//! here, the [`super::network`] connects from here, the
//! [`super::service`] answers here).

use std::future::Future;
use std::sync::Arc;

use tokio::runtime::Handle;

/// Worker threads of the Raft runtime: two, so a slow fsync in one task
/// (the log store awaits sled's flush inline) never holds up heartbeats.
const WORKERS: usize = 2;

/// A handle on Raft's runtime. Cheap to clone; the runtime stops when the
/// last clone is dropped.
#[derive(Clone)]
pub struct RaftRuntime {
    inner: Arc<Inner>,
}

struct Inner {
    handle: Handle,
    /// Dropped with the last handle: the owning thread then drops the
    /// runtime, cancelling whatever still runs on it.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl RaftRuntime {
    /// Starts the runtime of node `id` (its threads are named after it).
    pub fn start(id: u64) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name(format!("raft-{id}"))
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("raft-{id}-owner"))
            .spawn(move || {
                // Either a stop or the sender dropped: both end the runtime.
                let _ = runtime.block_on(stopped);
                // Raft's tasks are done or abandoned (the node shut Raft
                // down first); do not wait for a blocking task to finish.
                runtime.shutdown_background();
            })?;
        Ok(RaftRuntime {
            inner: Arc::new(Inner {
                handle,
                _stop: stop,
            }),
        })
    }

    /// Runs `work` on the Raft runtime and waits for its result. `None` if
    /// it could not finish there (the runtime is stopping, or it panicked).
    pub async fn run<F>(&self, work: F) -> Option<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.handle.spawn(work).await.ok()
    }

    /// Enters the runtime for the life of the guard: a channel built (or a
    /// task spawned) meanwhile has its background tasks here.
    pub fn enter(&self) -> tokio::runtime::EnterGuard<'_> {
        self.inner.handle.enter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_on_the_raft_threads_and_they_end_with_the_last_handle() {
        let runtime = RaftRuntime::start(7).expect("runtime");
        let name = runtime
            .run(async { std::thread::current().name().map(str::to_owned) })
            .await
            .flatten();
        assert_eq!(name.as_deref(), Some("raft-7"));
        // A task left running ends when the runtime does.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        {
            let _entered = runtime.enter();
            tokio::spawn(async move {
                let _tx = tx;
                std::future::pending::<()>().await;
            });
        }
        drop(runtime);
        assert!(
            tokio::time::timeout(std::time::Duration::from_secs(5), rx)
                .await
                .expect("the task ended with the runtime")
                .is_err(),
            "the task was cancelled, not completed"
        );
    }
}
