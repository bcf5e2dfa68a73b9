//! Server-side apply of a `status` subresource, as the API server does it
//! for the Gateway API CRDs, so status writers are tested against merge
//! semantics and not against a store that replaces `status` whole.
//!
//! Owns: the list types of the status fields (from the CRDs'
//! `x-kubernetes-list-type` markers: `conditions` a map keyed by `type`,
//! Gateway `listeners` a map keyed by `name`, GatewayClass
//! `supportedFeatures` a map keyed by `name`, everything else — HTTPRoute
//! `parents` included — atomic); field ownership per field manager;
//! conflicts between managers (`409` without `force`, ownership moved with
//! it); and removal of the fields a manager applied before and no longer
//! applies, unless another manager still owns them.
//!
//! Does not own: the resourceVersion precondition and injected conflicts
//! (the handler checks those first), schema validation or pruning, or
//! `Update` (non-apply) writes: [`super::FakeApiServer::apply`] stores an
//! object as given and leaves ownership alone, which is how a test plays
//! a writer that ignores field management.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// One step of a field path: an object field, or the entry of a
/// map-typed list with these key values (canonical JSON).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Step {
    Field(String),
    Entry(String),
}

type Path = Vec<Step>;

/// Which fields of one object each manager owns (status only).
#[derive(Debug, Default, Clone)]
pub(super) struct Ownership(BTreeMap<String, BTreeSet<Path>>);

/// A refused apply: the fields another manager owns with other values.
#[derive(Debug)]
pub(super) struct Conflicts(pub(super) Vec<(String, String)>);

impl Conflicts {
    /// The API server's message shape.
    pub(super) fn message(&self) -> String {
        let each: Vec<String> = self
            .0
            .iter()
            .map(|(manager, path)| format!("conflict with \"{manager}\": {path}"))
            .collect();
        format!(
            "Apply failed with {} conflict(s): {}",
            self.0.len(),
            each.join(", ")
        )
    }
}

/// The list keys of the list at `fields` (object field names from the
/// root, list entries left out); `None` for an atomic list.
fn list_keys(fields: &[&str]) -> Option<&'static [&'static str]> {
    match fields {
        ["status", "conditions"] | ["status", "listeners", "conditions"] => Some(&["type"]),
        ["status", "listeners"] | ["status", "supportedFeatures"] => Some(&["name"]),
        _ => None,
    }
}

fn field_names(path: &[Step]) -> Vec<&str> {
    path.iter()
        .filter_map(|s| match s {
            Step::Field(f) => Some(f.as_str()),
            Step::Entry(_) => None,
        })
        .collect()
}

fn entry_key(item: &Value, keys: &[&str]) -> String {
    let key: Map<String, Value> = keys
        .iter()
        .map(|k| (k.to_string(), item.get(*k).cloned().unwrap_or(Value::Null)))
        .collect();
    Value::Object(key).to_string()
}

/// Every owned path of `value` at `path`: scalars and atomic lists as
/// leaves, map-list entries as an entry path plus their fields.
fn leaves(value: &Value, path: &mut Path, out: &mut BTreeMap<Path, Option<Value>>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                path.push(Step::Field(k.clone()));
                leaves(v, path, out);
                path.pop();
            }
        }
        Value::Array(items) => match list_keys(&field_names(path)) {
            Some(keys) => {
                for item in items {
                    path.push(Step::Entry(entry_key(item, keys)));
                    out.insert(path.clone(), None);
                    leaves(item, path, out);
                    path.pop();
                }
            }
            None => {
                out.insert(path.clone(), Some(value.clone()));
            }
        },
        _ => {
            out.insert(path.clone(), Some(value.clone()));
        }
    }
}

/// The value at `path` in `root`, if any.
fn lookup<'a>(root: &'a Value, path: &[Step]) -> Option<&'a Value> {
    let mut at = root;
    for (i, step) in path.iter().enumerate() {
        at = match step {
            Step::Field(f) => at.get(f)?,
            Step::Entry(key) => {
                let keys = list_keys(&field_names(&path[..i]))?;
                at.as_array()?
                    .iter()
                    .find(|item| entry_key(item, keys) == *key)?
            }
        };
    }
    Some(at)
}

/// Removes the field or list entry at `path` from `root`.
fn remove(root: &mut Value, path: &[Step]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut at = root;
    for (i, step) in parent_path.iter().enumerate() {
        let next = match step {
            Step::Field(f) => at.get_mut(f),
            Step::Entry(key) => {
                let Some(keys) = list_keys(&field_names(&parent_path[..i])) else {
                    return;
                };
                at.as_array_mut()
                    .and_then(|items| items.iter_mut().find(|item| entry_key(item, keys) == *key))
            }
        };
        let Some(next) = next else { return };
        at = next;
    }
    match last {
        Step::Field(f) => {
            if let Some(map) = at.as_object_mut() {
                map.remove(f);
            }
        }
        Step::Entry(key) => {
            if let Some(keys) = list_keys(&field_names(parent_path))
                && let Some(items) = at.as_array_mut()
            {
                items.retain(|item| entry_key(item, keys) != *key);
            }
        }
    }
}

/// Merges `applied` into `current` at `path`: objects field by field,
/// map-lists entry by entry, atomic lists and scalars replaced.
fn merge(current: &mut Value, applied: &Value, path: &mut Path) {
    if let (Some(target), Value::Object(source)) = (current.as_object_mut(), applied) {
        for (k, v) in source {
            path.push(Step::Field(k.clone()));
            match target.get_mut(k) {
                Some(existing) => merge(existing, v, path),
                None => {
                    target.insert(k.clone(), v.clone());
                }
            }
            path.pop();
        }
        return;
    }
    if let (Some(keys), Some(target), Value::Array(source)) = (
        list_keys(&field_names(path)),
        current.as_array_mut(),
        applied,
    ) {
        for item in source {
            let key = entry_key(item, keys);
            path.push(Step::Entry(key.clone()));
            match target.iter_mut().find(|t| entry_key(t, keys) == key) {
                Some(existing) => merge(existing, item, path),
                None => target.push(item.clone()),
            }
            path.pop();
        }
        return;
    }
    *current = applied.clone();
}

