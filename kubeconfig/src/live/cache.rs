//! One cluster's objects as its watchers report them, one [`KindCache`]
//! per kind.
//!
//! The watcher's `Init` … `InitApply`* … `InitDone` cycle means "replace
//! the set": objects are buffered from `Init` and swapped in whole at
//! `InitDone`, so a re-list (first start, or after `410 Gone`) never shows
//! a half-listed kind, and an object deleted while the watch was broken
//! disappears at the swap. Between cycles, `Apply` and `Delete` edit the
//! set in place.
//!
//! An object that fails translation keeps its last good version (a typo in
//! a live route must not delete the route from switchyard) and is reported
//! as rejected. Errors mark the kind unhealthy until its next event; the
//! objects stay as last seen (static stability: an unreachable cluster keeps
//! its endpoints). A custom kind whose list is answered `404` is not
//! installed in the cluster ([`Update::Absent`]): it counts as listed and
//! empty, so a cluster without the Gateway API CRDs still contributes its
//! endpoints.
//!
//! It deliberately does no IO: events come in as values, so every path is
//! unit-tested.

use super::kinds::Watched;
use crate::error::ParseError;
use std::collections::BTreeMap;
use std::time::Instant;
use switchyard_proto::model::{ObjectMeta, ObjectName, Resource};

/// A watched object, translated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Object {
    /// A kind of the model.
    Resource(Resource),
    /// A `ServiceExport`: only its metadata matters (which Service, since
    /// when).
    Export(ObjectMeta),
}

/// One object version as a watcher saw it, translated.
#[derive(Debug)]
pub(crate) struct Observed {
    /// Its namespace and name.
    pub(crate) name: ObjectName,
    /// Its `metadata.generation`.
    pub(crate) generation: Option<i64>,
    /// Its translation, or why it has none.
    pub(crate) result: Result<Object, ParseError>,
}

/// One watcher event, translated.
#[derive(Debug)]
pub(crate) enum Update {
    /// A (re-)list starts.
    Init,
    /// An object of the list.
    InitApply(Observed),
    /// The list is complete: replace the set.
    InitDone,
    /// The list was answered `404`: the kind's CRD is not installed, so
    /// the cluster has no such objects (the watcher keeps retrying, and an
    /// installed CRD is listed on a next attempt).
    Absent,
    /// An object was added or changed.
    Apply(Observed),
    /// An object was deleted.
    Delete(ObjectName),
    /// The watcher failed; it retries by itself.
    Error(WatchFailure),
}

/// A watcher error, as the cache keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchFailure {
    /// What went wrong.
    pub(crate) message: String,
    /// When it was seen.
    pub(crate) at: Instant,
    /// A refusal (401/403) rather than a failure to reach the cluster: a
    /// successful probe does not clear it, only a next event does.
    pub(crate) sticky: bool,
}

impl WatchFailure {
    /// A non-sticky failure seen now.
    #[cfg(test)]
    pub(crate) fn now(message: &str) -> WatchFailure {
        WatchFailure {
            message: message.to_string(),
            at: Instant::now(),
            sticky: false,
        }
    }
}

/// One object: its last good translation, and why its newest version was
/// rejected, if it was.
#[derive(Debug, Clone, Default)]
pub(crate) struct Entry {
    /// The newest version that translated.
    pub(crate) good: Option<Object>,
    /// Why the newest version did not, if it did not.
    pub(crate) rejected: Option<String>,
    /// The newest version's `metadata.generation` (status reports it).
    pub(crate) generation: Option<i64>,
}

impl Entry {
    fn next(previous: Option<&Entry>, observed: Observed) -> Entry {
        let generation = observed.generation;
        match observed.result {
            Ok(resource) => Entry {
                good: Some(resource),
                rejected: None,
                generation,
            },
            Err(e) => Entry {
                good: previous.and_then(|p| p.good.clone()),
                rejected: Some(e.to_string()),
                generation,
            },
        }
    }
}

