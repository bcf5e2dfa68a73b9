//! Conversions between the wire messages of `switchyard.v1` and the model,
//! one per pair, so no service builds or reads a message field by field.

use crate::incremental::{Canonical, Digest, SetUpdate};
use crate::model::{BackendEvidence, BackendKey, ListenerBinding, ObjectName};
use crate::pb;

/// The applied generations a heartbeat carries.
pub type AppliedUpdate = SetUpdate<ObjectName, u64>;

/// The evidence a readiness report carries.
pub type EvidenceUpdate = SetUpdate<BackendKey, BackendEvidence>;

/// A set named by digest travels as changes on set 0 with the digest
/// beside them (see [`crate::incremental`]); anything else in the digest
/// field is not a digest.
fn digest_of(bytes: &[u8], what: &str) -> Result<Digest, String> {
    Digest::try_from(bytes).map_err(|_| format!("{what} digest has {} bytes, not 32", bytes.len()))
}

impl Canonical for ObjectName {
    fn canonical(&self, out: &mut Vec<u8>) {
        self.namespace.canonical(out);
        self.name.canonical(out);
    }
}

impl Canonical for BackendKey {
    fn canonical(&self, out: &mut Vec<u8>) {
        self.service.canonical(out);
        out.extend_from_slice(&self.port.to_le_bytes());
    }
}

impl Canonical for BackendEvidence {
    fn canonical(&self, out: &mut Vec<u8>) {
        self.endpoints_generation.canonical(out);
        self.healthy.canonical(out);
        self.total.canonical(out);
    }
}

impl pb::RegisterRequest {
    /// A registration of proxy `id` in `zone`, its admin API at
    /// `admin_address` (empty when it serves none).
    pub fn for_proxy(
        id: impl Into<String>,
        zone: impl Into<String>,
        admin_address: impl Into<String>,
    ) -> Self {
        pb::RegisterRequest {
            proxy: Some(pb::ProxyIdentity {
                id: id.into(),
                zone: zone.into(),
                admin_address: admin_address.into(),
            }),
        }
    }
}

impl pb::HeartbeatRequest {
    /// Sets the applied generations from `update`.
    pub fn set_applied(&mut self, update: AppliedUpdate) {
        match update {
            SetUpdate::Whole { seq, entries } => {
                self.applied = entries.into_iter().map(Into::into).collect();
                self.applied_delta = false;
                self.applied_seq = seq;
                self.applied_base = 0;
                self.applied_removed = Vec::new();
                self.applied_digest = Vec::new();
            }
            SetUpdate::Known { seq, digest } => {
                self.applied = Vec::new();
                self.applied_delta = true;
                self.applied_seq = seq;
                self.applied_base = 0;
                self.applied_removed = Vec::new();
                self.applied_digest = digest.to_vec();
            }
            SetUpdate::Changes {
                base,
                seq,
                upserted,
                removed,
            } => {
                self.applied = upserted.into_iter().map(Into::into).collect();
                self.applied_delta = true;
                self.applied_seq = seq;
                self.applied_base = base;
                self.applied_removed = removed
                    .into_iter()
                    .map(|r| pb::RouteName {
                        namespace: r.namespace,
                        name: r.name,
                    })
                    .collect();
                self.applied_digest = Vec::new();
            }
        }
    }

    /// The applied generations this heartbeat carries: a whole set from
    /// proxies older than `applied_delta`.
    pub fn applied_update(&self) -> Result<AppliedUpdate, String> {
        let entries = self.applied.iter().map(Into::into).collect();
        if !self.applied_delta {
            return Ok(SetUpdate::Whole {
                seq: self.applied_seq,
                entries,
            });
        }
        if !self.applied_digest.is_empty() {
            return Ok(SetUpdate::Known {
                seq: self.applied_seq,
                digest: digest_of(&self.applied_digest, "applied set")?,
            });
        }
        Ok(SetUpdate::Changes {
            base: self.applied_base,
            seq: self.applied_seq,
            upserted: entries,
            removed: self
                .applied_removed
                .iter()
                .map(|r| ObjectName::new(r.namespace.clone(), r.name.clone()))
                .collect(),
        })
    }
}

impl pb::ReadinessReport {
    /// Sets the evidence from `update`.
    pub fn set_evidence(&mut self, update: EvidenceUpdate) {
        let entries = |list: Vec<(BackendKey, BackendEvidence)>| {
            list.iter()
                .map(|(k, e)| pb::BackendReadiness::from((k, *e)))
                .collect()
        };
        match update {
            SetUpdate::Whole { seq, entries: all } => {
                self.backends = entries(all);
                self.delta = false;
                self.seq = seq;
                self.base_seq = 0;
                self.removed = Vec::new();
                self.digest = Vec::new();
            }
            SetUpdate::Known { seq, digest } => {
                self.backends = Vec::new();
                self.delta = true;
                self.seq = seq;
                self.base_seq = 0;
                self.removed = Vec::new();
                self.digest = digest.to_vec();
            }
            SetUpdate::Changes {
                base,
                seq,
                upserted,
                removed,
            } => {
                self.backends = entries(upserted);
                self.delta = true;
                self.seq = seq;
                self.base_seq = base;
                self.removed = removed.iter().map(ToString::to_string).collect();
                self.digest = Vec::new();
            }
        }
    }

