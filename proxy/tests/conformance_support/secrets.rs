//! The Secrets a conformance file's HTTPS listeners read.
//!
//! - A file with a `secrets` key (the Gateway listener TLS tests) gets
//!   exactly the Secrets it declares, read by the product's parser:
//!   `valid` ones with a test-CA certificate for the hosts it names (plus
//!   the SNIs its cases send, which rustls needs where Go's client does
//!   not: see `secret_documents`), `malformed` ones with the suite's
//!   bytes, `missing` ones not at all.
//! - A file without it gets every Secret its HTTPS listeners name, with a
//!   certificate for the names the suite's own covers (`*.org`,
//!   `*.wildcard.org`) and every SNI the cases send.

use crate::objects;
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::collections::BTreeSet;
use switchyard_proto::model::{ConfigSnapshot, Resource};
use switchyard_test_support::conformance_secrets::{declares_secrets, secret_documents};
use switchyard_test_support::listener_tls::TestCa;

/// Adds the file's Secrets to `snapshot`; returns their namespaces.
/// `index` counts the file's objects, for parse errors.
pub(crate) fn install(
    snapshot: &mut ConfigSnapshot,
    file: &str,
    data: &Value,
    ca: &TestCa,
    index: &mut usize,
) -> Result<BTreeSet<String>> {
    let snis: Vec<&str> = objects(data, "cases")
        .filter_map(|c| c["request"]["tls"]["sni"].as_str())
        .collect();
    if !declares_secrets(data) {
        fill_referenced(snapshot, ca, &snis);
        return Ok(BTreeSet::new());
    }
    let documents = secret_documents(data, ca, &snis)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{file}: secrets"))?;
    let mut namespaces = BTreeSet::new();
    for document in documents {
        match switchyard_kubeconfig::parse_object(file, *index, document)
            .with_context(|| format!("{file}: secrets, object {index}"))?
        {
            Resource::Secret(s) => {
                namespaces.insert(s.meta.namespace.clone());
                snapshot.secrets.push(s);
            }
            other => bail!("{file}: a {} among the secrets", other.kind()),
        }
        *index += 1;
    }
    Ok(namespaces)
}

/// Every Secret the Gateways' HTTPS listeners name, with one certificate.
fn fill_referenced(snapshot: &mut ConfigSnapshot, ca: &TestCa, snis: &[&str]) {
    let mut names: BTreeSet<&str> = ["*.org", "*.wildcard.org"].into();
    names.extend(snis);
    let names: Vec<&str> = names.into_iter().collect();
    let certificate = ca.server(&names);
    let mut secrets = BTreeSet::new();
    for g in &snapshot.gateways {
        for r in g
            .listeners
            .iter()
            .filter_map(|l| l.tls.as_ref())
            .flat_map(|t| &t.certificate_refs)
        {
            let ns = r
                .namespace
                .clone()
                .unwrap_or_else(|| g.meta.namespace.clone());
            secrets.insert((ns, r.name.clone()));
        }
    }
    for (ns, name) in secrets {
        snapshot.secrets.push(certificate.secret(&ns, &name));
    }
}
