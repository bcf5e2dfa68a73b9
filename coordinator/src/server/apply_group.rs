//! Group commit of applies: one task per coordinator proposes the applies
//! its clients send, and every apply that arrives while a group is being
//! committed waits to go in the next group, one Raft entry
//! (`Command::Applies`) for all of them. Under one client nothing
//! changes: an apply that finds no group in flight is proposed at once,
//! alone, as the command it always was. Under many, the cost that follows
//! each entry — the Raft append and replication, the state machine's
//! change, the journal's delta, one change sent to every proxy and every
//! proxy's report back — is paid once per group rather than once per
//! client.
//!
//! Owns: the queue, which waiting applies go together ([`take_group`]),
//! and handing each caller its own answer. Does not own: the commits an
//! apply carries (`apply_commits`, the engine), nor the rule that no two
//! applies of one entry name the same object (the state machine refuses
//! such an entry; this module never builds one).
//!
//! Order: a client's apply waits behind every earlier apply that names
//! one of its objects, so applies of one object commit in the order they
//! arrived; applies of different objects may overtake one another only
//! when they share no object with anything they overtake.

use super::Coordinator;
use crate::cutover::Decision;
use crate::raft::ProposeError;
use crate::state::{Command, CommandError, CommandResponse, Outcome};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use switchyard_proto::model::ResourceKey;
use tokio::sync::{mpsc, oneshot};

/// Most applies one entry carries.
pub(crate) const MAX_APPLIES_PER_ENTRY: usize = 64;

/// An apply waiting for its group, and where its answer goes.
pub(super) struct QueuedApply {
    /// The `Command::Apply`.
    pub apply: Command,
    /// When this coordinator received it, by its own clock.
    pub received_ms: u64,
    /// The caller, waiting for its answer.
    pub reply: oneshot::Sender<Result<CommandResponse, ProposeError>>,
}

impl QueuedApply {
    fn resources(&self) -> &[switchyard_proto::model::Resource] {
        self.apply.apply_resources().unwrap_or_default()
    }

    /// The objects the apply names.
    fn keys(&self) -> impl Iterator<Item = ResourceKey> + '_ {
        self.resources().iter().map(|r| r.key())
    }

    fn objects(&self) -> usize {
        self.resources().len()
    }
}

/// Where callers queue their applies: the sending side, held by the
/// coordinator; [`run`] holds the other.
pub(super) type ApplyQueue = mpsc::UnboundedSender<QueuedApply>;

/// Proposes the queued applies, one group at a time, until the queue
/// closes (or the task is aborted at shutdown; callers whose group was in
/// flight then get an error). `max_objects` bounds a group's objects in
/// all (the coordinator's objects per apply), so an entry is never larger
/// than the largest single apply could make it.
pub(super) async fn run(
    coordinator: Arc<Coordinator>,
    mut queue: mpsc::UnboundedReceiver<QueuedApply>,
    max_objects: usize,
) {
    let mut waiting = VecDeque::new();
    loop {
        if waiting.is_empty() {
            match queue.recv().await {
                Some(apply) => waiting.push_back(apply),
                None => return,
            }
        }
        while let Ok(apply) = queue.try_recv() {
            waiting.push_back(apply);
        }
        let group = take_group(&mut waiting, max_objects);
        coordinator.propose_group(group).await;
    }
}

/// Takes the next group from `waiting`: the first apply, then each
/// later one that names no object named by an apply before it that is
/// still waiting or taken, while the group stays within
/// [`MAX_APPLIES_PER_ENTRY`] applies and `max_objects` objects (the first
/// apply is taken whatever its size). What is not taken keeps its order.
///
/// The scan stops once the group is full or [`MAX_APPLIES_PER_ENTRY`]
/// applies were passed over: a long queue (a burst of bulk applies) then
/// costs O(that bound × objects per apply) per group, not O(queue) — a
/// thousand waiting applies would otherwise be walked for every group.
pub(super) fn take_group(
    waiting: &mut VecDeque<QueuedApply>,
    max_objects: usize,
) -> Vec<QueuedApply> {
    let mut group = Vec::new();
    let mut objects = 0;
    // Objects named by applies taken or passed over: a later apply naming
    // one of them must not overtake.
    let mut named: BTreeSet<ResourceKey> = BTreeSet::new();
    let mut passed_over = VecDeque::new();
    while let Some(apply) = waiting.pop_front() {
        let fits = group.is_empty()
            || (group.len() < MAX_APPLIES_PER_ENTRY && objects + apply.objects() <= max_objects);
        let free = fits && apply.keys().all(|key| !named.contains(&key));
        named.extend(apply.keys());
        if free {
            objects += apply.objects();
            group.push(apply);
        } else {
            passed_over.push_back(apply);
        }
        if group.len() == MAX_APPLIES_PER_ENTRY
            || objects >= max_objects
            || passed_over.len() >= MAX_APPLIES_PER_ENTRY
        {
            break;
        }
    }
    passed_over.append(waiting);
    *waiting = passed_over;
    group
}

