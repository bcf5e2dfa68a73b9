//! Property: `ReplicatedState::apply` is a total, deterministic function
//! whose rejections change nothing. Over arbitrary sequences of commands —
//! valid and invalid resources (bad names, port 0, duplicate keys and
//! listeners, bad regexes, huge weights, bad annotations), applies over
//! small store limits (or carrying none, as old entries do), deletes of
//! anything, registrations of odd proxies, commits and abandons of real,
//! stale and made-up generations — applied at increasing log indexes:
//!
//! - `apply` never panics. In debug builds (tests) `apply` re-checks the
//!   state's invariants after every command and panics if one broke, so
//!   this also asserts that the invariants hold after every step.
//! - A rejected command (`CommandResponse(Err(_))`) leaves the state as it
//!   was, except `last_index`, which is the command's index.
//! - Replaying the same commands on a fresh state gives the same answers
//!   and the same state (every coordinator applies the same log).
//! - The state, and every command, survive a serde_json round trip
//!   unchanged (the Raft log and snapshots are JSON).
//!
//! Why: this is the one mutator of replicated state. A panic in it stops a
//! coordinator on a log entry it will meet again at restart; a partial
//! change on a rejected command, or nondeterminism, makes coordinators
//! disagree silently.
//!
//! Value pools are small on purpose (a few names, namespaces, proxies) so
//! that commands in one sequence hit the same objects: re-applies,
//! supersedes, withdrawals, deletes of live routes, commits of the
//! generation really pending. The model values (resources, settings,
//! names) come from `switchyard_test_support::strategies`; the commands
//! and steps built from them are this file's.
//!
//! Cases: 256, or `PROPTEST_CASES`. Failures are not persisted to a
//! regressions file (the shrunk sequence is printed instead, and a real bug
//! becomes a named test); every run prints a seed that `PROPTEST_RNG_SEED`
//! replays.

use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::BoxedStrategy;
use switchyard_coordinator::state::{
    Command, CommandResponse, DecisionBasis, LogPosition, ReplicatedState, StoreLimits,
};
use switchyard_proto::model::*;
use switchyard_test_support::strategies::{
    self, backend_key, object_name, pick, resource, settings,
};

/// Default cases: a few seconds in debug on two cores.
const CASES: u32 = 256;

fn config() -> ProptestConfig {
    strategies::config(
        CASES,
        "cargo test -p switchyard-coordinator --test prop_state",
    )
}

// ---- commands ---------------------------------------------------------------

/// One step of a sequence. `CommitPending`/`AbandonPending` name the route
/// only; the generation is read from the state when the step runs, so
/// sequences commit what is really pending (raw `Command`s with random
/// generations almost never would). Steps are resolved to plain
/// `Command`s once, and the replay uses those.
#[derive(Debug, Clone)]
enum Step {
    Raw(Command),
    CommitPending {
        route: ObjectName,
        forced: bool,
    },
    AbandonPending {
        route: ObjectName,
    },
    /// Commit (or abandon) one generation below what is pending: stale.
    CommitStale {
        route: ObjectName,
        abandon: bool,
    },
}

/// No limits (entries from before limits existed), or limits small
/// enough for the value pools to reach, so applies get refused for them.
fn store_limits() -> BoxedStrategy<Option<StoreLimits>> {
    prop_oneof![
        1 => Just(None),
        2 => (0usize..4, 0usize..6, prop::option::of(0usize..3000), prop::option::of(0usize..20_000))
            .prop_map(|(max_routes, max_endpoints, max_object_bytes, max_config_bytes)| {
                Some(StoreLimits {
                    max_routes,
                    max_endpoints,
                    max_object_bytes,
                    max_config_bytes,
                })
            }),
    ]
    .boxed()
}

/// The term of every entry [`run`] writes: decisions of other terms must
/// be refused.
const TERM: u64 = 2;

/// A decision's basis: mostly this term's, sometimes another's.
fn basis() -> impl Strategy<Value = DecisionBasis> {
    (
        prop_oneof![3 => Just(TERM), 1 => 0u64..5],
        prop::collection::vec((backend_key(), 0u64..50), 0..2),
    )
        .prop_map(|(term, endpoints)| DecisionBasis { term, endpoints })
}

