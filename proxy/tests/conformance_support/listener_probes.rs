//! The data-path side of the Gateway listener status the conformance files
//! that declare their Secrets expect: the runner's own check, derived
//! from those expectations, not a case of the suite (whose listener TLS
//! tests check status only).
//!
//! For every HTTPS listener an expectation names: `ResolvedRefs` `False`
//! means the proxy must not serve it, so a TLS handshake there gets no
//! certificate (the connection is closed, or no TLS is spoken);
//! `ResolvedRefs` `True` means it is served, so the handshake gets a
//! certificate (the client may still reject it for the name: the suite's
//! `certificate` Secret carries no DNS name). Each probe must hold three
//! times in a row within the case deadline, as cases do.
//!
//! The runner serves each probed Gateway alone, as the suite gives every
//! Gateway an address of its own: switchyard serves all its Gateways from
//! one fleet, where listeners of different Gateways on one port conflict,
//! and a conflicted listener is not served whatever its certificate
//! (GatewayInvalidTLSConfiguration's four Gateways all take 443 without a
//! hostname, so three would present nothing for the wrong reason).

use crate::FileCtx;
use anyhow::{Context, Result, ensure};
use serde_json::Value;
use std::time::Duration;
use switchyard_proto::model::{Gateway, ListenerProtocol};
use switchyard_test_support::listener_tls::connect;
use tokio::time::Instant;

/// One listener to probe.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    /// `namespace/name` of the Gateway.
    pub(crate) gateway: String,
    /// The listener's port (the runner gives each (Gateway, port) a socket).
    pub(crate) port: u16,
    /// The listener's name, for the report.
    listener: String,
    /// The name sent as SNI: the listener's hostname (`*.` made a label).
    sni: String,
    /// Whether the expectations say it is served.
    served: bool,
}

impl Probe {
    /// What the probe checks, for the tally.
    pub(crate) fn label(&self, file: &str) -> String {
        let what = if self.served {
            "presents a certificate"
        } else {
            "presents no certificate"
        };
        format!(
            "{file} listener {} {} (derived from its ResolvedRefs): {what}",
            self.gateway, self.listener
        )
    }
}

/// The probes of a file: its HTTPS listeners whose expected `ResolvedRefs`
/// status is given.
pub(crate) fn probes(data: &Value, gateways: &[Gateway]) -> Result<Vec<Probe>> {
    let mut out = Vec::new();
    for e in data["status_expectations"].as_array().into_iter().flatten() {
        let (Some(gateway), Some(listeners)) = (e["gateway"].as_str(), e["listeners"].as_array())
        else {
            continue;
        };
        let g = gateways
            .iter()
            .find(|g| g.meta.object_name().to_string() == gateway)
            .with_context(|| format!("no Gateway {gateway}"))?;
        for expected in listeners {
            let name = expected["name"].as_str().unwrap_or_default();
            let l = g
                .listeners
                .iter()
                .find(|l| l.name == name)
                .with_context(|| format!("Gateway {gateway} has no listener {name}"))?;
            let resolved = expected["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "ResolvedRefs")
                .and_then(|c| c["status"].as_str());
            let served = match resolved {
                Some("True") => true,
                Some("False") => false,
                _ => continue,
            };
            if l.protocol != ListenerProtocol::Https {
                continue;
            }
            let sni = match l.hostname.as_deref() {
                Some(h) => h.replace("*.", "probe."),
                None => "probe.example".to_string(),
            };
            out.push(Probe {
                gateway: gateway.to_string(),
                port: l.port,
                listener: name.to_string(),
                sni,
                served,
            });
        }
    }
    Ok(out)
}

/// Whether the handshake error says the server presented a certificate
/// the client did not accept (rather than presenting none).
fn rejected_certificate(error: &std::io::Error) -> bool {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)))
}

async fn attempt(ctx: &FileCtx, p: &Probe) -> Result<()> {
    let addr = ctx.addr_of(&p.gateway, p.port)?;
    let client = ctx.ca.client(&[b"http/1.1"]);
    let outcome = connect(&client, addr, &p.sni).await;
    let presented = match &outcome {
        Ok(_) => true,
        Err(e) => rejected_certificate(e),
    };
    let seen = match &outcome {
        Ok(_) => "handshake completed".to_string(),
        Err(e) => format!("handshake failed: {e}"),
    };
    ensure!(
        presented == p.served,
        "SNI {}: {seen}, expected {}",
        p.sni,
        if p.served {
            "a certificate"
        } else {
            "no certificate"
        }
    );
    Ok(())
}

/// Runs one probe by the cases' retry rule.
pub(crate) async fn run(ctx: &FileCtx, p: &Probe, deadline: Duration) -> Result<()> {
    let deadline = Instant::now() + deadline;
    let mut in_a_row = 0;
    loop {
        match attempt(ctx, p).await {
            Ok(()) => {
                in_a_row += 1;
                if in_a_row == crate::PASSES_IN_A_ROW {
                    return Ok(());
                }
            }
            Err(error) => {
                if Instant::now() >= deadline {
                    return Err(error);
                }
                in_a_row = 0;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
