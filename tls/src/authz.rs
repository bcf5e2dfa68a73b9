//! Authorization: which identity may make which call.
//!
//! | caller        | Raft | Fleet (as itself) | Admin |
//! |---------------|------|-------------------|-------|
//! | coordinator N | yes  | no                | no    |
//! | proxy ID      | no   | only as `ID`      | no    |
//! | admin NAME    | no   | no                | yes   |
//!
//! Everything else is `PERMISSION_DENIED`, logged with who asked for what.
//! With `--insecure` there are no identities and every call is allowed.
//! A request that carries no [`PeerInfo`] at all did not come through
//! [`crate::server::incoming`]: refused, never assumed harmless.

use crate::identity::Identity;
use crate::server::PeerInfo;
use tonic::{Request, Status};

/// What a call needs.
#[derive(Clone, Copy, Debug)]
pub enum Needed<'a> {
    /// A coordinator (Raft RPCs, forwarded proposals).
    Coordinator,
    /// An admin (apply, delete, status, membership).
    Admin,
    /// The proxy with this id (register, heartbeat, watch, report).
    Proxy(&'a str),
}

/// Allows the call or says why not.
pub fn authorize<T>(request: &Request<T>, needed: Needed<'_>, call: &str) -> Result<(), Status> {
    let Some(peer) = request.extensions().get::<PeerInfo>() else {
        tracing::warn!(call, "refused: request carries no connection identity");
        return Err(Status::permission_denied(format!(
            "{call}: no connection identity"
        )));
    };
    if !peer.tls {
        return Ok(());
    }
    let allowed = match (&peer.identity, needed) {
        (Some(Identity::Coordinator(_)), Needed::Coordinator) => true,
        (Some(Identity::Admin(_)), Needed::Admin) => true,
        (Some(Identity::Proxy(id)), Needed::Proxy(claimed)) => id == claimed,
        _ => false,
    };
    if allowed {
        return Ok(());
    }
    let who = peer.identity.as_ref().map_or_else(
        || "a certificate without identity".to_owned(),
        Identity::to_string,
    );
    let what = match needed {
        Needed::Coordinator => "a coordinator".to_owned(),
        Needed::Admin => "an admin".to_owned(),
        Needed::Proxy(id) => format!("proxy {id:?}"),
    };
    let remote = peer.remote.map(|r| r.to_string()).unwrap_or_default();
    tracing::warn!(call, caller = %who, %remote, "refused: {call} needs {what}");
    Err(Status::permission_denied(format!(
        "{call} needs {what}; the caller is {who}"
    )))
}

/// A tonic interceptor that lets through only callers that are `needed`
/// (for services whose every call needs the same role).
pub fn require(
    needed: Needed<'static>,
    service: &'static str,
) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |request: Request<()>| authorize(&request, needed, service).map(|()| request)
}
