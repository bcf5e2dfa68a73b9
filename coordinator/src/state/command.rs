//! The commands of the Raft log: every change to replicated state is one of
//! these, applied by [`super::ReplicatedState::apply`].
//!
//! Commands carry every input the state machine needs, so applying the same
//! log gives the same state on every coordinator. No command carries a
//! clock reading: time is the leader's own business (see
//! `crate::cutover`), and a timestamp from one machine compared on another
//! is how a skewed clock flips traffic early.

use super::limits::{StoreLimit, StoreLimits};
use serde::{Deserialize, Serialize};
use switchyard_proto::model::{
    BackendKey, CutoverSettings, Kind, ObjectName, Resource, ResourceKey, ValidationError,
};

/// What a leader's decision rests on. The state machine carries the
/// decision out only while all of it still holds (see `super::fence`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DecisionBasis {
    /// Term of the leader that decided. The decision counts only in an
    /// entry appended in this term: re-proposed or forwarded after a leader
    /// change it is refused, because the evidence it rests on was that
    /// leader's soft state.
    pub term: u64,
    /// For a commit on evidence: every backend the new spec needs, with the
    /// endpoint generation the evidence covered. Refused when the endpoints
    /// moved on between the decision and its entry.
    #[serde(default)]
    pub endpoints: Vec<(BackendKey, u64)>,
}

/// One entry of the replicated log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Create or replace resources, atomically. Routes whose spec changes get
    /// a pending transition.
    Apply {
        /// The resources, as the client sent them.
        resources: Vec<Resource>,
        /// Coordinator-wide cutover defaults in force at proposal time.
        defaults: CutoverSettings,
        /// The proposing coordinator's store-wide limits (see
        /// `super::limits` for why they travel in the entry). `None` in
        /// entries written before limits existed: those were accepted
        /// without a check, and replaying them must answer the same.
        #[serde(default)]
        limits: Option<StoreLimits>,
        /// The validation rules' revision the proposer checked with
        /// (`ValidationRules::CURRENT_REVISION`); `None` in entries written
        /// before revisions, which are validated as they were then.
        #[serde(default)]
        validation: Option<u32>,
    },
    /// Remove resources, atomically. Never refused for a limit: deleting
    /// is how a store over its limits gets back under them.
    Delete {
        /// What to remove.
        keys: Vec<ResourceKey>,
    },
    /// A proxy joins (or rejoins) the fleet.
    RegisterProxy {
        /// Proxy id.
        id: String,
        /// Its zone.
        zone: String,
        /// Its admin address.
        admin_address: String,
    },
    /// A proxy leaves: it shut down gracefully (or, in entries written
    /// before [`Command::ExpireProxy`] existed, its lease expired).
    RemoveProxy {
        /// Proxy id.
        id: String,
        /// Why, for logs and status.
        reason: String,
        /// The registration that leaves; a newer registration under the same
        /// id (a fast restart) is left alone. `None` in older entries.
        #[serde(default)]
        registration: Option<u64>,
    },
    /// The leader expired a proxy's lease (a decision, so fenced).
    ExpireProxy {
        /// Proxy id.
        id: String,
        /// The registration whose lease expired; a newer one is left alone.
        registration: u64,
        /// What the decision rests on.
        basis: DecisionBasis,
    },
    /// The leader found the policy met: the pending generation becomes
    /// active.
    CommitTransition {
        /// The route.
        route: ObjectName,
        /// The pending generation being committed (stale ones are rejected).
        generation: u64,
        /// True when committed by the `force` on-timeout action.
        forced: bool,
        /// What the decision rests on. `None` only in entries written
        /// before decisions were fenced; those are applied as they were.
        #[serde(default)]
        basis: Option<DecisionBasis>,
    },
    /// The leader gave up on a transition (timeout with `keep-old`).
    AbandonTransition {
        /// The route.
        route: ObjectName,
        /// The pending generation being abandoned.
        generation: u64,
        /// Why, shown in status.
        reason: String,
        /// What the decision rests on (`None` in older entries).
        #[serde(default)]
        basis: Option<DecisionBasis>,
    },
    /// Every decision of one leader pass, in one entry: each is one of
    /// [`Command::CommitTransition`], [`Command::AbandonTransition`] or
    /// [`Command::ExpireProxy`], fenced and answered on its own exactly as
    /// if it had its own entry (in [`Outcome::decisions`]); one refused
    /// decision leaves the others standing. Anything else inside is
    /// refused with [`CommandError::NotADecision`].
    Decisions {
        /// The decisions, carried out in order.
        decisions: Vec<Command>,
    },
    /// A [`Command::Apply`] and the commits its proposing leader decided
    /// with it: routes of the apply whose new spec that leader's current
    /// evidence already showed ready under its policy (a header change on
    /// warm backends), so one entry and one change to the fleet do what
    /// an apply and a later commit would. The apply is carried out first;
    /// then each commit goes through the fence of a
    /// [`Command::CommitTransition`] for the generation the apply left
    /// pending, and is answered on its own in [`Outcome::decisions`]: one
    /// refused (another term, endpoints moved on) leaves its route pending
    /// for the leader loop, and never the apply undone. Anything but an
    /// apply inside is refused with [`CommandError::NotAnApply`].
    ApplyAndCommit {
        /// The apply.
        apply: Box<Command>,
        /// The routes to commit, each with what its decision rests on.
        commits: Vec<(ObjectName, DecisionBasis)>,
    },
    /// Several clients' applies in one entry, as the leader groups the
    /// applies that arrive while its previous group is being committed
    /// (`crate::server` `apply_group`): each is a [`Command::Apply`] or a
    /// [`Command::ApplyAndCommit`], carried out in order and answered on
    /// its own in [`Outcome::decisions`], exactly as if it had its own
    /// entry; one refused leaves the others standing. They share the
    /// entry's index, which is the generation every route changed here
    /// gets, so no two may name the same object: one that names an object
    /// an earlier one in the entry named is refused with
    /// [`CommandError::NamedEarlierInEntry`]. Anything else inside is
    /// refused with [`CommandError::NotAnApply`].
    Applies {
        /// The applies, carried out in order.
        applies: Vec<Command>,
    },
}