impl Coordinator {
    /// Proposes `group` as one entry — the apply alone when it is one, a
    /// `Command::Applies` otherwise — each with the commits the fleet is
    /// already ready for, and sends each caller its own answer.
    pub(super) async fn propose_group(&self, group: Vec<QueuedApply>) {
        let (applies, callers): (Vec<Command>, Vec<_>) = group
            .into_iter()
            .map(|q| (q.apply, (q.received_ms, q.reply)))
            .unzip();
        let commits = self.commits_with_applies(&applies, super::now_ms());
        let mut commands: Vec<Command> = applies
            .into_iter()
            .zip(&commits)
            .map(|(apply, commits)| Decision::with_apply(apply, commits))
            .collect();
        self.metrics
            .applies_per_entry
            .observe(commands.len() as f64);
        let answers = if commands.len() == 1 {
            let command = commands.pop().expect("one command");
            vec![self.node.propose(command).await]
        } else {
            let count = commands.len();
            let entry = self
                .node
                .propose(Command::Applies { applies: commands })
                .await;
            answers_of(entry, count, self.node.id())
        };
        for ((answer, commits), (received_ms, reply)) in
            answers.into_iter().zip(&commits).zip(callers)
        {
            if let Ok(response) = &answer {
                self.count_refusal(response);
                if let Ok(outcome) = &response.0 {
                    self.carried_with_apply(commits, outcome, received_ms);
                }
            }
            // The caller may have gone; its apply stands either way.
            let _ = reply.send(answer);
        }
        self.changed();
    }
}

