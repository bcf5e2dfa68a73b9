//! Waiting for something to become true, the one way every test does it.
//!
//! A check is polled until it succeeds or a deadline passes; a timeout
//! names what was waited for and the last thing the check saw, so a
//! failing test says "timed out after 10s waiting for the route served;
//! last seen: answered 503", not "assertion failed". linkerd2-proxy's
//! `assert_eventually!` is the model: tests wait for events, never sleep
//! and hope.
//!
//! A check returns an [`Outcome`]: `Ok(value)` when it holds and
//! `Err(seen)` when it does not hold yet, `seen` being anything printable
//! (an `anyhow::Error`, a `String`, a status); or `Some(value)` / `None`;
//! or `true` / `false`. [`seen`] and [`holds`] give an `Option` or a
//! `bool` a description of what was seen instead. [`eventually`] takes an
//! async check (any closure returning a future, or an async closure);
//! [`eventually_blocking`] a plain one, for tests without a runtime
//! (process tests that shell out to the CLI). Both return [`TimedOut`]
//! rather than panic, so a test returning `anyhow::Result` uses `?` and
//! any other test `.unwrap()`s (the panic message is the same sentence).
//!
//! Does not own: how often a condition is worth checking beyond
//! [`POLL_INTERVAL`] (checks here are cheap or bounded by their own
//! timeouts), or retry rules with other meanings (the conformance suite's
//! "pass N times in a row").

use std::fmt;
use std::time::Duration;

/// How long [`eventually`] and [`eventually_blocking`] wait between two
/// failed checks.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A condition that did not hold within its time.
pub struct TimedOut {
    /// What was waited for.
    pub what: String,
    /// How long it was waited for.
    pub within: Duration,
    /// What the last check saw.
    pub last_seen: String,
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "timed out after {:?} waiting for {}; last seen: {}",
            self.within, self.what, self.last_seen
        )
    }
}

// `unwrap()` prints `Debug`: make it the same sentence as `Display`.
impl fmt::Debug for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for TimedOut {}

/// What one run of a check found: the value it waited for, or what it saw
/// instead, as the timeout will print it.
pub trait Outcome {
    /// What the check hands back once it holds.
    type Value;
    /// `Ok(value)`, or `Err(what was seen)`.
    fn outcome(self) -> Result<Self::Value, String>;
}

impl<T, E: fmt::Display> Outcome for Result<T, E> {
    type Value = T;
    /// `{:#}`, so an `anyhow::Error` shows its whole chain.
    fn outcome(self) -> Result<T, String> {
        self.map_err(|seen| format!("{seen:#}"))
    }
}

impl<T> Outcome for Option<T> {
    type Value = T;
    fn outcome(self) -> Result<T, String> {
        self.ok_or_else(|| "nothing yet (the check returned None)".to_string())
    }
}

impl Outcome for bool {
    type Value = ();
    fn outcome(self) -> Result<(), String> {
        holds(self, || "the condition was false".to_string())
    }
}

/// Polls the async `check` every [`POLL_INTERVAL`] until it holds, for
/// at most `within`; the check runs at least once, and once more at the
/// deadline. Returns the value of the first success, or [`TimedOut`] with
/// `what` and what the last check saw.
///
/// Uses tokio's clock, so it works under a paused clock too.
pub async fn eventually<C: Outcome>(
    what: &str,
    within: Duration,
    mut check: impl AsyncFnMut() -> C,
) -> Result<C::Value, TimedOut> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let seen = match check().await.outcome() {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(TimedOut {
                what: what.to_string(),
                within,
                last_seen: seen,
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// [`eventually`] for a plain (blocking) `check`, on the calling thread.
pub fn eventually_blocking<C: Outcome>(
    what: &str,
    within: Duration,
    mut check: impl FnMut() -> C,
) -> Result<C::Value, TimedOut> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let seen = match check().outcome() {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if std::time::Instant::now() >= deadline {
            return Err(TimedOut {
                what: what.to_string(),
                within,
                last_seen: seen,
            });
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// An `Option`-shaped check as a check: `None` is "not yet", described
/// by `seen`.
///
/// ```
/// # use switchyard_test_support::eventually::seen;
/// let found: Result<u32, String> = seen(None, || "no leader".to_string());
/// assert_eq!(found.unwrap_err(), "no leader");
/// ```
pub fn seen<T, S>(value: Option<T>, seen: impl FnOnce() -> S) -> Result<T, S> {
    value.ok_or_else(seen)
}

/// A `bool`-shaped check as a check: `false` is "not yet", described by
/// `seen`.
///
/// ```
/// # use switchyard_test_support::eventually::holds;
/// assert!(holds(true, || "never shown").is_ok());
/// assert_eq!(holds(false, || 3).unwrap_err(), 3);
/// ```
pub fn holds<S>(condition: bool, seen: impl FnOnce() -> S) -> Result<(), S> {
    if condition { Ok(()) } else { Err(seen()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[tokio::test(start_paused = true)]
    async fn returns_the_first_success() {
        let calls = Cell::new(0);
        let value = eventually("three calls", Duration::from_secs(1), async || {
            calls.set(calls.get() + 1);
            holds(calls.get() == 3, || calls.get()).map(|()| "done")
        })
        .await
        .unwrap();
        assert_eq!((value, calls.get()), ("done", 3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_names_what_and_the_last_thing_seen() {
        let calls = Cell::new(0u32);
        let error = eventually("the impossible", Duration::from_millis(100), async || {
            calls.set(calls.get() + 1);
            Err::<(), _>(format!("attempt {}", calls.get()))
        })
        .await
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "timed out after 100ms waiting for the impossible; last seen: attempt {}",
                calls.get()
            )
        );
        // Polled until the deadline, once more at it.
        assert!(calls.get() >= 5, "{}", calls.get());
        assert_eq!(format!("{error:?}"), error.to_string());
    }

    #[test]
    fn the_blocking_form_has_the_same_meaning() {
        let mut calls = 0;
        let value = eventually_blocking("two calls", Duration::from_secs(5), || {
            calls += 1;
            seen((calls == 2).then_some(calls), || "one")
        })
        .unwrap();
        assert_eq!(value, 2);
        let error = eventually_blocking("never", Duration::ZERO, || {
            Err::<(), _>(anyhow::anyhow!("inner").context("outer"))
        })
        .unwrap_err();
        assert_eq!(error.last_seen, "outer: inner");
        let error = eventually_blocking("never", Duration::ZERO, || None::<u8>).unwrap_err();
        assert_eq!(error.last_seen, "nothing yet (the check returned None)");
        let error = eventually_blocking("never", Duration::ZERO, || false).unwrap_err();
        assert_eq!(error.last_seen, "the condition was false");
    }
}
