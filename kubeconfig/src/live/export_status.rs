//! ServiceExport status: what a mesh operator sees in `kubectl get
//! serviceexport -o yaml` about how switchyard used an export, as the
//! Multi-Cluster Services API (KEP-1645) names it:
//!
//! - `Valid`: `True` when the export's Service exists in its cluster,
//!   else `False`/`NoService`;
//! - `Conflict`: `True`/`PortConflict` when the export was left out of
//!   its clusterset import because its ports clash with the oldest
//!   export's (the message names the ports and the winning cluster), else
//!   `False`/`NoConflicts`.
//!
//! Written by server-side apply with our field manager (conditions are a
//! map keyed by type, so an MCS controller's own conditions stay), fenced
//! by the Raft term like every status write. What conflicts is decided by
//! the merge ([`super::merge::ExportConflict`]); this module only maps it
//! to conditions and writes them.

use super::conditions::{Condition, ConditionStatus};
use super::error::LiveError;
use super::kinds::Watched;
use super::merge::ExportConflict;
use super::status::{WriteOutcome, conditions_patch, now, write_watched};
use switchyard_proto::model::ObjectName;

/// The export's conditions, given the conflict the merge found for it
/// (`None`: it joined its import).
pub fn export_conditions(
    conflict: Option<&ExportConflict>,
    generation: Option<i64>,
) -> Vec<Condition> {
    let c = |type_: &str, status, reason: &str, message: String| Condition {
        type_: type_.to_string(),
        status,
        reason: reason.to_string(),
        message,
        observed_generation: generation,
    };
    use ConditionStatus::{False, True};
    match conflict {
        Some(x) if x.reason == "NoService" => vec![
            c("Valid", False, "NoService", x.message.clone()),
            c("Conflict", False, "NoConflicts", "not imported".into()),
        ],
        Some(x) => vec![
            c("Valid", True, "Valid", "the exported Service exists".into()),
            c("Conflict", True, x.reason, x.message.clone()),
        ],
        None => vec![
            c("Valid", True, "Valid", "the exported Service exists".into()),
            c(
                "Conflict",
                False,
                "NoConflicts",
                "part of its clusterset ServiceImport".into(),
            ),
        ],
    }
}

/// Applies `conditions` to ServiceExport `name` in `cluster` as the leader
/// of Raft term `term`.
pub async fn write_export_status(
    client: &kube::Client,
    cluster: &str,
    name: &ObjectName,
    conditions: &[Condition],
    term: u64,
) -> Result<WriteOutcome, LiveError> {
    let now = now();
    write_watched(client, cluster, Watched::ServiceExport, name, |current| {
        conditions_patch(current.data.get("status"), conditions, term, &now)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(cs: &[Condition], t: &str) -> (ConditionStatus, String) {
        let c = cs.iter().find(|c| c.type_ == t).unwrap();
        (c.status, c.reason.clone())
    }

    #[test]
    fn a_port_conflict_is_conflict_true_and_a_missing_service_not_valid() {
        let conflict = |reason| ExportConflict {
            cluster: "west".into(),
            service: ObjectName::new("shop", "blue"),
            reason,
            message: "why".into(),
        };
        let clash = export_conditions(Some(&conflict("PortConflict")), Some(3));
        assert_eq!(
            get(&clash, "Conflict"),
            (ConditionStatus::True, "PortConflict".into())
        );
        assert_eq!(
            get(&clash, "Valid"),
            (ConditionStatus::True, "Valid".into())
        );
        assert!(clash.iter().all(|c| c.observed_generation == Some(3)));
        let missing = export_conditions(Some(&conflict("NoService")), None);
        assert_eq!(
            get(&missing, "Valid"),
            (ConditionStatus::False, "NoService".into())
        );
        let fine = export_conditions(None, None);
        assert_eq!(
            get(&fine, "Conflict"),
            (ConditionStatus::False, "NoConflicts".into())
        );
    }
}
