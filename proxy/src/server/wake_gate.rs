//! A future polled only when it asked to be: [`WakeGate`] wraps a future
//! that sits beside a busy one in the same task (a connection's drain and
//! timeout signals beside its HTTP connection) and skips polling it on the
//! task's other wake-ups.
//!
//! Why: a connection task wakes several times per request (request read,
//! response ready, response written). Polling its rarely-firing signals on
//! each of those — a watch receiver's waiter list locked twice, a timer
//! entry checked — cost about as much as routing the request
//! (bench/RESULTS.md). A gated future costs one atomic swap per wake-up.
//!
//! How: the inner future is polled with a waker of the gate's own, which
//! marks the gate woken and then wakes the task. A future need only be
//! polled after its waker fired (and once at first), so skipping it
//! otherwise is sound.

use futures::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

/// The gate's waker: remembers that it fired, then wakes the task.
#[derive(Default)]
struct Signal {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// A gate that futures can be put behind, one after the other (see
/// [`WakeGate::gated`]); it allocates once.
pub(crate) struct WakeGate {
    signal: Arc<Signal>,
    waker: Waker,
}

impl WakeGate {
    pub(crate) fn new() -> WakeGate {
        let signal = Arc::new(Signal::default());
        let waker = Waker::from(Arc::clone(&signal));
        WakeGate { signal, waker }
    }

    /// `future` behind this gate: polled at its first poll and then only
    /// after its waker fired.
    pub(crate) fn gated<'a, F: Future>(&'a self, future: Pin<&'a mut F>) -> Gated<'a, F> {
        self.signal.woken.store(true, Ordering::Relaxed);
        Gated { gate: self, future }
    }
}

/// A future behind a [`WakeGate`].
pub(crate) struct Gated<'a, F> {
    gate: &'a WakeGate,
    future: Pin<&'a mut F>,
}

impl<F: Future> Future for Gated<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let signal = &this.gate.signal;
        // Registered before the check: a wake-up between the two is seen
        // by the swap or wakes the task again.
        signal.task.register(cx.waker());
        if !signal.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        this.future
            .as_mut()
            .poll(&mut Context::from_waker(&this.gate.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::Duration;

    /// Counts its polls; ready once `ready` is set, waking through a
    /// sleep like a timer would.
    struct Counting<'a> {
        polls: &'a Cell<u32>,
        sleep: Pin<Box<tokio::time::Sleep>>,
    }

    impl Future for Counting<'_> {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.set(self.polls.get() + 1);
            self.sleep.as_mut().poll(cx)
        }
    }

    /// The gated future is polled once at first and once when its own
    /// waker fires, not on the task's other wake-ups; and it completes.
    #[tokio::test(start_paused = true)]
    async fn polls_the_inner_future_only_when_it_was_woken() {
        let polls = Cell::new(0);
        let gate = WakeGate::new();
        let counting = Counting {
            polls: &polls,
            sleep: Box::pin(tokio::time::sleep(Duration::from_secs(10))),
        };
        tokio::pin!(counting);
        let mut gated = gate.gated(counting.as_mut());
        // Twenty wake-ups of the task by something else.
        for _ in 0..20 {
            tokio::select! {
                biased;
                () = &mut gated => panic!("ready before its timer"),
                () = tokio::task::yield_now() => {}
            }
        }
        assert_eq!(polls.get(), 1, "polled on the task's other wake-ups");
        (&mut gated).await;
        assert_eq!(polls.get(), 2);
    }
}
