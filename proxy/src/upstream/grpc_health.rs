//! The gRPC health-checking protocol (`grpc.health.v1.Health/Check`) as a
//! warm-up probe: the request, and whether an answer says `SERVING`.
//!
//! Written by hand rather than generated: the request is a constant (an
//! empty `HealthCheckRequest`, i.e. the server's overall health) and the
//! answer has one field worth reading, so five bytes of framing and a
//! varint reader replace a code generator and a gRPC client stack on the
//! probe path. The probe runs over the endpoint's own HTTP/2 connection,
//! the one calls use.

use super::discovery::GRPC_HEALTH_PATH;
use crate::body::{self, ProxyBody};
use bytes::Bytes;
use http::Request;
use http::response::Parts;
use http_body_util::Collected;
use std::net::SocketAddr;

/// `HealthCheckResponse.ServingStatus.SERVING`.
const SERVING: u64 = 1;

/// `POST /grpc.health.v1.Health/Check` with an empty request message.
pub(crate) fn request(addr: SocketAddr) -> Option<Request<ProxyBody>> {
    // One uncompressed message of length 0: `HealthCheckRequest { service: "" }`.
    const EMPTY_MESSAGE: [u8; 5] = [0, 0, 0, 0, 0];
    Request::post(GRPC_HEALTH_PATH)
        .header(http::header::HOST, addr.to_string())
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::USER_AGENT, "switchyard-health-check")
        .body(body::full(Bytes::from_static(&EMPTY_MESSAGE)))
        .ok()
}

/// Whether the answer is HTTP 200 with `grpc-status: 0` (in the trailers,
/// or in the head of a trailers-only answer) and one message whose
/// `status` is `SERVING`.
pub(crate) fn serving(head: &Parts, body: Collected<Bytes>) -> bool {
    if head.status != http::StatusCode::OK {
        return false;
    }
    let grpc_ok = |headers: &http::HeaderMap| {
        headers
            .get("grpc-status")
            .is_some_and(|s| s.as_bytes() == b"0")
    };
    let ok = body.trailers().is_some_and(grpc_ok) || grpc_ok(&head.headers);
    ok && message(&body.to_bytes()).and_then(status_field) == Some(SERVING)
}

/// The payload of the single uncompressed message of a gRPC body.
fn message(body: &[u8]) -> Option<&[u8]> {
    let (&compressed, rest) = body.split_first()?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let payload = rest.get(4..4 + len)?;
    (compressed == 0 && rest.len() == 4 + len).then_some(payload)
}

/// Field 1 (`status`, a varint) of a `HealthCheckResponse`; 0 (`UNKNOWN`)
/// when absent, as protobuf defaults it. `None` on malformed input.
fn status_field(mut payload: &[u8]) -> Option<u64> {
    let mut status = 0;
    while !payload.is_empty() {
        let key = varint(&mut payload)?;
        match (key >> 3, key & 7) {
            (1, 0) => status = varint(&mut payload)?,
            (_, 0) => {
                varint(&mut payload)?;
            }
            (_, 1) => payload = payload.get(8..)?,
            (_, 2) => {
                let len = usize::try_from(varint(&mut payload)?).ok()?;
                payload = payload.get(len..)?;
            }
            (_, 5) => payload = payload.get(4..)?,
            _ => return None,
        }
    }
    Some(status)
}

fn varint(input: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = input.split_first()?;
        *input = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend((payload.len() as u32).to_be_bytes());
        out.extend(payload);
        out
    }

    #[test]
    fn the_status_field_is_read_past_other_fields() {
        assert_eq!(
            message(&framed(&[0x08, 0x01])).and_then(status_field),
            Some(1)
        );
        // NOT_SERVING.
        assert_eq!(
            message(&framed(&[0x08, 0x02])).and_then(status_field),
            Some(2)
        );
        // An empty message is UNKNOWN (0), not SERVING.
        assert_eq!(message(&framed(&[])).and_then(status_field), Some(0));
        // An unknown length-delimited field 2 before the status.
        assert_eq!(
            message(&framed(&[0x12, 0x02, b'h', b'i', 0x08, 0x01])).and_then(status_field),
            Some(1)
        );
    }

    #[test]
    fn malformed_bodies_are_not_serving() {
        // Compressed flag, truncated length, trailing garbage, bad varint.
        assert_eq!(message(&[1, 0, 0, 0, 2, 0x08, 0x01]), None);
        assert_eq!(message(&[0, 0, 0]), None);
        let mut extra = framed(&[0x08, 0x01]);
        extra.push(0);
        assert_eq!(message(&extra), None);
        assert_eq!(status_field(&[0x08]), None);
        assert_eq!(status_field(&[0x0b]), None);
    }
}
