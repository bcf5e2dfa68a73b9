//! The replicated state kept per object in sled tree `sm`: one key per
//! stored resource, route record, registered proxy and endpoint generation,
//! plus the state's log position.
//!
//! Owns: the object keys and values, writing the keys an apply touched
//! into a batch, writing (replacing) the whole state into a batch (a
//! snapshot install, a migration), and rebuilding the state from the tree.
//! Does not own: when those batches are applied or flushed, the applied log
//! id and membership next to them, or snapshots — [`super::state_store`]
//! does that, and keeps every batch atomic.
//!
//! Why one tree with prefixed keys and not one tree per kind: a sled
//! `Batch` on one tree is applied atomically and crash-consistently without
//! the bookkeeping (and in-memory write sets) of sled's multi-tree
//! transactions, and the applied log id must change in the same atomic step
//! as the objects. The prefixes keep kinds apart and a prefix scan reads
//! one kind or all objects.
//!
//! Keys are `o/<kind>/` followed by the JSON of the object's key: unique and
//! deterministic whatever characters a name holds (proxy ids may contain
//! `/`), and never equal to the tree's fixed keys (`applied`, ...).

// `StorageError` is openraft's type, fixed by the storage traits.
#![allow(clippy::result_large_err)]

use openraft::{ErrorSubject, ErrorVerb};
use serde::Serialize;
use switchyard_proto::model::{ObjectName, Resource, ResourceKey, RouteRecord};

use super::db::{io_error, to_json};
use super::types::StorageError;
use crate::state::touched::Touched;
use crate::state::{LogPosition, ProxyRecord, ReplicatedState};

/// Prefix of every object key.
const OBJECTS: &[u8] = b"o/";
const RESOURCE: &[u8] = b"o/resource/";
const ROUTE: &[u8] = b"o/route/";
const PROXY: &[u8] = b"o/proxy/";
const ENDPOINTS: &[u8] = b"o/endpoints/";
/// The state's own log position (`last_index`, `last_term`).
pub(crate) const KEY_POSITION: &[u8] = b"position";

/// What one batch holds: object keys written (inserted or removed) and the
/// bytes of their keys and values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchSize {
    /// Object keys inserted or removed.
    pub keys: u64,
    /// Bytes of those keys and values.
    pub bytes: u64,
}

/// Builds one batch of object writes, counting them.
#[derive(Default)]
pub(crate) struct ObjectBatch {
    pub(crate) batch: sled::Batch,
    pub(crate) size: BatchSize,
}

impl ObjectBatch {
    fn put<T: Serialize>(&mut self, key: Vec<u8>, value: Option<&T>) -> Result<(), StorageError> {
        self.size.keys += 1;
        self.size.bytes += key.len() as u64;
        match value {
            Some(value) => {
                let json = to_json(value, ErrorSubject::StateMachine)?;
                self.size.bytes += json.len() as u64;
                self.batch.insert(key, json);
            }
            None => self.batch.remove(key),
        }
        Ok(())
    }

    /// Adds a fixed (non-object) key, counted in bytes only.
    pub(crate) fn meta(&mut self, key: &[u8], value: Vec<u8>) {
        self.size.bytes += (key.len() + value.len()) as u64;
        self.batch.insert(key, value);
    }

    /// Writes the current value of every key in `touched` (removing the
    /// keys the state no longer holds), and the state's position.
    pub(crate) fn touched(
        &mut self,
        state: &ReplicatedState,
        touched: &Touched,
    ) -> Result<(), StorageError> {
        for key in &touched.resources {
            self.put(resource_key(key)?, state.resources.get(key))?;
        }
        for name in &touched.routes {
            self.put(route_key(name)?, state.routes.get(name))?;
        }
        for id in &touched.proxies {
            self.put(proxy_key(id)?, state.proxies.get(id))?;
        }
        for service in &touched.endpoint_generations {
            let generation = state.endpoint_generations.0.get(service);
            self.put(
                endpoints_key(service)?,
                generation.map(|g| (service, *g)).as_ref(),
            )?;
        }
        self.position(state)
    }