    /// The evidence this report carries, or why a backend key does not
    /// parse: a whole set from proxies older than `delta`.
    pub fn evidence_update(&self) -> Result<EvidenceUpdate, String> {
        let entries = self
            .backends
            .iter()
            .map(TryFrom::try_from)
            .collect::<Result<Vec<_>, String>>()?;
        if !self.delta {
            return Ok(SetUpdate::Whole {
                seq: self.seq,
                entries,
            });
        }
        if !self.digest.is_empty() {
            return Ok(SetUpdate::Known {
                seq: self.seq,
                digest: digest_of(&self.digest, "evidence")?,
            });
        }
        let removed = self
            .removed
            .iter()
            .map(|b| {
                BackendKey::parse(b)
                    .ok_or_else(|| format!("removed backend {b:?} is not namespace/name:port"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(SetUpdate::Changes {
            base: self.base_seq,
            seq: self.seq,
            upserted: entries,
            removed,
        })
    }
}

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

impl From<&ListenerBinding> for pb::ListenerSocket {
    fn from(b: &ListenerBinding) -> Self {
        pb::ListenerSocket {
            gateway: b
                .gateway
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            port: u32::from(b.port),
            address: b.address.clone(),
            bound: b.bound,
            error: b.error.clone().unwrap_or_default(),
        }
    }
}

impl TryFrom<&pb::ListenerSocket> for ListenerBinding {
    /// Why the socket does not describe a Gateway listener port.
    type Error = String;

    fn try_from(s: &pb::ListenerSocket) -> Result<Self, String> {
        let port = u16::try_from(s.port)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| {
                format!(
                    "listener socket {}: port {} is not 1-65535",
                    s.address, s.port
                )
            })?;
        let gateway = match s.gateway.as_str() {
            "" => None,
            name => Some(
                name.split_once('/')
                    .filter(|(ns, n)| !ns.is_empty() && !n.is_empty())
                    .map(|(ns, n)| ObjectName::new(ns, n))
                    .ok_or_else(|| {
                        format!(
                            "listener socket {}: Gateway {name:?} is not namespace/name",
                            s.address
                        )
                    })?,
            ),
        };
        Ok(ListenerBinding {
            gateway,
            port,
            address: s.address.clone(),
            bound: s.bound,
            // A bound socket has no error, whatever a sender put there.
            error: (!s.bound)
                .then(|| s.error.clone())
                .filter(|e| !e.is_empty()),
        })
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

    #[test]
    fn a_set_named_by_digest_travels_as_changes_on_set_zero() {
        let digest = [7u8; 32];
        let mut report = pb::ReadinessReport::default();
        report.set_evidence(SetUpdate::Known { seq: 3, digest });
        // What a leader older than digests reads: changes on set 0, which
        // no receiver holds — refused, never an empty set.
        assert!(report.delta && report.base_seq == 0 && report.backends.is_empty());
        assert_eq!(
            report.evidence_update(),
            Ok(SetUpdate::Known { seq: 3, digest })
        );
        let mut heartbeat = pb::HeartbeatRequest::default();
        heartbeat.set_applied(SetUpdate::Known { seq: 4, digest });
        assert!(heartbeat.applied_delta && heartbeat.applied_base == 0);
        assert_eq!(
            heartbeat.applied_update(),
            Ok(SetUpdate::Known { seq: 4, digest })
        );
        // Set again as a whole set, nothing of the digest stays.
        heartbeat.set_applied(SetUpdate::Whole {
            seq: 5,
            entries: vec![],
        });
        assert!(heartbeat.applied_digest.is_empty());
        // A digest of another length is refused by name.
        report.digest = vec![1, 2, 3];
        assert_eq!(
            report.evidence_update(),
            Err("evidence digest has 3 bytes, not 32".to_owned())
        );
    }

    #[test]
    fn listener_sockets_round_trip_and_bad_ones_are_named() {
        let sockets = [
            ListenerBinding {
                gateway: Some(ObjectName::new("infra", "a")),
                port: 80,
                address: "127.0.0.1:8080".into(),
                bound: true,
                error: None,
            },
            ListenerBinding {
                gateway: None,
                port: 443,
                address: "0.0.0.0:8443".into(),
                bound: false,
                error: Some("Address in use (os error 98)".into()),
            },
        ];
        for socket in &sockets {
            let wire = pb::ListenerSocket::from(socket);
            assert_eq!(ListenerBinding::try_from(&wire).as_ref(), Ok(socket));
        }
        let wire = pb::ListenerSocket::from(&sockets[0]);
        let bad_port = pb::ListenerSocket {
            port: 70_000,
            ..wire.clone()
        };
        let err = ListenerBinding::try_from(&bad_port).expect_err("port out of range");
        assert!(err.contains("127.0.0.1:8080: port 70000"), "{err}");
        let bad_gateway = pb::ListenerSocket {
            gateway: "no-namespace".into(),
            ..wire
        };
        let err = ListenerBinding::try_from(&bad_gateway).expect_err("gateway without namespace");
        assert!(
            err.contains("\"no-namespace\" is not namespace/name"),
            "{err}"
        );
    }
}
