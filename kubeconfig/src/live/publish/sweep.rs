//! Removing our `parents[]` entries from HTTPRoutes and GRPCRoutes, and
//! our `ancestors[]` entries from BackendTLSPolicies, we no longer serve:
//! at once for objects this publisher wrote (`withdraw`), and by listing
//! each cluster's routes and policies at the first publish of a term and
//! every `verify_every` (`sweep`), which also finds the entries an
//! earlier leader left on objects that stopped being served during a
//! failover.
//!
//! Cost: one LIST of each swept kind per cluster per `verify_every`, plus
//! one GET and PATCH per object to clean.

use super::{Run, Slot, StatusPublisher};
use crate::live::kinds::api_resource;
use crate::live::leader::Lease;
use crate::live::status::{write_policy_status, write_route_status};
use kube::Api;
use kube::api::ListParams;
use kube::core::DynamicObject;
use serde_json::Value;
use switchyard_proto::model::{Kind, ObjectName, ResourceKey};
use tokio::time::Instant;

impl StatusPublisher {
    /// Removes our entries from routes written before but not served now.
    pub(super) async fn withdraw(&mut self, run: &mut Run<'_, impl Lease>) {
        let stale: Vec<Slot> = self
            .last
            .keys()
            .filter(|slot| !run.visited.contains(*slot))
            .cloned()
            .collect();
        for slot in stale {
            if !swept(slot.1.kind) {
                // A Gateway or class that left our class is the new
                // controller's to report on; ours are overwritten by it.
                self.last.remove(&slot);
                continue;
            }
            if self.clear(run, &slot).await {
                self.last.remove(&slot);
            }
        }
    }

    /// Lists every cluster's HTTPRoutes, GRPCRoutes and
    /// BackendTLSPolicies, when due, and clears our entries from those not
    /// served now.
    pub(super) async fn sweep(&mut self, run: &mut Run<'_, impl Lease>) {
        if self
            .swept
            .is_some_and(|at| at.elapsed() < self.verify_every)
            || run.out.stopped.is_some()
        {
            return;
        }
        let mut complete = true;
        let lists = (0..self.sources.len()).flat_map(|i| SWEPT.map(|kind| (i, kind)));
        for (i, kind) in lists {
            let source = self.sources[i].clone();
            let api: Api<DynamicObject> = Api::all_with(source.client.clone(), &api_resource(kind));
            let objects = match api.list(&ListParams::default()).await {
                Ok(list) => list.items,
                // No such kind in that cluster (no Gateway API CRDs, or
                // an older release without GRPCRoute or
                // BackendTLSPolicy): nothing of ours can be there.
                Err(kube::Error::Api(s)) if s.is_not_found() => Vec::new(),
                Err(e) => {
                    complete = false;
                    run.out.errors.push(crate::live::LiveError::Status {
                        cluster: source.name.clone(),
                        kind: kind.as_str(),
                        object: "(list, to remove stale status entries)".to_string(),
                        cause: Box::new(e),
                    });
                    continue;
                }
            };
            for object in objects {
                let ours = object
                    .data
                    .pointer(entries_pointer(kind))
                    .and_then(Value::as_array)
                    .is_some_and(|ps| {
                        ps.iter().any(|p| {
                            p.get("controllerName").and_then(Value::as_str)
                                == Some(self.controller_name.as_str())
                        })
                    });
                let name = ObjectName::new(
                    object.metadata.namespace.clone().unwrap_or_default(),
                    object.metadata.name.clone().unwrap_or_default(),
                );
                let slot = (source.name.clone(), ResourceKey { kind, name });
                if ours && !run.visited.contains(&slot) && !self.clear(run, &slot).await {
                    complete = false;
                }
            }
        }
        if complete {
            self.swept = Some(Instant::now());
        }
    }

    /// Writes no entries of ours at `slot`; true when done.
    async fn clear(&self, run: &mut Run<'_, impl Lease>, slot: &Slot) -> bool {
        let Some(term) = run.term() else { return false };
        let Some(source) = self.sources.iter().find(|s| s.name == slot.0) else {
            return true;
        };
        let (client, cluster, name) = (&source.client, &source.name, &slot.1.name);
        let controller = &self.controller_name;
        let result = match slot.1.kind {
            Kind::BackendTLSPolicy => {
                write_policy_status(client, cluster, name, controller, &[], term).await
            }
            kind => write_route_status(client, cluster, kind, name, controller, &[], term).await,
        };
        run.settle(&source.name, &slot.1, result)
    }
}

/// The kinds whose entries of ours are withdrawn and swept: those whose
/// status is a list shared with other controllers. (A Gateway or class
/// that left our class is the new controller's to report on; ours are
/// overwritten by it.)
const SWEPT: [Kind; 3] = [Kind::HTTPRoute, Kind::GRPCRoute, Kind::BackendTLSPolicy];

fn swept(kind: Kind) -> bool {
    SWEPT.contains(&kind)
}

/// Where a swept kind keeps its per-controller entries.
fn entries_pointer(kind: Kind) -> &'static str {
    match kind {
        Kind::BackendTLSPolicy => "/status/ancestors",
        _ => "/status/parents",
    }
}
