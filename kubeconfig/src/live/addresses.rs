//! Gateway addresses: which addresses a Gateway gets (`status.addresses`)
//! and what its `spec.addresses` request means, for switchyard's one
//! static proxy fleet.
//!
//! Every Gateway is served by the same proxies, reached through one
//! LoadBalancer Service (named with `--kubernetes-proxy-service`); its
//! `status.loadBalancer.ingress` (an IP or a hostname each) are the only
//! addresses switchyard can truthfully report. So:
//!
//! - no `spec.addresses`: the Gateway gets all of the Service's addresses;
//!   until it has one, `Programmed` is `False` with `AddressNotAssigned`;
//! - `spec.addresses` of a type other than `IPAddress` or `Hostname`:
//!   `Accepted` `False`, `UnsupportedAddress` (the spec's reason for an
//!   address type the implementation does not support);
//! - a requested value the Service does not have: `Accepted` stays true
//!   and `Programmed` is `False` with `AddressNotUsable`, naming the
//!   address (switchyard cannot make the load balancer take a new one);
//! - a requested value the Service has: honoured, and only the requested
//!   addresses are reported; an empty value asks for any address of its
//!   type.
//!
//! Pure: the Service's addresses come in ([`Fleet`]); reading the Service
//! is the publisher's.

use k8s_openapi::api::core::v1::Service;

/// `IPAddress`, the Gateway API's default address type.
pub const IP_ADDRESS: &str = "IPAddress";
/// `Hostname`.
pub const HOSTNAME: &str = "Hostname";

/// One address, as `status.addresses` lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GatewayAddress {
    /// `IPAddress` or `Hostname`.
    pub type_: String,
    /// The address.
    pub value: String,
}

/// The proxies' addresses, as their LoadBalancer Service reports them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fleet {
    /// The Service, `cluster/namespace/name`, for messages.
    pub service: String,
    /// Its load-balancer ingress addresses (empty until the load balancer
    /// assigns one).
    pub addresses: Vec<GatewayAddress>,
    /// Why the Service could not be read, if it could not.
    pub problem: Option<String>,
}

impl Fleet {
    /// The addresses of `service`'s `status.loadBalancer.ingress`.
    pub fn of_service(name: &str, service: &Service) -> Fleet {
        let ingress = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref());
        let mut addresses = Vec::new();
        for i in ingress.into_iter().flatten() {
            if let Some(ip) = i.ip.as_ref().filter(|ip| !ip.is_empty()) {
                addresses.push(address(IP_ADDRESS, ip));
            }
            if let Some(host) = i.hostname.as_ref().filter(|h| !h.is_empty()) {
                addresses.push(address(HOSTNAME, host));
            }
        }
        Fleet {
            service: name.to_string(),
            addresses,
            problem: None,
        }
    }
}

fn address(type_: &str, value: &str) -> GatewayAddress {
    GatewayAddress {
        type_: type_.to_string(),
        value: value.to_string(),
    }
}

/// What a Gateway's addresses come to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// `status.addresses`.
    pub addresses: Vec<GatewayAddress>,
    /// `Err(message)`: `Accepted` `False`, `UnsupportedAddress`.
    pub accepted: Result<(), String>,
    /// `Err((reason, message))`: `Programmed` `False` for want of an
    /// address (`AddressNotAssigned` or `AddressNotUsable`).
    pub programmed: Result<(), (&'static str, String)>,
}

