//! Paths of cluster-scoped objects (`/api/v1/nodes/NAME`,
//! `/apis/GROUP/VERSION/PLURAL/NAME`), so the fake serves single-object
//! GETs of them as it does for namespaced ones: `switchyard node-zone`
//! reads one Node this way.
//!
//! Owns only the parsing. Does not own: listing or watching cluster-scoped
//! kinds (the collections in [`super::COLLECTIONS`] do that), subresources
//! of cluster-scoped objects (none is served).

/// `/api/v/plural/name` or `/apis/g/v/plural/name` into (collection, "",
/// name, no subresource); `None` for any other shape.
pub(super) fn parse_path(path: &str) -> Option<(String, String, String, Option<String>)> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (collection, name) = match parts.as_slice() {
        ["api", v, plural, name] => (format!("/api/{v}/{plural}"), name),
        ["apis", g, v, plural, name] => (format!("/apis/{g}/{v}/{plural}"), name),
        _ => return None,
    };
    Some((collection, String::new(), name.to_string(), None))
}

#[cfg(test)]
mod tests {
    use super::parse_path;

    #[test]
    fn cluster_scoped_paths_parse_and_others_do_not() {
        assert_eq!(
            parse_path("/api/v1/nodes/node-a"),
            Some(("/api/v1/nodes".into(), String::new(), "node-a".into(), None))
        );
        assert_eq!(
            parse_path("/apis/gateway.networking.k8s.io/v1/gatewayclasses/ours"),
            Some((
                "/apis/gateway.networking.k8s.io/v1/gatewayclasses".into(),
                String::new(),
                "ours".into(),
                None
            ))
        );
        for other in ["/api/v1/nodes", "/apis/g/v/plural/name/status", "/version"] {
            assert_eq!(parse_path(other), None, "{other}");
        }
    }
}