/// The objects of one kind in one cluster.
#[derive(Debug, Default)]
pub(crate) struct KindCache {
    objects: BTreeMap<ObjectName, Entry>,
    /// `Some` during a list cycle.
    buffer: Option<BTreeMap<ObjectName, Entry>>,
    listed: bool,
    /// The last list was answered `404`.
    absent: bool,
    error: Option<WatchFailure>,
}

impl KindCache {
    /// Applies one event.
    pub(crate) fn update(&mut self, update: Update) {
        match update {
            Update::Init => self.buffer = Some(BTreeMap::new()),
            Update::InitApply(observed) => {
                self.error = None;
                let name = observed.name.clone();
                let Some(buffer) = self.buffer.as_mut() else {
                    // The watcher always sends Init first; if not, an
                    // in-place apply is the closest safe reading.
                    let entry = Entry::next(self.objects.get(&name), observed);
                    self.objects.insert(name, entry);
                    return;
                };
                let previous = buffer.get(&name).or_else(|| self.objects.get(&name));
                let entry = Entry::next(previous, observed);
                buffer.insert(name, entry);
            }
            Update::InitDone => {
                self.error = None;
                self.listed = true;
                self.absent = false;
                if let Some(buffer) = self.buffer.take() {
                    self.objects = buffer;
                }
            }
            Update::Absent => {
                self.error = None;
                self.listed = true;
                self.absent = true;
                self.buffer = None;
                self.objects.clear();
            }
            Update::Apply(observed) => {
                self.error = None;
                let name = observed.name.clone();
                let entry = Entry::next(self.objects.get(&name), observed);
                self.objects.insert(name, entry);
            }
            Update::Delete(name) => {
                self.error = None;
                self.objects.remove(&name);
            }
            Update::Error(failure) => self.error = Some(failure),
        }
    }

    /// Whether a first list has completed.
    pub(crate) fn listed(&self) -> bool {
        self.listed
    }

    /// Whether the kind is not installed in the cluster.
    pub(crate) fn absent(&self) -> bool {
        self.absent
    }

    /// The current error, if the watcher is failing.
    pub(crate) fn error(&self) -> Option<&str> {
        self.error.as_ref().map(|e| e.message.as_str())
    }

    /// The cluster answered a request sent at `started`: failures to reach
    /// it seen before then are over. (A watch that resumes without missing
    /// anything sends no event, so without this a recovered cluster would
    /// stay "unreachable" until its objects next change.)
    fn reached(&mut self, started: Instant) {
        if self
            .error
            .as_ref()
            .is_some_and(|e| !e.sticky && e.at <= started)
        {
            self.error = None;
        }
    }

    /// The current objects.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&ObjectName, &Entry)> {
        self.objects.iter()
    }
}

/// Every kind of one cluster.
#[derive(Debug)]
pub(crate) struct ClusterCache {
    /// The cluster's name.
    pub(crate) name: String,
    kinds: BTreeMap<Watched, KindCache>,
    /// The newest error of any kind, with the kind.
    last_error: Option<(Watched, String)>,
    /// Whether any watcher has failed since the cache was made.
    failed: bool,
}

impl ClusterCache {
    /// An empty cache for `kinds`.
    pub(crate) fn new(name: impl Into<String>, kinds: &[Watched]) -> ClusterCache {
        ClusterCache {
            name: name.into(),
            kinds: kinds.iter().map(|k| (*k, KindCache::default())).collect(),
            last_error: None,
            failed: false,
        }
    }

    /// Applies one event of `kind`.
    pub(crate) fn update(&mut self, kind: Watched, update: Update) {
        if let Update::Error(failure) = &update {
            self.last_error = Some((kind, failure.message.clone()));
            self.failed = true;
        }
        self.kinds.entry(kind).or_default().update(update);
        if self.reachable() {
            self.last_error = None;
        }
    }

    /// A probe sent at `started` got an answer (see [`KindCache::reached`]).
    pub(crate) fn reached(&mut self, started: Instant) {
        for kind in self.kinds.values_mut() {
            kind.reached(started);
        }
        if self.reachable() {
            self.last_error = None;
        }
    }