fn raw_command() -> BoxedStrategy<Command> {
    let generation = prop_oneof![3 => 0u64..4, 1 => any::<u64>()];
    let proxy_field = prop_oneof![
        6 => pick(&["p1", "p2", "zone-a"]),
        1 => pick(&["", "has space", "tab\t", "ünï", "\u{0}"]),
        1 => Just("p".repeat(254)),
    ];
    let key =
        (select(&Kind::ALL[..]), object_name()).prop_map(|(kind, name)| ResourceKey { kind, name });
    prop_oneof![
        6 => (
            prop_oneof![1 => Just(Vec::new()), 9 => prop::collection::vec(resource(), 1..4)],
            settings(),
            store_limits(),
            prop::option::of(0u32..3),
        )
            .prop_map(|(resources, defaults, limits, validation)| Command::Apply {
                resources,
                defaults,
                limits,
                validation,
            }),
        2 => prop::collection::vec(key, 0..3).prop_map(|keys| Command::Delete { keys }),
        1 => (proxy_field.clone(), proxy_field.clone(), ".*").prop_map(|(id, zone, admin_address)| {
            Command::RegisterProxy {
                id,
                zone,
                admin_address,
            }
        }),
        1 => (proxy_field.clone(), ".{0,10}", prop::option::of(generation.clone())).prop_map(
            |(id, reason, registration)| Command::RemoveProxy { id, reason, registration }
        ),
        1 => (proxy_field, generation.clone(), basis()).prop_map(|(id, registration, basis)| {
            Command::ExpireProxy { id, registration, basis }
        }),
        1 => (object_name(), generation.clone(), any::<bool>(), prop::option::of(basis())).prop_map(
            |(route, generation, forced, basis)| Command::CommitTransition {
                route,
                generation,
                forced,
                basis,
            },
        ),
        1 => (object_name(), generation, ".{0,10}", prop::option::of(basis())).prop_map(
            |(route, generation, reason, basis)| Command::AbandonTransition {
                route,
                generation,
                reason,
                basis,
            }
        ),
    ]
    .boxed()
}

fn step() -> BoxedStrategy<Step> {
    prop_oneof![
        6 => raw_command().prop_map(Step::Raw),
        2 => (object_name(), any::<bool>())
            .prop_map(|(route, forced)| Step::CommitPending { route, forced }),
        1 => object_name().prop_map(|route| Step::AbandonPending { route }),
        1 => (object_name(), any::<bool>())
            .prop_map(|(route, abandon)| Step::CommitStale { route, abandon }),
    ]
    .boxed()
}

/// A step as a concrete command against the current state.
fn resolve(step: &Step, state: &ReplicatedState) -> Command {
    let pending = |route: &ObjectName| {
        state
            .routes
            .get(route)
            .and_then(|r| r.pending.as_ref())
            .map_or(1, |p| p.target.generation)
    };
    // What the leader would decide on: this term, the current endpoints.
    let basis = |route: &ObjectName| DecisionBasis {
        term: TERM,
        endpoints: state
            .routes
            .get(route)
            .and_then(|r| r.pending.as_ref())
            .map(|p| {
                state
                    .required_backends(&p.target.spec)
                    .into_iter()
                    .filter_map(|(b, g)| g.map(|g| (b, g)))
                    .collect()
            })
            .unwrap_or_default(),
    };
    match step {
        Step::Raw(command) => command.clone(),
        Step::CommitPending { route, forced } => Command::CommitTransition {
            route: route.clone(),
            generation: pending(route),
            forced: *forced,
            basis: Some(basis(route)),
        },
        Step::AbandonPending { route } => Command::AbandonTransition {
            route: route.clone(),
            generation: pending(route),
            reason: "timed out".into(),
            basis: Some(basis(route)),
        },
        Step::CommitStale { route, abandon } => {
            let generation = pending(route).saturating_sub(1);
            if *abandon {
                Command::AbandonTransition {
                    route: route.clone(),
                    generation,
                    reason: "stale".into(),
                    basis: Some(basis(route)),
                }
            } else {
                Command::CommitTransition {
                    route: route.clone(),
                    generation,
                    forced: false,
                    basis: Some(basis(route)),
                }
            }
        }
    }
}

/// The concrete log a run applied: index, command, answer.
type Log = Vec<(u64, Command, CommandResponse)>;

