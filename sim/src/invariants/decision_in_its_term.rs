//! Invariant 9 — a decision belongs to its leader's term.
//!
//! Checked at every apply: a commit, abandon or expiry that takes effect
//! must sit in an entry appended in the term of the leader that decided it.
//! The deciding term is the simulation's own record of who decided what
//! (not read from the command), so the checker holds whatever the command
//! carries. A deposed leader's decision re-proposed in a later term — what
//! openraft's "forward to the leader" did to a truncated entry — must be
//! refused by the state machine.

use super::{Check, Violation};
use crate::cluster::LogEntry;

const NAME: &str = "invariant 9: a decision belongs to its leader's term";

/// Counts what it saw.
#[derive(Debug, Default)]
pub struct DecisionInItsTerm {
    /// Decisions carried out in their own term.
    pub in_term: u64,
    /// Decisions that reached the log in another term and were refused.
    pub refused: u64,
}

impl DecisionInItsTerm {
    /// Coordinator `c` applied `entry` at `index`; `took_effect` is
    /// whether the state machine accepted its command.
    pub fn on_apply(&mut self, c: usize, index: u64, entry: &LogEntry, took_effect: bool) -> Check {
        let Some(decided_in) = entry.decided_in else {
            return Ok(());
        };
        match (decided_in == entry.term, took_effect) {
            (true, true) => self.in_term += 1,
            (false, false) => self.refused += 1,
            (true, false) => {}
            (false, true) => {
                return Err(Violation {
                    invariant: NAME,
                    detail: format!(
                        "coordinator {c} at log index {index}: a decision of the term-{decided_in} leader took effect in an entry of term {}: {:?}",
                        entry.term, entry.command
                    ),
                });
            }
        }
        Ok(())
    }
}
