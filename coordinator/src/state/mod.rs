//! The replicated state machine (work in progress).

pub mod command;
