//! Conversions between the wire messages of `switchyard.v1` and the model,
//! one per pair, so no service builds or reads a message field by field.

use crate::model::{BackendEvidence, BackendKey, ObjectName};
use crate::pb;

impl From<(ObjectName, u64)> for pb::AppliedGeneration {
    fn from((route, generation): (ObjectName, u64)) -> Self {
        pb::AppliedGeneration {
            namespace: route.namespace,
            name: route.name,
            generation,
        }
    }
}

impl From<&pb::AppliedGeneration> for (ObjectName, u64) {
    fn from(a: &pb::AppliedGeneration) -> Self {
        (
            ObjectName::new(a.namespace.clone(), a.name.clone()),
            a.generation,
        )
    }
}

impl From<(&BackendKey, BackendEvidence)> for pb::BackendReadiness {
    fn from((backend, e): (&BackendKey, BackendEvidence)) -> Self {
        pb::BackendReadiness {
            backend: backend.to_string(),
            endpoints_generation: e.endpoints_generation,
            healthy: e.healthy,
            total: e.total,
        }
    }
}

impl TryFrom<&pb::BackendReadiness> for (BackendKey, BackendEvidence) {
    /// Why the backend is not `namespace/name:port`.
    type Error = String;

    fn try_from(b: &pb::BackendReadiness) -> Result<Self, String> {
        let key = BackendKey::parse(&b.backend)
            .ok_or_else(|| format!("backend {:?} is not namespace/name:port", b.backend))?;
        Ok((
            key,
            BackendEvidence {
                endpoints_generation: b.endpoints_generation,
                healthy: b.healthy,
                total: b.total,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_model_round_trip() {
        let route = (ObjectName::new("ns", "r"), 42);
        let wire = pb::AppliedGeneration::from(route.clone());
        assert_eq!(<(ObjectName, u64)>::from(&wire), route);
        let key = BackendKey::new("ns", "svc", 80);
        let evidence = BackendEvidence {
            endpoints_generation: 7,
            healthy: 1,
            total: 2,
        };
        let wire = pb::BackendReadiness::from((&key, evidence));
        assert_eq!(
            <(BackendKey, BackendEvidence)>::try_from(&wire),
            Ok((key, evidence))
        );
        let bad = pb::BackendReadiness {
            backend: "nonsense".into(),
            ..wire
        };
        assert!(<(BackendKey, BackendEvidence)>::try_from(&bad).is_err());
    }
}
