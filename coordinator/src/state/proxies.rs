//! The proxy registry's commands: a proxy registers (again), leaves on
//! shutdown, or is expired by the leader (fenced like every decision).
//! Part of [`ReplicatedState::apply`], split out of `apply` for size.

use super::*;

/// Longest proxy id or zone accepted (a Kubernetes pod name fits).
const MAX_PROXY_FIELD: usize = 253;

impl ReplicatedState {
    pub(super) fn register_proxy(
        &mut self,
        index: u64,
        id: &str,
        zone: &str,
        admin_address: &str,
    ) -> Result<Outcome, CommandError> {
        for (field, value) in [("id", id), ("zone", zone)] {
            if value.is_empty()
                || value.len() > MAX_PROXY_FIELD
                || !value.chars().all(|c| c.is_ascii_graphic())
            {
                return Err(CommandError::InvalidProxy(format!(
                    "{field} {value:?} must be 1..{MAX_PROXY_FIELD} printable ASCII characters without spaces"
                )));
            }
        }
        let verb = if self.proxies.contains_key(id) {
            "re-registered"
        } else {
            "registered"
        };
        self.touched.proxy(id);
        self.proxies.insert(
            id.to_string(),
            ProxyRecord {
                id: id.to_string(),
                zone: zone.to_string(),
                admin_address: admin_address.to_string(),
                registered_index: index,
            },
        );
        Ok(Outcome {
            changes: vec![format!("proxy {id} (zone {zone}) {verb}")],
            routes: vec![],
            ..Default::default()
        })
    }

    pub(super) fn remove_proxy(
        &mut self,
        id: &str,
        reason: &str,
        registration: Option<u64>,
    ) -> Outcome {
        let current = self.proxies.get(id).map(|p| p.registered_index);
        let line = match (current, registration) {
            (None, _) => format!("proxy {id} was not registered: {reason}"),
            // A newer run under the same id registered since: its
            // predecessor's goodbye must not remove it.
            (Some(now), Some(leaving)) if now != leaving => format!(
                "proxy {id}: registration {leaving} left ({reason}); registration {now} stays"
            ),
            (Some(_), _) => {
                self.touched.proxy(id);
                self.proxies.remove(id);
                format!("proxy {id} removed: {reason}")
            }
        };
        Outcome {
            changes: vec![line],
            routes: vec![],
            ..Default::default()
        }
    }

    pub(super) fn expire_proxy(
        &mut self,
        at: LogPosition,
        id: &str,
        registration: u64,
        basis: &DecisionBasis,
    ) -> Result<Outcome, CommandError> {
        fence::check_term(basis, at)?;
        let current = self.proxies.get(id).map(|p| p.registered_index);
        if current != Some(registration) {
            return Err(CommandError::StaleRegistration {
                id: id.to_string(),
                registration,
                current: current.map_or("not registered".into(), |r| format!("registration {r}")),
            });
        }
        self.touched.proxy(id);
        self.proxies.remove(id);
        Ok(Outcome {
            changes: vec![format!(
                "proxy {id} (registration {registration}) expired: lease ran out"
            )],
            routes: vec![],
            ..Default::default()
        })
    }
}
