//! switchyard's coordinator: the replicated state machine, the Raft group on
//! sled that replicates it, and the gRPC services proxies and operators use.

pub mod cutover;
pub mod raft;
pub mod server;
pub mod state;
