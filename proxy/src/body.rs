//! The one body type the proxy hands to hyper in both directions, and small
//! constructors for bodies the proxy writes itself.
//!
//! It does not own any streaming logic (teeing to mirrors, returning
//! connections to pools): that lives with the upstream code that needs it.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};

/// Boxed error carried by proxy bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A boxed body: upstream responses, client request bodies, and the
/// proxy's own answers all become this, so one service type fits all.
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// A body with exactly these bytes.
pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An empty body.
pub fn empty() -> ProxyBody {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync()
}
