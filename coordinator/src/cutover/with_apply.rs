//! An apply that carries its own commits. When the fleet already holds
//! current evidence for every backend a route's new spec needs — a header
//! change, a route added on a Service every proxy keeps warm — the leader
//! decides the commit together with the apply and proposes both as one
//! entry (`Command::ApplyAndCommit`): one Raft entry and one change to
//! every proxy's configuration instead of two of each, and no wait for
//! the leader loop's next pass.
//!
//! Owns: which commits an apply carries
//! ([`CutoverEngine::commits_with_apply`]) and the command that carries
//! them ([`Decision::with_apply`]). Does not own the verdict (a pass's,
//! `super::judge`) or the fence: the state machine checks each commit
//! exactly as it checks a pass's (`crate::state` `fence`), so a commit
//! whose term or endpoints no longer hold when its entry is applied
//! leaves its route pending for a pass to judge.
//!
//! The state the apply would leave is the state machine's own answer:
//! the apply is applied to a copy of the leader's state (O(1) to copy,
//! O(change) to apply), so which routes it makes pending, under which
//! policy, needing which backends at which endpoint generations, follows
//! the one set of rules every coordinator applies.

use super::{CutoverEngine, Decision};
use crate::state::{Command, LogPosition, ReplicatedState};
use switchyard_proto::model::Resource;

/// Most routes an apply may name and still be judged with it. Judging
/// costs O(P) per route's backends, on the apply's own path; an apply
/// of more routes (a bulk import, mostly of backends nobody has warmed
/// yet) goes the ordinary way, judged by the leader loop's passes.
pub const MAX_ROUTES_JUDGED_WITH_APPLY: usize = 64;

impl CutoverEngine {
    /// Whether `apply` is judged with its commits at all: an apply naming
    /// at least one route and at most [`MAX_ROUTES_JUDGED_WITH_APPLY`].
    /// O(resources): asked before the engine is copied, so an apply of
    /// Services and EndpointSlices alone (endpoint churn, the most
    /// frequent apply) costs the leader nothing more.
    pub fn judges_apply(apply: &Command) -> bool {
        let Command::Apply { resources, .. } = apply else {
            return false;
        };
        let routes = resources
            .iter()
            .filter(|r| matches!(r, Resource::HttpRoute(_)))
            .count();
        (1..=MAX_ROUTES_JUDGED_WITH_APPLY).contains(&routes)
    }

    /// The commits `apply` (a [`Command::Apply`]) can carry: each route it
    /// would leave pending whose policy the fleet's current evidence
    /// already meets, as a pass would commit it. None when `apply` names
    /// no route or more than [`MAX_ROUTES_JUDGED_WITH_APPLY`], when the
    /// state machine would refuse it, or while this leader may not judge
    /// or is in its grace. `state` is the leader's applied state: entries
    /// committed after it are the fence's business.
    ///
    /// Takes a copy of the engine, as a pass does
    /// ([`CutoverEngine::start_pass`]), and first brings its registry in
    /// line with `state`: a proxy registered (or registered again) since
    /// the leader loop's last look must count as live and not ready. On
    /// a registry as the last look left it, a policy per zone was once
    /// met without a zone whose only proxy had just registered again
    /// (the simulation's invariant 1, seed 158).
    pub fn commits_with_apply(
        self,
        state: &ReplicatedState,
        apply: &Command,
        now_ms: u64,
    ) -> Vec<Decision> {
        self.commits_with_applies(state, std::slice::from_ref(apply), now_ms)
            .pop()
            .unwrap_or_default()
    }

    /// [`CutoverEngine::commits_with_apply`] for applies that go in one
    /// entry in this order (a [`Command::Applies`]): the commits each can
    /// carry, judged on the state the applies before it leave. One copy of
    /// the engine and one sync of its registry serve them all.
    ///
    /// The state each is judged on lacks the commits the applies before
    /// it carry: a commit changes only its own route's record, which no
    /// other apply of the entry names (`crate::state` refuses an entry
    /// whose applies share an object), so no verdict depends on it.
    pub fn commits_with_applies(
        mut self,
        state: &ReplicatedState,
        applies: &[Command],
        now_ms: u64,
    ) -> Vec<Vec<Decision>> {
        let mut commits = vec![Vec::new(); applies.len()];
        if !applies.iter().any(Self::judges_apply) || !self.may_judge(state) {
            return commits;
        }
        self.sync_registry(state, now_ms);
        let Some(mut judge) = self.apply_judge(state, now_ms) else {
            return commits;
        };
        let mut after = state.clone();
        // The next entry, in the term the state was last applied in (this
        // leader's, or `may_judge` said no).
        let at = LogPosition::new(state.last_index + 1, state.last_term);
        for (apply, carried) in applies.iter().zip(&mut commits) {
            // Applied even when not judged: the next one is judged on
            // the state this one leaves.
            let Ok(outcome) = after.apply(at, apply).0 else {
                continue;
            };
            if Self::judges_apply(apply) {
                *carried = judge.commits_ready(&after, outcome.routes.iter().map(|(name, _)| name));
            }
        }
        commits
    }
}

impl Decision {
    /// The Raft command for `apply` with `commits` (commits on evidence,
    /// from [`CutoverEngine::commits_with_apply`]): the apply alone when
    /// there are none, a [`Command::ApplyAndCommit`] otherwise.
    pub fn with_apply(apply: Command, commits: &[Decision]) -> Command {
        let carried: Vec<_> = commits
            .iter()
            .filter_map(|decision| match decision {
                Decision::Commit {
                    route,
                    forced: false,
                    basis,
                    ..
                } => Some((route.clone(), basis.clone())),
                _ => None,
            })
            .collect();
        if carried.is_empty() {
            apply
        } else {
            Command::ApplyAndCommit {
                apply: Box::new(apply),
                commits: carried,
            }
        }
    }
}