/// Each apply's answer from the answer to the entry that carried `count`
/// of them: its own from the outcome's `decisions`, or the entry's
/// refusal or failure, which is every apply's.
fn answers_of(
    entry: Result<CommandResponse, ProposeError>,
    count: usize,
    node_id: u64,
) -> Vec<Result<CommandResponse, ProposeError>> {
    match entry {
        Ok(CommandResponse(Ok(Outcome { decisions, .. }))) if decisions.len() == count => decisions
            .into_iter()
            .map(|answer| Ok(CommandResponse(answer)))
            .collect(),
        Ok(CommandResponse(Ok(outcome))) => {
            let reason = format!(
                "the entry of {count} applies was answered for {}",
                outcome.decisions.len()
            );
            vec![Err(ProposeError::Fatal { node_id, reason }); count]
        }
        Ok(CommandResponse(Err(refused))) => {
            vec![Ok(CommandResponse(Err::<Outcome, CommandError>(refused))); count]
        }
        Err(failed) => vec![Err(failed); count],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_proto::model::{ObjectMeta, Resource, Service};

    fn service(name: &str) -> Resource {
        Resource::Service(Service {
            meta: ObjectMeta::named("default", name),
            ports: vec![],
        })
    }

    /// An apply of Services named `names`, labelled `label` (its
    /// `received_ms`) so a test can tell the applies apart.
    fn queued(label: u64, names: &[&str]) -> QueuedApply {
        QueuedApply {
            apply: Command::Apply {
                resources: names.iter().map(|n| service(n)).collect(),
                defaults: Default::default(),
                limits: None,
                validation: None,
            },
            received_ms: label,
            reply: oneshot::channel().0,
        }
    }

    fn labels<'a>(applies: impl IntoIterator<Item = &'a QueuedApply>) -> Vec<u64> {
        applies.into_iter().map(|q| q.received_ms).collect()
    }

    #[test]
    fn applies_of_different_objects_go_together_and_an_object_named_again_waits() {
        let mut waiting: VecDeque<_> = [
            queued(1, &["a"]),
            queued(2, &["b"]),
            queued(3, &["a"]),
            queued(4, &["c"]),
        ]
        .into();
        let group = take_group(&mut waiting, 1000);
        assert_eq!(labels(&group), [1, 2, 4]);
        assert_eq!(labels(&waiting), [3]);
    }

    #[test]
    fn an_apply_never_overtakes_a_waiting_one_that_shares_an_object_with_it() {
        // 2 waits behind 1 (both name `a`); 3 names `b`, which 2 names:
        // taken now, it would commit before 2 although it came after.
        let mut waiting: VecDeque<_> = [
            queued(1, &["a"]),
            queued(2, &["a", "b"]),
            queued(3, &["b"]),
            queued(4, &["d"]),
        ]
        .into();
        let group = take_group(&mut waiting, 1000);
        assert_eq!(labels(&group), [1, 4]);
        assert_eq!(labels(&waiting), [2, 3], "their order kept");
        let group = take_group(&mut waiting, 1000);
        assert_eq!(labels(&group), [2]);
        assert_eq!(labels(&take_group(&mut waiting, 1000)), [3]);
    }

    #[test]
    fn a_group_stays_within_the_objects_and_applies_bounds_but_takes_its_first_whatever_its_size() {
        let mut waiting: VecDeque<_> = [queued(1, &["a", "b", "c"]), queued(2, &["d"])].into();
        assert_eq!(
            labels(&take_group(&mut waiting, 2)),
            [1],
            "alone: over the bound"
        );
        assert_eq!(labels(&take_group(&mut waiting, 2)), [2]);

        let mut waiting: VecDeque<_> = (0..MAX_APPLIES_PER_ENTRY as u64 + 3)
            .map(|i| queued(i, &[&format!("s{i}")]))
            .collect();
        let group = take_group(&mut waiting, 10_000);
        assert_eq!(group.len(), MAX_APPLIES_PER_ENTRY);
        assert_eq!(labels(&waiting), [64, 65, 66]);
    }

    #[test]
    fn a_group_stops_looking_once_full_or_after_passing_over_as_many_as_it_may_hold() {
        // Full by objects: the rest is not walked (their order kept).
        let mut waiting: VecDeque<_> =
            [queued(1, &["a", "b"]), queued(2, &["c"]), queued(3, &["d"])].into();
        assert_eq!(labels(&take_group(&mut waiting, 2)), [1]);
        assert_eq!(labels(&waiting), [2, 3]);

        // MAX_APPLIES_PER_ENTRY applies passed over (all naming `a`, as
        // the first does): the free one after them waits for a later group.
        let mut waiting: VecDeque<_> = std::iter::once(queued(0, &["a"]))
            .chain((1..=MAX_APPLIES_PER_ENTRY as u64).map(|i| queued(i, &["a"])))
            .chain(std::iter::once(queued(999, &["z"])))
            .collect();
        assert_eq!(labels(&take_group(&mut waiting, 10_000)), [0]);
        assert_eq!(waiting.len(), MAX_APPLIES_PER_ENTRY + 1);
        assert_eq!(waiting.back().map(|q| q.received_ms), Some(999));
    }

    #[test]
    fn each_apply_gets_its_own_answer_or_the_entry_s_refusal() {
        let a = Outcome {
            index: 9,
            ..Default::default()
        };
        let entry = Outcome {
            index: 9,
            decisions: vec![Ok(a.clone()), Err(CommandError::Empty)],
            ..Default::default()
        };
        let answers = answers_of(Ok(CommandResponse(Ok(entry))), 2, 1);
        assert_eq!(answers[0], Ok(CommandResponse(Ok(a))));
        assert_eq!(answers[1], Ok(CommandResponse(Err(CommandError::Empty))));

        let refused = answers_of(Ok(CommandResponse(Err(CommandError::Empty))), 2, 1);
        assert_eq!(
            refused,
            vec![Ok(CommandResponse(Err(CommandError::Empty))); 2]
        );

        let short = answers_of(Ok(CommandResponse(Ok(Outcome::default()))), 2, 1);
        assert!(
            short
                .iter()
                .all(|a| matches!(a, Err(ProposeError::Fatal { .. })))
        );
    }
}