    /// Replaces every object in `tree` by the objects of `state`: removes
    /// each stored object key, then writes them all (a later insert of the
    /// same key in a batch wins over the removal).
    pub(crate) fn whole(
        &mut self,
        tree: &sled::Tree,
        state: &ReplicatedState,
    ) -> Result<(), StorageError> {
        for key in tree.scan_prefix(OBJECTS).keys() {
            let key = key.map_err(|e| io_error(ErrorSubject::StateMachine, ErrorVerb::Read, e))?;
            self.batch.remove(key);
        }
        for (key, resource) in &state.resources {
            self.put(resource_key(key)?, Some(resource))?;
        }
        for (name, record) in &state.routes {
            self.put(route_key(name)?, Some(record))?;
        }
        for (id, proxy) in &state.proxies {
            self.put(proxy_key(id)?, Some(proxy))?;
        }
        for (service, generation) in &state.endpoint_generations.0 {
            self.put(endpoints_key(service)?, Some(&(service, *generation)))?;
        }
        self.position(state)
    }

    fn position(&mut self, state: &ReplicatedState) -> Result<(), StorageError> {
        let position = LogPosition::new(state.last_index, state.last_term);
        let json = to_json(&position, ErrorSubject::StateMachine)?;
        self.meta(KEY_POSITION, json);
        Ok(())
    }
}

/// Rebuilds the state from the objects and position in `tree`. `None` when
/// the tree holds no position (nothing was ever written in this format).
pub(crate) fn load(tree: &sled::Tree) -> Result<Option<ReplicatedState>, StorageError> {
    let read_err = |e: &dyn std::fmt::Display| {
        io_error(ErrorSubject::StateMachine, ErrorVerb::Read, e.to_string())
    };
    let Some(position) = tree.get(KEY_POSITION).map_err(|e| read_err(&e))? else {
        return Ok(None);
    };
    let position: LogPosition = serde_json::from_slice(&position).map_err(|e| read_err(&e))?;
    let mut state = ReplicatedState {
        last_index: position.index,
        last_term: position.term,
        ..Default::default()
    };
    for item in tree.scan_prefix(OBJECTS) {
        let (key, value) = item.map_err(|e| read_err(&e))?;
        let decode_err = |e: serde_json::Error| {
            read_err(&format!("object {}: {e}", String::from_utf8_lossy(&key)))
        };
        if key.starts_with(RESOURCE) {
            let resource: Resource = serde_json::from_slice(&value).map_err(decode_err)?;
            state.resources.insert(resource.key(), resource);
        } else if key.starts_with(ROUTE) {
            let record: RouteRecord = serde_json::from_slice(&value).map_err(decode_err)?;
            state
                .routes
                .insert(record.name.clone(), std::sync::Arc::new(record));
        } else if key.starts_with(PROXY) {
            let proxy: ProxyRecord = serde_json::from_slice(&value).map_err(decode_err)?;
            state.proxies.insert(proxy.id.clone(), proxy);
        } else if key.starts_with(ENDPOINTS) {
            let (service, generation): (ObjectName, u64) =
                serde_json::from_slice(&value).map_err(decode_err)?;
            state.endpoint_generations.0.insert(service, generation);
        } else {
            return Err(read_err(&format!(
                "unknown object key {}",
                String::from_utf8_lossy(&key)
            )));
        }
    }
    Ok(Some(state))
}

fn keyed<T: Serialize>(prefix: &[u8], id: &T) -> Result<Vec<u8>, StorageError> {
    let mut key = prefix.to_vec();
    key.extend(to_json(id, ErrorSubject::StateMachine)?);
    Ok(key)
}

fn resource_key(key: &ResourceKey) -> Result<Vec<u8>, StorageError> {
    keyed(RESOURCE, key)
}

fn route_key(name: &ObjectName) -> Result<Vec<u8>, StorageError> {
    keyed(ROUTE, name)
}

fn proxy_key(id: &str) -> Result<Vec<u8>, StorageError> {
    keyed(PROXY, &id)
}

fn endpoints_key(service: &ObjectName) -> Result<Vec<u8>, StorageError> {
    keyed(ENDPOINTS, service)
}
