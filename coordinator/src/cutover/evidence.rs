//! Readiness evidence: what one proxy said about one backend.
//!
//! What a transition needs evidence *for* (its backends and their endpoint
//! generations) is the replicated state's to say:
//! [`crate::state::ReplicatedState::required_backends`], which the state
//! machine's fence uses too.

/// What one proxy said about one backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendEvidence {
    /// Endpoint generation the proxy checked.
    pub endpoints_generation: u64,
    /// Endpoints that passed the proxy's own health check.
    pub healthy: u32,
    /// Endpoints in that set.
    pub total: u32,
}

impl BackendEvidence {
    /// Whether this evidence shows the backend ready at `generation`.
    pub fn ready_at(&self, generation: u64) -> bool {
        self.healthy > 0 && self.endpoints_generation >= generation
    }
}
