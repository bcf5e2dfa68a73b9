//! [`run_while_leader`]: the watchers run on the leader coordinator only;
//! [`Lease`]: what a status writer asks before every single write.
//!
//! It deliberately knows nothing about Raft: leadership comes in as a
//! `watch::Receiver<bool>` the caller drives from openraft's metrics, and
//! the lease as a function the caller implements over its coordinator.

use std::future::Future;
use tokio::sync::watch;
use tracing::info;

/// Leadership as the status writers see it, asked again before every
/// write (a publish is many GET/PATCH pairs and can take seconds; a lease
/// checked once at its start would let a deposed leader write for all of
/// them).
pub trait Lease: Sync {
    /// The Raft term this coordinator leads in, when it may write now
    /// (it leads with a quorum); `None` when it may not, which stops the
    /// publish. The term fences the write (`super::fence`).
    fn current_term(&self) -> Option<u64>;
}

impl<F: Fn() -> Option<u64> + Sync> Lease for F {
    fn current_term(&self) -> Option<u64> {
        self()
    }
}

/// Runs `start()` whenever `is_leader` becomes true and drops it (stopping
/// everything it owns, e.g. [`super::watch_clusters`]'s watcher tasks) as
/// soon as it becomes false. Returns when the sender is dropped.
///
/// If the started future finishes by itself while still leader, it is not
/// restarted until leadership is lost and gained again: a source that ends
/// on its own has nothing more to do in this term.
pub async fn run_while_leader<F, Fut>(mut is_leader: watch::Receiver<bool>, start: F)
where
    F: Fn() -> Fut,
    Fut: Future,
{
    loop {
        if is_leader.wait_for(|leader| *leader).await.is_err() {
            return;
        }
        info!("leadership gained; starting the cluster watchers");
        let finished = tokio::select! {
            _ = start() => true,
            changed = is_leader.wait_for(|leader| !*leader) => {
                if changed.is_err() {
                    return;
                }
                false
            }
        };
        let lost = !finished || is_leader.wait_for(|leader| !*leader).await.is_ok();
        if !lost {
            return;
        }
        info!("leadership lost; cluster watchers stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Drops a counter decrement when the started future is dropped.
    struct Running(Arc<AtomicUsize>);
    impl Drop for Running {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    async fn eventually(what: &str, check: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !check() {
            assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn starts_on_gain_stops_on_loss_and_restarts_on_regain() {
        let (tx, rx) = watch::channel(false);
        let starts = Arc::new(AtomicUsize::new(0));
        let running = Arc::new(AtomicUsize::new(0));
        let (s, r) = (starts.clone(), running.clone());
        let task = tokio::spawn(run_while_leader(rx, move || {
            s.fetch_add(1, Ordering::SeqCst);
            r.fetch_add(1, Ordering::SeqCst);
            let guard = Running(r.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            }
        }));
        tokio::task::yield_now().await;
        assert_eq!(
            starts.load(Ordering::SeqCst),
            0,
            "a follower starts nothing"
        );
        tx.send(true).unwrap();
        eventually("started", || running.load(Ordering::SeqCst) == 1).await;
        tx.send(false).unwrap();
        eventually("stopped", || running.load(Ordering::SeqCst) == 0).await;
        tx.send(true).unwrap();
        eventually("restarted", || starts.load(Ordering::SeqCst) == 2).await;
        assert_eq!(running.load(Ordering::SeqCst), 1);
        drop(tx);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(running.load(Ordering::SeqCst), 0);
    }
}
