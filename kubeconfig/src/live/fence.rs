//! Fencing status writes by Raft term: every status switchyard writes
//! carries the writer's term in a condition of its own type,
//! [`LEADER_TERM_CONDITION`], and a writer refuses to write over a higher
//! term — a deposed leader that still believes it leads (for up to an
//! election timeout) cannot overwrite what the new leader wrote.
//!
//! **Where the term lives.** The Gateway API CRDs prune unknown status
//! fields, so the term must sit in a schema-valid spot that is ours: a
//! condition (conditions are list-maps keyed by `type`, and a
//! domain-prefixed type is ours alone) in our own `parents[]` entries of
//! an HTTPRoute, and among a Gateway's and a GatewayClass's conditions.
//! The term is in the message (`written by the switchyard leader of Raft
//! term 7`); its `lastTransitionTime` is when that term first wrote here.
//!
//! **Why the read is safe.** The writers read, check the term and apply
//! with the read's `resourceVersion`: if the new leader writes in between,
//! the apply gets `409` and the re-read sees its term. Check and write are
//! one compare-and-swap.
//!
//! **A higher term that is old.** A leader can only be deposed unknowingly
//! for about an election timeout (it then stops acknowledging a quorum and
//! writes nothing). A higher term written more than [`FENCE_WINDOW`] ago
//! can therefore not be a live leader of this Raft cluster: it is left
//! over from an earlier one (a coordinator cluster rebuilt from empty
//! data starts again at term 1), and does not fence, so such a rebuild
//! does not freeze status forever.
//!
//! Pure: times come in as arguments. It deliberately does not decide who
//! leads (the caller's [`super::Store`] does) nor stop anything.

use super::conditions::{Condition, ConditionStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as K8sCondition, Time};
use std::time::Duration;

/// The condition type carrying the writer's Raft term.
pub const LEADER_TERM_CONDITION: &str = "switchyard.io/LeaderTerm";

/// How long a higher term fences writers with a lower one (see the module
/// docs): far longer than any election timeout plus clock skew between
/// coordinators, far shorter than "forever".
pub const FENCE_WINDOW: Duration = Duration::from_secs(300);

const MESSAGE_PREFIX: &str = "written by the switchyard leader of Raft term ";

/// A write refused because a newer leader wrote the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenced {
    /// The term found on the object.
    pub stored: u64,
    /// The writer's term.
    pub ours: u64,
}

impl std::fmt::Display for Fenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status written by Raft term {}, newer than ours ({}): this coordinator was deposed",
            self.stored, self.ours
        )
    }
}

/// The term condition a writer of `term` adds, at the object's
/// `generation`.
pub(crate) fn term_condition(term: u64, generation: Option<i64>) -> Condition {
    Condition {
        type_: LEADER_TERM_CONDITION.to_string(),
        status: ConditionStatus::True,
        reason: "Written".to_string(),
        message: format!("{MESSAGE_PREFIX}{term}"),
        observed_generation: generation,
    }
}

/// The term in a list of stored conditions and when it was first written.
pub(crate) fn stored_term(conditions: &[K8sCondition]) -> Option<(u64, &Time)> {
    conditions
        .iter()
        .filter(|c| c.type_ == LEADER_TERM_CONDITION)
        .find_map(|c| {
            let term = c.message.strip_prefix(MESSAGE_PREFIX)?.parse().ok()?;
            Some((term, &c.last_transition_time))
        })
}

/// The highest of several stored terms (an HTTPRoute has one per parent
/// entry of ours).
pub(crate) fn highest<'a>(
    terms: impl IntoIterator<Item = Option<(u64, &'a Time)>>,
) -> Option<(u64, &'a Time)> {
    terms.into_iter().flatten().max_by_key(|(term, _)| *term)
}

/// Whether a writer of term `ours` may write over `stored` at `now`.
pub(crate) fn check(stored: Option<(u64, &Time)>, ours: u64, now: &Time) -> Result<(), Fenced> {
    let Some((term, written)) = stored else {
        return Ok(());
    };
    if term <= ours {
        return Ok(());
    }
    let age = now.0.as_second().saturating_sub(written.0.as_second());
    let window = i64::try_from(FENCE_WINDOW.as_secs()).unwrap_or(i64::MAX);
    if age >= window {
        return Ok(());
    }
    Err(Fenced { stored: term, ours })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn time(s: &str) -> Time {
        serde_json::from_value(json!(s)).unwrap()
    }

    fn stored(term: u64, at: &str) -> K8sCondition {
        let c = term_condition(term, Some(3));
        K8sCondition {
            last_transition_time: time(at),
            message: c.message,
            observed_generation: c.observed_generation,
            reason: c.reason,
            status: "True".into(),
            type_: c.type_,
        }
    }

    #[test]
    fn the_term_round_trips_through_the_condition() {
        let c = [stored(7, "2025-05-05T05:05:05Z")];
        let (term, at) = stored_term(&c).unwrap();
        assert_eq!(term, 7);
        assert_eq!(at, &time("2025-05-05T05:05:05Z"));
        assert_eq!(stored_term(&[]), None);
    }

    #[test]
    fn a_recent_higher_term_fences_a_lower_or_equal_one_does_not() {
        let now = time("2025-05-05T05:06:00Z");
        let c = [stored(8, "2025-05-05T05:05:00Z")];
        let found = stored_term(&c);
        assert_eq!(check(found, 7, &now), Err(Fenced { stored: 8, ours: 7 }));
        assert_eq!(check(found, 8, &now), Ok(()));
        assert_eq!(check(found, 9, &now), Ok(()));
        assert_eq!(check(None, 1, &now), Ok(()));
    }

    #[test]
    fn a_higher_term_older_than_the_window_is_left_over_and_does_not_fence() {
        let c = [stored(50, "2025-05-05T05:00:00Z")];
        let found = stored_term(&c);
        assert!(check(found, 1, &time("2025-05-05T05:04:59Z")).is_err());
        assert_eq!(check(found, 1, &time("2025-05-05T05:05:00Z")), Ok(()));
    }

    #[test]
    fn the_highest_of_several_entries_counts() {
        let (a, b) = (
            [stored(3, "2025-05-05T05:05:00Z")],
            [stored(9, "2025-05-05T05:05:00Z")],
        );
        assert_eq!(
            highest([stored_term(&a), None, stored_term(&b)]).map(|(t, _)| t),
            Some(9)
        );
    }
}
