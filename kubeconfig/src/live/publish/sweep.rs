//! Removing our `parents[]` entries from HTTPRoutes we no longer serve:
//! at once for routes this publisher wrote (`withdraw`), and by listing
//! each cluster's routes at the first publish of a term and every
//! `verify_every` (`sweep`), which also finds the entries an earlier
//! leader left on routes that stopped being served during a failover.
//!
//! Cost: one LIST of HTTPRoutes per cluster per `verify_every`, plus one
//! GET and PATCH per route to clean.

use super::{Run, Slot, StatusPublisher};
use crate::live::kinds::api_resource;
use crate::live::leader::Lease;
use crate::live::status::write_route_status;
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
            if !slot.1.kind.is_route() {
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

    /// Lists every cluster's HTTPRoutes and GRPCRoutes, when due, and
    /// clears our entries from those not served now.
    pub(super) async fn sweep(&mut self, run: &mut Run<'_, impl Lease>) {
        if self
            .swept
            .is_some_and(|at| at.elapsed() < self.verify_every)
            || run.out.stopped.is_some()
        {
            return;
        }
        let mut complete = true;
        let lists =
            (0..self.sources.len()).flat_map(|i| [(i, Kind::HTTPRoute), (i, Kind::GRPCRoute)]);
        for (i, kind) in lists {
            let source = self.sources[i].clone();
            let api: Api<DynamicObject> = Api::all_with(source.client.clone(), &api_resource(kind));
            let routes = match api.list(&ListParams::default()).await {
                Ok(list) => list.items,
                // No such kind in that cluster (no Gateway API CRDs, or
                // an older release without GRPCRoute): nothing of ours
                // can be there.
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
            for route in routes {
                let ours = route
                    .data
                    .pointer("/status/parents")
                    .and_then(Value::as_array)
                    .is_some_and(|ps| {
                        ps.iter().any(|p| {
                            p.get("controllerName").and_then(Value::as_str)
                                == Some(self.controller_name.as_str())
                        })
                    });
                let name = ObjectName::new(
                    route.metadata.namespace.clone().unwrap_or_default(),
                    route.metadata.name.clone().unwrap_or_default(),
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
        let result = write_route_status(
            &source.client,
            &source.name,
            slot.1.kind,
            &slot.1.name,
            &self.controller_name,
            &[],
            term,
        )
        .await;
        run.settle(&source.name, &slot.1, result)
    }
}
