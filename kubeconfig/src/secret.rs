//! `Secret` into the model: its type and the `tls.crt` / `tls.key` entries
//! a Gateway listener's certificateRefs read; every other entry is dropped
//! here, so no other secret material reaches the coordinators' log.
//!
//! `stringData` wins over `data` for the same key, as the API server
//! merges them. Whether the PEM parses and the key matches is the
//! listener's status (`gateway_api::tls`), not a reason to refuse the
//! document.

use crate::convert::object_meta;
use crate::error::Problem;
use k8s_openapi::api::core::v1::Secret as K8sSecret;
use switchyard_proto::model::{Kind, PrivateKeyPem, Resource, Secret};

/// The key of the certificate chain in a `kubernetes.io/tls` Secret.
const CERTIFICATE_KEY: &str = "tls.crt";
/// The key of the private key in a `kubernetes.io/tls` Secret.
const PRIVATE_KEY_KEY: &str = "tls.key";

/// Translates a Secret.
pub(crate) fn secret(o: K8sSecret) -> Result<Resource, Problem> {
    let entry = |key: &str| -> Result<String, Problem> {
        if let Some(text) = o.string_data.as_ref().and_then(|d| d.get(key)) {
            return Ok(text.clone());
        }
        match o.data.as_ref().and_then(|d| d.get(key)) {
            None => Ok(String::new()),
            Some(bytes) => String::from_utf8(bytes.0.clone()).map_err(|_| {
                Problem::invalid(
                    format!("data[{key}]"),
                    "must be PEM text (it decodes from base64 to bytes that are not UTF-8)",
                )
            }),
        }
    };
    Ok(Resource::Secret(Secret {
        certificate_chain: entry(CERTIFICATE_KEY)?,
        private_key: PrivateKeyPem(entry(PRIVATE_KEY_KEY)?),
        secret_type: o.type_.clone().unwrap_or_else(|| "Opaque".into()),
        meta: object_meta(o.metadata, Kind::Secret)?,
    }))
}

#[cfg(test)]
mod tests {
    use crate::parse_documents;

    #[test]
    fn a_key_that_is_not_pem_text_is_refused_naming_the_entry() {
        // `/w==` decodes to the single byte 0xFF: not UTF-8.
        let yaml = "apiVersion: v1\nkind: Secret\nmetadata: {name: cert, namespace: shop}\n\
                    type: kubernetes.io/tls\ndata: {tls.crt: Y2VydA==, tls.key: /w==}\n";
        let error = parse_documents("secret.yaml", yaml)
            .expect_err("refused")
            .to_string();
        assert!(error.contains("data[tls.key]"), "{error}");
        assert!(error.contains("PEM text"), "{error}");
        assert!(error.contains("shop/cert"), "{error}");
    }
}