impl Command {
    /// The command's name, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Command::Apply { .. } => "Apply",
            Command::Delete { .. } => "Delete",
            Command::RegisterProxy { .. } => "RegisterProxy",
            Command::RemoveProxy { .. } => "RemoveProxy",
            Command::ExpireProxy { .. } => "ExpireProxy",
            Command::CommitTransition { .. } => "CommitTransition",
            Command::AbandonTransition { .. } => "AbandonTransition",
            Command::Decisions { .. } => "Decisions",
            Command::ApplyAndCommit { .. } => "ApplyAndCommit",
            Command::Applies { .. } => "Applies",
        }
    }

    /// The resources of an apply: a [`Command::Apply`]'s, or those of the
    /// apply a [`Command::ApplyAndCommit`] carries; `None` for any other
    /// command.
    pub fn apply_resources(&self) -> Option<&[Resource]> {
        match self {
            Command::Apply { resources, .. } => Some(resources),
            Command::ApplyAndCommit { apply, .. } => match apply.as_ref() {
                Command::Apply { resources, .. } => Some(resources),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether this is one of the leader's decisions, which a
    /// [`Command::Decisions`] batch may carry.
    pub fn is_decision(&self) -> bool {
        matches!(
            self,
            Command::CommitTransition { .. }
                | Command::AbandonTransition { .. }
                | Command::ExpireProxy { .. }
        )
    }
}

/// What an accepted command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Outcome {
    /// One human-readable line per change, e.g. `HTTPRoute ns/r: generation 3 pending`.
    pub changes: Vec<String>,
    /// Routes touched and the generation each now has as its newest.
    pub routes: Vec<(ObjectName, u64)>,
    /// Log index of the entry that produced this outcome.
    #[serde(default)]
    pub index: u64,
    /// For a [`Command::Decisions`] batch: each decision's own answer, in
    /// the batch's order; for [`Command::ApplyAndCommit`], each commit's;
    /// for [`Command::Applies`], each apply's (empty for every other
    /// command).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Result<Outcome, CommandError>>,
}

/// Why a command was rejected. A rejected command leaves the state
/// unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum CommandError {
    /// A resource is not well formed.
    #[error("invalid resource: {0}")]
    Invalid(InvalidResource),
    /// The same object appears twice in one apply.
    #[error("{key} appears more than once in one apply")]
    Duplicate {
        /// The repeated key.
        key: String,
    },
    /// A route whose `namespace/name` a route of another kind holds.
    #[error(
        "{route} refused: a {holder} of the same namespace and name is stored, and routes of both kinds share one name space; rename one of them"
    )]
    RouteNameTaken {
        /// `Kind namespace/name` of the refused route.
        route: String,
        /// The kind of the stored route.
        holder: Kind,
    },
    /// An empty apply or delete.
    #[error("nothing to do: the request names no resources")]
    Empty,
    /// A proxy id or zone that cannot be used.
    #[error("invalid proxy registration: {0}")]
    InvalidProxy(String),
    /// The apply would take the store past one of its limits.
    #[error(
        "apply refused: {after} {} would exceed {} {max} ({current} stored now)",
        .limit.noun(),
        .limit.flag()
    )]
    OverLimit {
        /// Which limit.
        limit: StoreLimit,
        /// How many are stored now.
        current: usize,
        /// How many the apply would leave stored.
        after: usize,
        /// The limit the command carried.
        max: usize,
    },
    /// One object larger than the apply's object size limit.
    #[error("apply refused: {object} is {bytes} bytes as JSON, over --max-object-bytes {max}")]
    ObjectTooLarge {
        /// `Kind namespace/name`.
        object: String,
        /// Its size.
        bytes: usize,
        /// The limit the command carried.
        max: usize,
    },
    /// A commit or abandon for a generation that is no longer pending.
    #[error("route {route}: generation {generation} is not pending ({current})")]
    NotPending {
        /// The route.
        route: String,
        /// The generation the command named.
        generation: u64,
        /// What is pending instead.
        current: String,
    },
    /// A decision that reached the log in another term than the one its
    /// leader decided in (re-proposed or forwarded after a leader change).
    #[error(
        "decision of the term-{decided_term} leader reached the log in term {entry_term}: not carried out"
    )]
    StaleDecision {
        /// Term the decision was made in.
        decided_term: u64,
        /// Term of the entry carrying it.
        entry_term: u64,
    },
    /// A commit whose evidence covers endpoints that changed since.
    #[error("route {route}: generation {generation} not committed: {detail}")]
    EvidenceOutdated {
        /// The route.
        route: String,
        /// The generation the commit named.
        generation: u64,
        /// Which backend moved on, and how.
        detail: String,
    },
    /// A [`Command::Decisions`] batch carried a command that is not a
    /// leader's decision (or another batch).
    #[error("a batch of decisions may carry only commits, abandons and expiries, not {command}")]
    NotADecision {
        /// What it carried.
        command: String,
    },
    /// A [`Command::ApplyAndCommit`] that carried something other than an
    /// apply, or a [`Command::Applies`] something other than an apply or
    /// an apply with commits.
    #[error("an apply with commits, or an entry of applies, must carry applies, not {command}")]
    NotAnApply {
        /// What it carried.
        command: String,
    },
    /// An apply of a [`Command::Applies`] entry named an object an
    /// earlier apply of the same entry named: both would give it the
    /// entry's index as its generation or revision.
    #[error("{key} was named by an earlier apply of the same entry")]
    NamedEarlierInEntry {
        /// The object named twice.
        key: String,
    },
    /// An expiry for a registration that is no longer the proxy's.
    #[error("proxy {id}: registration {registration} is not current ({current})")]
    StaleRegistration {
        /// Proxy id.
        id: String,
        /// The registration the command named.
        registration: u64,
        /// What is registered instead.
        current: String,
    },
}

/// [`ValidationError`] in a serializable shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidResource {
    /// `Kind namespace/name`.
    pub object: String,
    /// Field path.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for InvalidResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.object, self.field, self.message)
    }
}

impl From<ValidationError> for InvalidResource {
    fn from(e: ValidationError) -> Self {
        InvalidResource {
            object: e.object,
            field: e.field,
            message: e.message,
        }
    }
}

/// The state machine's answer to one log entry (openraft's `R`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandResponse(pub Result<Outcome, CommandError>);
