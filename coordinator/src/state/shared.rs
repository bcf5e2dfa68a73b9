//! Serde for the replicated state's persistent maps whose keys are structs:
//! a list of `[key, value]` pairs, byte for byte what
//! `switchyard_proto::model::pairs` writes for a `BTreeMap` (JSON object
//! keys must be strings), so snapshots and stored states written before the
//! maps became persistent read back unchanged, and the other way round.
//!
//! Owns that encoding and [`Generations`], the endpoint generations as a
//! shared map. The maps themselves are `imbl::OrdMap` (see
//! [`super::ReplicatedState`] for why).

pub(crate) mod pairs {
    use imbl::OrdMap;
    use serde::de::{Deserialize, Deserializer};
    use serde::ser::{Serialize, Serializer};

    /// Serializes a map as a sequence of pairs, in key order.
    pub(crate) fn serialize<K, V, S>(map: &OrdMap<K, V>, serializer: S) -> Result<S::Ok, S::Error>
    where
        K: Serialize + Ord + Clone,
        V: Serialize + Clone,
        S: Serializer,
    {
        serializer.collect_seq(map.iter())
    }

    /// Deserializes a sequence of pairs into a map (a later duplicate key
    /// wins, as `BTreeMap`'s `collect` does).
    pub(crate) fn deserialize<'de, K, V, D>(deserializer: D) -> Result<OrdMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Ord + Clone,
        V: Deserialize<'de> + Clone,
        D: Deserializer<'de>,
    {
        let pairs: Vec<(K, V)> = Vec::deserialize(deserializer)?;
        Ok(pairs.into_iter().collect())
    }
}

use imbl::OrdMap;
use serde::{Deserialize, Serialize};
use switchyard_proto::model::{EndpointGenerations, ObjectName};

/// Per-Service endpoint generations, shared like the state's other maps;
/// the replicated counterpart of the proxies' [`EndpointGenerations`] and
/// serialised exactly as it is.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Generations(#[serde(with = "pairs")] pub OrdMap<ObjectName, u64>);

impl Generations {
    /// The Service's generation (0 when it never changed through the log).
    pub fn of(&self, service: &ObjectName) -> u64 {
        self.0.get(service).copied().unwrap_or(0)
    }

    /// Records a change to `service` at log `index`; never lowers it.
    pub fn bump(&mut self, service: ObjectName, index: u64) {
        let generation = self.0.entry(service).or_default();
        *generation = (*generation).max(index);
    }

    /// The generations as proxies receive them (a copy: O(Services)).
    pub fn to_snapshot(&self) -> EndpointGenerations {
        EndpointGenerations(self.0.iter().map(|(k, v)| (k.clone(), *v)).collect())
    }
}