    /// Whether every kind has completed a first list.
    pub(crate) fn listed(&self) -> bool {
        self.kinds.values().all(KindCache::listed)
    }

    /// The watched kinds whose CRD the cluster does not have.
    pub(crate) fn absent_kinds(&self) -> Vec<String> {
        self.kinds
            .iter()
            .filter(|(_, c)| c.absent())
            .map(|(k, _)| k.to_string())
            .collect()
    }

    /// Whether the cluster has either listed every kind or failed to: its
    /// first answer (or error) is in, so waiting longer for it holds the
    /// other clusters back for nothing.
    pub(crate) fn settled(&self) -> bool {
        self.failed || self.listed()
    }

    /// Whether no watcher is currently failing.
    pub(crate) fn reachable(&self) -> bool {
        self.kinds.values().all(|k| k.error().is_none())
    }

    /// The newest error while unreachable, as `Kind: message`.
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error
            .as_ref()
            .map(|(kind, message)| format!("{kind}: {message}"))
    }

    /// Every object's entry, with its kind.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (Watched, &ObjectName, &Entry)> {
        self.kinds
            .iter()
            .flat_map(|(kind, cache)| cache.entries().map(move |(name, e)| (*kind, name, e)))
    }

    /// The good version of every object of a model kind.
    pub(crate) fn resources(&self) -> Vec<Resource> {
        self.entries()
            .filter_map(|(_, _, e)| match &e.good {
                Some(Object::Resource(r)) => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every `ServiceExport`'s metadata.
    pub(crate) fn exports(&self) -> Vec<ObjectMeta> {
        self.entries()
            .filter_map(|(_, _, e)| match &e.good {
                Some(Object::Export(meta)) => Some(meta.clone()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Location, Problem};
    use switchyard_proto::model::{Kind, Namespace};

    const NAMESPACE: Watched = Watched::Model(Kind::Namespace);
    const SERVICE: Watched = Watched::Model(Kind::Service);

    fn ns(name: &str, label: &str) -> Observed {
        let mut meta = ObjectMeta::named("", name);
        meta.labels.insert("v".into(), label.into());
        Observed {
            name: ObjectName::new("", name),
            generation: None,
            result: Ok(Object::Resource(Resource::Namespace(Namespace { meta }))),
        }
    }

    fn bad(name: &str) -> Observed {
        let e = ParseError::new(&Location::default(), Problem::missing("spec"));
        Observed {
            name: ObjectName::new("", name),
            generation: Some(9),
            result: Err(e),
        }
    }

    fn names(c: &KindCache) -> Vec<String> {
        c.entries().map(|(n, _)| n.name.clone()).collect()
    }

    fn label(c: &KindCache, name: &str) -> Option<String> {
        c.entries()
            .find(|(n, _)| n.name == name)
            .and_then(|(_, e)| match &e.good {
                Some(Object::Resource(r)) => Some(r.meta().labels["v"].clone()),
                _ => None,
            })
    }

    #[test]
    fn a_list_is_invisible_until_done_then_replaces_the_set() {
        let mut c = KindCache::default();
        c.update(Update::Init);
        c.update(Update::InitApply(ns("a", "1")));
        assert!(!c.listed());
        assert!(names(&c).is_empty());
        c.update(Update::InitDone);
        assert!(c.listed());
        assert_eq!(names(&c), ["a"]);
        c.update(Update::Apply(ns("b", "1")));
        // A re-list (after 410 Gone) that no longer has "a": "a" goes at
        // InitDone, not before.
        c.update(Update::Init);
        c.update(Update::InitApply(ns("b", "2")));
        assert_eq!(names(&c), ["a", "b"]);
        assert_eq!(label(&c, "b").as_deref(), Some("1"));
        c.update(Update::InitDone);
        assert_eq!(names(&c), ["b"]);
        assert_eq!(label(&c, "b").as_deref(), Some("2"));
    }

    #[test]
    fn deletes_remove_and_errors_keep_objects() {
        let mut c = KindCache::default();
        c.update(Update::Init);
        for name in ["a", "b"] {
            c.update(Update::InitApply(ns(name, "1")));
        }
        c.update(Update::InitDone);
        c.update(Update::Delete(ObjectName::new("", "a")));
        c.update(Update::Error(WatchFailure::now("connection refused")));
        assert_eq!(names(&c), ["b"]);
        assert_eq!(c.error(), Some("connection refused"));
        c.update(Update::Apply(ns("b", "2")));
        assert_eq!(c.error(), None);
    }

    #[test]
    fn a_rejected_version_keeps_the_last_good_one_even_across_a_relist() {
        let mut c = KindCache::default();
        c.update(Update::Init);
        c.update(Update::InitApply(ns("a", "1")));
        c.update(Update::InitDone);
        c.update(Update::Apply(bad("a")));
        assert_eq!(label(&c, "a").as_deref(), Some("1"));
        c.update(Update::Init);
        c.update(Update::InitApply(bad("a")));
        c.update(Update::InitDone);
        let (_, e) = c.entries().next().unwrap();
        assert_eq!(label(&c, "a").as_deref(), Some("1"));
        assert!(e.rejected.as_deref().unwrap().contains("spec is required"));
        // Never good at all: listed as rejected, contributes nothing.
        c.update(Update::Apply(bad("z")));
        assert!(c.entries().any(|(n, e)| n.name == "z" && e.good.is_none()));
    }

    #[test]
    fn a_cluster_is_listed_when_every_kind_is_and_reachable_when_none_fails() {
        let mut c = ClusterCache::new("east", &[NAMESPACE, SERVICE]);
        c.update(NAMESPACE, Update::Init);
        c.update(NAMESPACE, Update::InitDone);
        assert!(!c.listed());
        c.update(SERVICE, Update::Init);
        c.update(SERVICE, Update::InitDone);
        assert!(c.listed());
        c.update(SERVICE, Update::Error(WatchFailure::now("503")));
        assert!(!c.reachable());
        assert_eq!(c.last_error().as_deref(), Some("Service: 503"));
        c.update(SERVICE, Update::Init);
        assert!(!c.reachable(), "Init is sent before the list call");
        c.update(SERVICE, Update::InitDone);
        assert!(c.reachable());
        assert_eq!(c.last_error(), None);
    }

    #[test]
    fn a_probe_answered_after_a_failure_clears_it_but_not_a_refusal() {
        let mut c = ClusterCache::new("east", &[NAMESPACE, SERVICE]);
        let before = Instant::now();
        c.update(
            NAMESPACE,
            Update::Error(WatchFailure::now("connection refused")),
        );
        // A probe sent before the failure proves nothing.
        c.reached(before);
        assert!(!c.reachable());
        c.reached(Instant::now());
        assert!(c.reachable());
        assert_eq!(c.last_error(), None);
        c.update(
            SERVICE,
            Update::Error(WatchFailure {
                sticky: true,
                ..WatchFailure::now("403 forbidden")
            }),
        );
        c.reached(Instant::now());
        assert!(!c.reachable(), "a refusal needs a real event to clear");
    }

    #[test]
    fn a_kind_answered_404_is_listed_empty_until_a_list_succeeds() {
        let mut c = ClusterCache::new("east", &[NAMESPACE, SERVICE]);
        c.update(NAMESPACE, Update::Init);
        c.update(NAMESPACE, Update::InitApply(ns("a", "1")));
        c.update(NAMESPACE, Update::InitDone);
        c.update(SERVICE, Update::Absent);
        assert!(c.listed() && c.reachable());
        assert_eq!(c.absent_kinds(), ["Service"]);
        // The CRD removed later: its objects go with it.
        c.update(NAMESPACE, Update::Absent);
        assert!(c.resources().is_empty());
        c.update(SERVICE, Update::Init);
        c.update(SERVICE, Update::InitDone);
        assert_eq!(c.absent_kinds(), ["Namespace"]);
    }
}
