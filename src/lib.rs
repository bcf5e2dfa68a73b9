//! switchyard: a fleet of HTTP proxies and a Raft group of coordinators
//! that move Gateway API routes between backends without dropping a
//! request.
//!
//! # Layout
//!
//! - `switchyard-proto`: the `switchyard.v1` contract and the domain model.
//! - `switchyard-coordinator`: Raft on sled, the replicated state machine,
//!   the cutover engine, the fleet and admin services.
//! - `switchyard-proxy`: the hyper data plane.
//! - `switchyard-kubeconfig`: Kubernetes YAML into the model.
//! - this crate: the `switchyard` command line ([`cli`]) and the admin
//!   client it uses ([`client`]).

pub mod cli;
pub mod client;
pub mod demo;

#[cfg(test)]
mod tests {
    /// The build `cargo test --workspace` runs (and the binary the process
    /// tests start) never has the cores' fault switches compiled in.
    #[test]
    fn the_product_carries_no_fault_injection() {
        let compiled = [
            ("coordinator", switchyard_coordinator::FAULT_INJECTION),
            ("proxy", switchyard_proxy::FAULT_INJECTION),
        ];
        assert_eq!(
            compiled,
            [("coordinator", false), ("proxy", false)],
            "fault switches compiled into the product"
        );
    }
}
