//! The Secrets a Gateway API conformance file (`tests/data/gateway-api/`,
//! see its README) declares in its `secrets` key, as the `v1 Secret`
//! documents a cluster would hold, for runners to read with the product's
//! own parser.
//!
//! - `valid`: a `kubernetes.io/tls` Secret whose certificate, signed by
//!   the runner's test CA, carries the entry's `hosts` as the suite's
//!   generator files them ([`TestCa::server_for_suite_hosts`]), plus any
//!   names the runner's client needs (see [`secret_documents`]). The PEM
//!   goes in `stringData`, as `kubectl create secret tls` would send it.
//! - `malformed`: the entry's `data`, copied byte for byte (base64, as the
//!   suite's manifest has it), with its `type`.
//! - `missing`: no document; the name is referenced and must not resolve.
//!
//! Does not own: which runner installs the Secrets, or what a listener
//! makes of them (the product's rule, `gateway_api::tls`).

use crate::listener_tls::TestCa;
use serde_json::{Value, json};

/// Whether the file declares its Secrets (a `secrets` key); files without
/// one leave the Secrets to the runner.
pub fn declares_secrets(file: &Value) -> bool {
    file.get("secrets").is_some_and(Value::is_array)
}

/// The documents of the file's `secrets` entries (none for `missing`), in
/// order; an entry that is not one of the three forms is an error naming
/// it.
///
/// `client_names` are added to every `valid` certificate as DNS names: a
/// runner that verifies the certificate with rustls passes the SNIs its
/// cases send, because rustls refuses a wildcard directly over a
/// one-label suffix (`*.org` for `example.org`), which the suite's Go
/// client accepts. The proxy serves whatever the Secret holds either way.
pub fn secret_documents(
    file: &Value,
    ca: &TestCa,
    client_names: &[&str],
) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for (i, entry) in file["secrets"].as_array().into_iter().flatten().enumerate() {
        let field = |key: &str| {
            entry[key]
                .as_str()
                .ok_or_else(|| format!("secrets[{i}].{key} is missing or not a string"))
        };
        let (namespace, name) = (field("namespace")?, field("name")?);
        let metadata = json!({"namespace": namespace, "name": name});
        match field("content")? {
            "missing" => {}
            "valid" => {
                let mut hosts: Vec<&str> = entry["hosts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if hosts.is_empty() {
                    return Err(format!(
                        "secrets[{i}] ({namespace}/{name}): valid needs hosts"
                    ));
                }
                for n in client_names {
                    if !hosts.contains(n) {
                        hosts.push(n);
                    }
                }
                let cert = ca.server_for_suite_hosts(&hosts);
                out.push(json!({
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": metadata,
                    "type": field("type")?,
                    "stringData": {"tls.crt": cert.chain_pem, "tls.key": cert.key_pem},
                }));
            }
            "malformed" => {
                let data = entry["data"].as_object().ok_or_else(|| {
                    format!("secrets[{i}] ({namespace}/{name}): malformed needs data")
                })?;
                out.push(json!({
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": metadata,
                    "type": field("type")?,
                    "data": data,
                }));
            }
            other => {
                return Err(format!(
                    "secrets[{i}] ({namespace}/{name}): content {other:?} is not valid, malformed or missing"
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_gives_its_document() {
        let file = json!({"secrets": [
            {"namespace": "a", "name": "ok", "type": "kubernetes.io/tls", "content": "valid",
             "hosts": ["*", "*.org"]},
            {"namespace": "a", "name": "bad", "type": "kubernetes.io/tls", "content": "malformed",
             "data": {"tls.crt": "SGVsbG8gd29ybGQK", "tls.key": "SGVsbG8gd29ybGQK"}},
            {"namespace": "a", "name": "gone", "type": null, "content": "missing"},
        ]});
        assert!(declares_secrets(&file));
        let docs = secret_documents(&file, &TestCa::new("t"), &[]).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["metadata"]["name"], "ok");
        assert!(
            docs[0]["stringData"]["tls.crt"]
                .as_str()
                .unwrap()
                .contains("CERTIFICATE")
        );
        assert_eq!(docs[1]["data"]["tls.crt"], "SGVsbG8gd29ybGQK");
        assert_eq!(docs[1]["type"], "kubernetes.io/tls");
    }

    #[test]
    fn an_unknown_form_or_a_valid_secret_without_hosts_is_an_error() {
        let ca = TestCa::new("t");
        let unknown = json!({"secrets": [{"namespace": "a", "name": "x", "content": "expired"}]});
        assert!(
            secret_documents(&unknown, &ca, &[])
                .unwrap_err()
                .contains("expired")
        );
        let no_hosts = json!({"secrets": [
            {"namespace": "a", "name": "x", "type": "kubernetes.io/tls", "content": "valid"}]});
        assert!(
            secret_documents(&no_hosts, &ca, &[])
                .unwrap_err()
                .contains("hosts")
        );
        assert!(!declares_secrets(&json!({"cases": []})));
    }
}