/// The addresses of a Gateway requesting `requested` (`spec.addresses`
/// as `(type, value)`, type `None` meaning `IPAddress`), served by
/// `fleet` (`None`: no Service was named).
pub fn assign(requested: &[(Option<String>, String)], fleet: Option<&Fleet>) -> Assignment {
    let unsupported: Vec<String> = requested
        .iter()
        .enumerate()
        .filter_map(|(i, (t, v))| {
            let t = t.as_deref().unwrap_or(IP_ADDRESS);
            (t != IP_ADDRESS && t != HOSTNAME)
                .then(|| format!("spec.addresses[{i}] {v:?} has type {t:?}"))
        })
        .collect();
    if !unsupported.is_empty() {
        return Assignment {
            addresses: Vec::new(),
            accepted: Err(format!(
                "{}: switchyard supports IPAddress and Hostname addresses only (those of the proxies' Service)",
                unsupported.join("; ")
            )),
            programmed: Err(("Invalid", "the Gateway is not accepted".to_string())),
        };
    }
    let not_assigned = |message: String| Assignment {
        addresses: Vec::new(),
        accepted: Ok(()),
        programmed: Err(("AddressNotAssigned", message)),
    };
    let Some(fleet) = fleet else {
        return not_assigned(
            "no address source: the coordinators were started without --kubernetes-proxy-service, so the proxies' addresses are unknown".to_string(),
        );
    };
    if let Some(problem) = &fleet.problem {
        return not_assigned(format!(
            "the proxies' Service {} cannot be read: {problem}",
            fleet.service
        ));
    }
    if fleet.addresses.is_empty() {
        return not_assigned(format!(
            "the proxies' Service {} has no load-balancer address yet",
            fleet.service
        ));
    }
    if requested.is_empty() {
        return Assignment {
            addresses: fleet.addresses.clone(),
            accepted: Ok(()),
            programmed: Ok(()),
        };
    }
    let mut addresses: Vec<GatewayAddress> = Vec::new();
    let mut unusable = Vec::new();
    for (i, (t, v)) in requested.iter().enumerate() {
        let t = t.as_deref().unwrap_or(IP_ADDRESS);
        let matching: Vec<&GatewayAddress> = fleet
            .addresses
            .iter()
            .filter(|a| a.type_ == t && (v.is_empty() || a.value == *v))
            .collect();
        if matching.is_empty() {
            unusable.push(if v.is_empty() {
                format!("spec.addresses[{i}]: the Service has no {t} address")
            } else {
                format!("spec.addresses[{i}] {t} {v} is not an address of the Service")
            });
        }
        for a in matching {
            if !addresses.contains(a) {
                addresses.push(a.clone());
            }
        }
    }
    let programmed = if unusable.is_empty() {
        Ok(())
    } else {
        let have: Vec<String> = fleet
            .addresses
            .iter()
            .map(|a| format!("{} {}", a.type_, a.value))
            .collect();
        Err((
            "AddressNotUsable",
            format!(
                "{}: the proxies' Service {} has {}; request one of those or remove spec.addresses",
                unusable.join("; "),
                fleet.service,
                have.join(", ")
            ),
        ))
    };
    Assignment {
        addresses,
        accepted: Ok(()),
        programmed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> Fleet {
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "proxy", "namespace": "switchyard"},
            "status": {"loadBalancer": {"ingress": [
                {"ip": "203.0.113.7"}, {"hostname": "lb.example.net"}]}}
        }))
        .unwrap();
        Fleet::of_service("local/switchyard/proxy", &service)
    }

    fn req(t: Option<&str>, v: &str) -> (Option<String>, String) {
        (t.map(str::to_string), v.to_string())
    }

    #[test]
    fn without_a_request_every_service_address_is_reported() {
        let a = assign(&[], Some(&fleet()));
        assert_eq!(
            a.addresses,
            [
                address(IP_ADDRESS, "203.0.113.7"),
                address(HOSTNAME, "lb.example.net")
            ]
        );
        assert_eq!((a.accepted, a.programmed), (Ok(()), Ok(())));
    }

    #[test]
    fn until_the_load_balancer_assigns_one_there_is_no_address() {
        let pending = Fleet {
            service: "local/switchyard/proxy".into(),
            ..Fleet::default()
        };
        for fleet in [None, Some(&pending)] {
            let a = assign(&[], fleet);
            assert!(a.addresses.is_empty());
            assert_eq!(a.programmed.unwrap_err().0, "AddressNotAssigned");
        }
    }

    #[test]
    fn gateway_static_addresses_unsupported_type_then_unusable_then_usable() {
        // The conformance test GatewayStaticAddresses, step by step.
        let invalid = req(Some("test/fake-invalid-type"), "fake address teehee!");
        let unusable = req(None, "198.51.100.1");
        let usable = req(Some(IP_ADDRESS), "203.0.113.7");
        let a = assign(&[invalid, unusable.clone(), usable.clone()], Some(&fleet()));
        assert!(
            a.accepted.unwrap_err().contains("test/fake-invalid-type"),
            "names the type"
        );
        let a = assign(&[unusable, usable.clone()], Some(&fleet()));
        assert_eq!(a.accepted, Ok(()));
        let (reason, message) = a.programmed.unwrap_err();
        assert_eq!(reason, "AddressNotUsable");
        assert!(message.contains("198.51.100.1"), "{message}");
        let a = assign(&[usable], Some(&fleet()));
        assert_eq!((a.accepted, a.programmed), (Ok(()), Ok(())));
        assert_eq!(a.addresses, [address(IP_ADDRESS, "203.0.113.7")]);
    }

    #[test]
    fn an_empty_value_asks_for_any_address_of_its_type() {
        let a = assign(&[req(Some(HOSTNAME), "")], Some(&fleet()));
        assert_eq!(a.addresses, [address(HOSTNAME, "lb.example.net")]);
        assert_eq!(a.programmed, Ok(()));
    }
}
