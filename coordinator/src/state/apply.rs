//! [`ReplicatedState::apply`]: the one mutator.

use super::*;

impl ReplicatedState {
    /// Applies the log entry at `index`. Total: never panics; a rejected
    /// command leaves the state unchanged except for `last_index`, which
    /// always advances (the entry was applied, its answer was "no").
    pub fn apply(&mut self, index: u64, command: &Command) -> CommandResponse {
        self.last_index = index;
        let _ = command;
        CommandResponse(Err(CommandError::Empty))
    }
}
