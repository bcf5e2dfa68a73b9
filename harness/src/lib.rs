//! The chaos harness: start the real `switchyard` binary (and test
//! backends) as separate processes on loopback, read each one's bound
//! addresses from its `LISTENING` line (no sleeps), stop it by PID only
//! (`SIGKILL`, `SIGTERM`, `SIGSTOP`/`SIGCONT`), restart it with the same
//! arguments and data dir, and print every process's log when a test fails.
//! Nothing is left running: dropping a [`Process`] kills it. A [`Relay`]
//! in front of a process cuts, delays or one-ways its links.
//!
//! It does not know what the processes are; scenarios live in the tests
//! that use it (the root package's `tests/`, which pass the binary path
//! from `CARGO_BIN_EXE_switchyard`), and the demo. The seeded simulation
//! of the pure cores is another crate (`sim/`), which nothing but tests
//! uses.

pub mod process;
pub mod relay;
pub mod report;

pub use process::{Process, ProcessSpec, free_port, http_get};
pub use relay::Relay;
