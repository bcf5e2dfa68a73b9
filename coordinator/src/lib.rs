//! switchyard's coordinator: the replicated state machine, the Raft group on
//! sled that replicates it, and the gRPC services proxies and operators use.

pub mod cutover;
pub mod raft;
pub mod server;
pub mod state;

/// Whether this build carries the test-only switches that break decision
/// rules on purpose (feature `fault-injection`, used only by the
/// simulation's broken-core tests in their own workspace). A binary users
/// or the process tests run must say `false`.
pub const FAULT_INJECTION: bool = cfg!(feature = "fault-injection");
