//! What a request must look like before it is routed: one `Host` naming
//! the host it is for (the [`host`] module), and its path in normal form
//! (the [`path`] module), written back into the request so that routing,
//! rewrites, redirects and the backend all see the same thing. A request
//! that cannot be made unambiguous is refused ([`BadRequest`], 400).
//!
//! It is the one entry point the server uses, and the one the property
//! tests drive.
//!
//! Not here: hop-by-hop and forwarding headers, which concern the upstream
//! request only (`service`'s request shaping).

use super::{host, path};
use crate::error::BadRequest;
use crate::settings::PathSettings;
use http::request;
use http::uri::{PathAndQuery, Uri};
use std::borrow::Cow;

/// Settles Host and normalizes the path of `parts` in place. Requests that
/// are already in normal form are not touched (and nothing is allocated).
pub fn settle(parts: &mut request::Parts, paths: &PathSettings) -> Result<(), BadRequest> {
    host::settle_host(parts).map_err(BadRequest::Host)?;
    normalize_uri(parts, paths).map_err(BadRequest::Path)
}

fn normalize_uri(parts: &mut request::Parts, paths: &PathSettings) -> Result<(), path::PathError> {
    let mut normal = match path::normalize(parts.uri.path(), paths)? {
        Cow::Borrowed(_) => return Ok(()),
        Cow::Owned(normal) => normal,
    };
    if let Some(query) = parts.uri.query() {
        normal.push('?');
        normal.push_str(query);
    }
    let path_and_query =
        PathAndQuery::try_from(normal).map_err(|_| path::PathError::BadPercentEncoding)?;
    let mut uri = std::mem::take(&mut parts.uri).into_parts();
    uri.path_and_query = Some(path_and_query);
    parts.uri = Uri::from_parts(uri).map_err(|_| path::PathError::BadPercentEncoding)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Version;

    fn settle_uri(uri: &str) -> Result<String, BadRequest> {
        let (mut parts, ()) = http::Request::get(uri)
            .version(Version::HTTP_11)
            .header("host", "h.example")
            .body(())
            .unwrap()
            .into_parts();
        settle(&mut parts, &PathSettings::default())?;
        Ok(parts.uri.to_string())
    }

    #[test]
    fn the_query_survives_and_the_path_is_normal() {
        assert_eq!(settle_uri("/a/../b?x=%2F..").unwrap(), "/b?x=%2F..");
        assert_eq!(
            settle_uri("http://other/a/./b").unwrap(),
            "http://other/a/b"
        );
        assert_eq!(settle_uri("/ok?q").unwrap(), "/ok?q");
        assert!(settle_uri("/a%2fb").is_err());
    }
}
