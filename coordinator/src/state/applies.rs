//! Several clients' applies in one entry (`Command::Applies`): the leader
//! groups the applies that arrive while its previous group is being
//! committed, so many clients cost one Raft entry, one state change and
//! one change to every proxy's configuration instead of one of each per
//! client.
//!
//! Each apply is carried out as if it had its own entry and answered on
//! its own; one refused leaves the others standing. What they share is
//! the entry's index, which every object an apply stores gets as its
//! revision and every route it changes as its generation. Two applies
//! naming the same object would give it one generation for two specs —
//! a proxy that applied the first would count as having applied the
//! second — so the second is refused here, deterministically on every
//! replica, whatever the leader grouped.

use super::command::{Command, CommandError, Outcome};
use super::{LogPosition, ReplicatedState};
use std::collections::BTreeSet;
use switchyard_proto::model::ResourceKey;

impl ReplicatedState {
    /// Carries out each apply of a [`Command::Applies`] entry in order,
    /// each answered in the outcome's `decisions`; the outcome's changes
    /// and routes are those of the applies accepted.
    pub(super) fn carry_out_applies(
        &mut self,
        at: LogPosition,
        applies: &[Command],
    ) -> Result<Outcome, CommandError> {
        if applies.is_empty() {
            return Err(CommandError::Empty);
        }
        let mut named: BTreeSet<ResourceKey> = BTreeSet::new();
        let mut entry = Outcome::default();
        for apply in applies {
            let keys = apply
                .apply_resources()
                .map(|resources| resources.iter().map(|r| r.key()).collect::<Vec<_>>());
            let answer = match keys {
                None => Err(CommandError::NotAnApply {
                    command: apply.kind_name().into(),
                }),
                Some(keys) => match keys.iter().find(|key| named.contains(*key)) {
                    Some(again) => Err(CommandError::NamedEarlierInEntry {
                        key: again.to_string(),
                    }),
                    None => {
                        // Named even when this apply is refused below:
                        // the rule reads the entry, not its outcome.
                        named.extend(keys);
                        self.carry_out(at, apply)
                    }
                },
            };
            if let Ok(outcome) = &answer {
                entry.changes.extend(outcome.changes.iter().cloned());
                entry.routes.extend(outcome.routes.iter().cloned());
            }
            entry.decisions.push(answer);
        }
        Ok(entry)
    }
}