/// Applies the steps from a fresh state at increasing indexes (gaps are
/// allowed: membership entries take indexes too), checking the
/// no-change-on-rejection property at each one. Returns the concrete log.
fn run(steps: &[(Step, u64)]) -> Result<(ReplicatedState, Log), TestCaseError> {
    let mut state = ReplicatedState::default();
    let mut log = Vec::new();
    let mut index = 0u64;
    for (step, gap) in steps {
        index += gap;
        let command = resolve(step, &state);
        let before = state.clone();
        // Panics here (including the debug-build invariant check) fail the
        // case, and proptest shrinks the sequence.
        let response = state.apply(LogPosition::new(index, TERM), &command);
        prop_assert_eq!(state.last_index, index);
        if let Err(e) = &response.0 {
            let mut expected = before;
            expected.last_index = index;
            expected.last_term = TERM;
            prop_assert!(
                state == expected,
                "rejected command changed the state: {:?} -> {}",
                command,
                e
            );
        }
        log.push((index, command, response));
    }
    Ok((state, log))
}

fn steps() -> impl Strategy<Value = Vec<(Step, u64)>> {
    prop::collection::vec(
        (step(), prop_oneof![9 => Just(1u64), 1 => 2u64..1000]),
        1..40,
    )
}

proptest! {
    #![proptest_config(config())]

    /// Never panics (invariants hold after every step, checked by `apply`
    /// itself in debug builds), and rejections change nothing but
    /// `last_index`.
    #[test]
    fn apply_is_total_and_rejections_change_nothing(steps in steps()) {
        run(&steps)?;
    }

    /// The same log gives the same answers and the same state.
    #[test]
    fn replay_is_deterministic(steps in steps()) {
        let (first, log) = run(&steps)?;
        let mut replayed = ReplicatedState::default();
        for (index, command, response) in &log {
            prop_assert_eq!(&replayed.apply(LogPosition::new(*index, TERM), command), response);
        }
        prop_assert_eq!(replayed, first);
    }

    /// Snapshots and log entries are JSON: both round-trip exactly.
    #[test]
    fn state_and_commands_round_trip_through_json(steps in steps()) {
        let (state, log) = run(&steps)?;
        let json = serde_json::to_string(&state).expect("state serializes");
        let back: ReplicatedState = serde_json::from_str(&json).expect("state deserializes");
        prop_assert_eq!(back, state);
        for (_, command, response) in &log {
            let json = serde_json::to_string(command).expect("command serializes");
            let back: Command = serde_json::from_str(&json).expect("command deserializes");
            prop_assert_eq!(&back, command);
            let json = serde_json::to_string(response).expect("response serializes");
            let back: CommandResponse = serde_json::from_str(&json).expect("response deserializes");
            prop_assert_eq!(&back, response);
        }
    }
}

/// Cases of the sled property: each opens a store twice.
const STORE_CASES: u32 = 48;

proptest! {
    #![proptest_config(strategies::config(
        STORE_CASES,
        "cargo test -p switchyard-coordinator --test prop_state",
    ))]

    /// The sled store keeps the state one key per object and writes only
    /// what each batch touched: after the log is applied through it (in
    /// batches of one to three entries) its state equals the pure
    /// function's, and so does the state a reopen rebuilds from the keys.
    #[test]
    fn the_store_reopens_to_exactly_the_applied_state(steps in steps(), batch in 1usize..4) {
        let (state, log) = run(&steps)?;
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let dir = tempfile::tempdir().expect("temporary directory");
        let (applied, reopened) = runtime.block_on(async {
            use openraft::storage::RaftStateMachine;
            let mut stores = switchyard_coordinator::raft::open(dir.path()).expect("open");
            for chunk in log.chunks(batch) {
                let entries = chunk.iter().map(|(index, command, _)| {
                    switchyard_coordinator::raft::types::Entry {
                        log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(TERM, 1), *index),
                        payload: openraft::EntryPayload::Normal(std::sync::Arc::new(command.clone())),
                    }
                });
                let responses = stores.state.apply(entries.collect::<Vec<_>>()).await.expect("apply");
                let expected: Vec<_> = chunk.iter().map(|(_, _, r)| r.clone()).collect();
                assert_eq!(responses, expected);
            }
            let applied = ReplicatedState::clone(&stores.state.subscribe().borrow());
            let liveness = stores.liveness.clone();
            drop(stores);
            switchyard_test_support::eventually_blocking(
                "the store closed",
                std::time::Duration::from_secs(10),
                || !liveness.is_open(),
            )
            .expect("store closes");
            let stores = switchyard_coordinator::raft::open(dir.path()).expect("reopen");
            let reopened = ReplicatedState::clone(&stores.state.subscribe().borrow());
            (applied, reopened)
        });
        prop_assert_eq!(&applied, &state);
        prop_assert_eq!(&reopened, &state);
    }
}
