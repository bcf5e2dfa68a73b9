//! Readiness evidence: what one proxy said about one backend — the
//! model's [`BackendEvidence`], re-exported here where the engine uses it.
//!
//! What a transition needs evidence *for* (its backends and their endpoint
//! generations) is the replicated state's to say:
//! [`crate::state::ReplicatedState::required_backends`], which the state
//! machine's fence uses too.

pub use switchyard_proto::model::BackendEvidence;