fn render(path: &[Step]) -> String {
    path.iter()
        .map(|s| match s {
            Step::Field(f) => format!(".{f}"),
            Step::Entry(k) => format!("[{k}]"),
        })
        .collect()
}

impl Ownership {
    /// Applies `status` to `object` as `manager`. Without `force`, a field
    /// another manager owns with a different value refuses the whole
    /// apply; with it, the field changes hands.
    pub(super) fn apply_status(
        &mut self,
        object: &mut Value,
        manager: &str,
        status: &Value,
        force: bool,
    ) -> Result<(), Conflicts> {
        let applied_root = serde_json::json!({ "status": status });
        let mut applied = BTreeMap::new();
        leaves(&applied_root, &mut Vec::new(), &mut applied);
        let mut conflicts = Vec::new();
        // Entry markers (`None`) never conflict: entries are shared, their
        // fields are what managers fight over.
        let values: Vec<(&Path, &Value)> = applied
            .iter()
            .filter_map(|(p, v)| v.as_ref().map(|v| (p, v)))
            .collect();
        for (path, value) in &values {
            let current = lookup(object, path);
            for (other, owned) in &self.0 {
                if other != manager && owned.contains(*path) && current != Some(*value) {
                    conflicts.push((other.clone(), render(path)));
                }
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(Conflicts(conflicts));
        }
        if force {
            for (other, owned) in self.0.iter_mut() {
                if other != manager {
                    for (path, value) in &values {
                        if lookup(object, path) != Some(*value) {
                            owned.remove(*path);
                        }
                    }
                }
            }
        }
        let previous = self.0.remove(manager).unwrap_or_default();
        // Fields this manager no longer applies go, unless another manager
        // still owns them or something beneath them. Shallowest first: a
        // removed entry takes its fields with it (removing an entry's key
        // field first would leave it unfindable).
        let mut dropped: Vec<&Path> = previous
            .iter()
            .filter(|p| !applied.contains_key(*p))
            .collect();
        dropped.sort_by_key(|p| p.len());
        let mut removed: Vec<&Path> = Vec::new();
        for path in dropped {
            if removed.iter().any(|r| path.starts_with(r)) {
                continue;
            }
            let shared = self
                .0
                .values()
                .any(|owned| owned.iter().any(|o| o.starts_with(path)));
            if !shared {
                remove(object, path);
                removed.push(path);
            }
        }
        if object.get("status").is_none_or(|s| !s.is_object()) {
            object["status"] = Value::Object(Map::new());
        }
        merge(
            &mut object["status"],
            status,
            &mut vec![Step::Field("status".into())],
        );
        self.0
            .insert(manager.to_string(), applied.into_keys().collect());
        Ok(())
    }

    /// The managers owning the field at `dotted` (`status.parents`,
    /// `status.conditions[type=Accepted].status` style is not parsed:
    /// give object fields only, e.g. `status.parents`).
    pub(super) fn owners(&self, dotted: &str) -> Vec<String> {
        let path: Path = dotted
            .split('.')
            .map(|f| Step::Field(f.to_string()))
            .collect();
        self.0
            .iter()
            .filter(|(_, owned)| owned.iter().any(|p| p.starts_with(&path)))
            .map(|(m, _)| m.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn condition(t: &str, s: &str) -> Value {
        json!({"type": t, "status": s, "reason": t, "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"})
    }

    #[test]
    fn conditions_merge_by_type_and_a_managers_dropped_entry_goes() {
        let mut o = Ownership::default();
        let mut object = json!({"metadata": {"name": "gw"}});
        let a =
            json!({"conditions": [condition("Accepted", "True"), condition("Programmed", "True")]});
        o.apply_status(&mut object, "us", &a, true).unwrap();
        let b = json!({"conditions": [condition("example.com/Audited", "True")]});
        o.apply_status(&mut object, "auditor", &b, false).unwrap();
        assert_eq!(object["status"]["conditions"].as_array().unwrap().len(), 3);
        // We stop applying Programmed: it goes; the auditor's stays.
        let c = json!({"conditions": [condition("Accepted", "False")]});
        o.apply_status(&mut object, "us", &c, true).unwrap();
        let types: Vec<&str> = object["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["Accepted", "example.com/Audited"]);
        assert_eq!(object["status"]["conditions"][0]["status"], "False");
    }

    #[test]
    fn an_atomic_list_belongs_to_its_last_forced_applier() {
        let mut o = Ownership::default();
        let mut object = json!({"metadata": {"name": "r"}});
        let ours = json!({"parents": [{"controllerName": "us", "parentRef": {"name": "gw"}}]});
        o.apply_status(&mut object, "us", &ours, true).unwrap();
        let theirs = json!({"parents": [{"controllerName": "them", "parentRef": {"name": "x"}}]});
        let refused = o
            .apply_status(&mut object, "them", &theirs, false)
            .unwrap_err();
        assert!(
            refused
                .message()
                .contains("conflict with \"us\": .status.parents")
        );
        o.apply_status(&mut object, "them", &theirs, true).unwrap();
        assert_eq!(object["status"]["parents"], theirs["parents"]);
        assert_eq!(o.owners("status.parents"), ["them"]);
    }
}
