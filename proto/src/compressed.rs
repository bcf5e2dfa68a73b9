//! The compressed form of a watch payload (`PAYLOAD_ENCODING_LZ4`): one
//! LZ4 block of the payload's JSON, preceded by the JSON's length as a
//! little-endian `u32`.
//!
//! Why: a full snapshot of 10,000 routes is about 14 MB of JSON, and 200
//! proxies resyncing at once are sent 2.8 GB of it, which costs the
//! coordinator's copies and syscalls and the proxies' reads in proportion.
//! Generated Gateway API objects repeat themselves, so LZ4 takes most of
//! that away, and it decompresses at memory speed. The coordinator
//! compresses each payload once for every watcher that accepts it.
//!
//! Owns: which payloads are worth compressing, the format, and reading it
//! back with the claimed length checked before anything is allocated (a
//! payload that claims more than LZ4 can expand to is refused). Does not
//! own when a payload is sent compressed (`coordinator::server::fleet`) nor
//! the chunks (`watch`).

/// Payloads shorter than this travel as plain JSON: compressing them
/// saves less than a message's framing.
pub const MIN_BYTES: usize = 4 * 1024;

/// The most an LZ4 block expands: a match's length takes one more byte
/// per 255 bytes it copies, so no block decompresses to more than 255
/// times its size (plus a few bytes of its last sequence).
const MAX_EXPANSION: usize = 255;

/// Bytes of the length that precedes the block.
const LENGTH_BYTES: usize = 4;

/// Whether a payload of `json_len` bytes goes compressed to a watcher that
/// accepts it.
pub fn worth_compressing(json_len: usize) -> bool {
    json_len >= MIN_BYTES && u32::try_from(json_len).is_ok()
}

/// `json` in the compressed form.
pub fn compress(json: &[u8]) -> Vec<u8> {
    lz4_flex::block::compress_prepend_size(json)
}

/// The JSON of a payload in the compressed form, or why it is not one.
pub fn decompress(payload: &[u8]) -> Result<Vec<u8>, String> {
    let Some((length, block)) = payload.split_first_chunk::<LENGTH_BYTES>() else {
        return Err(format!(
            "an LZ4 payload of {} bytes is too short to hold its length",
            payload.len()
        ));
    };
    let claimed = u32::from_le_bytes(*length) as usize;
    let most = block.len().saturating_mul(MAX_EXPANSION).saturating_add(64);
    if claimed > most {
        return Err(format!(
            "an LZ4 payload of {} bytes claims {claimed} bytes of JSON, more than it can hold",
            payload.len()
        ));
    }
    let json = lz4_flex::block::decompress(block, claimed)
        .map_err(|e| format!("its LZ4 payload does not decompress: {e}"))?;
    if json.len() != claimed {
        return Err(format!(
            "its LZ4 payload claims {claimed} bytes of JSON and holds {}",
            json.len()
        ));
    }
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes_json(n: usize) -> Vec<u8> {
        let routes: Vec<_> = (0..n)
            .map(|i| {
                serde_json::json!({
                    "kind": "HTTPRoute",
                    "name": format!("route-{i}"),
                    "namespace": "bench",
                    "hostnames": [format!("r{i}.example.com")],
                    "backend": format!("bench/svc-{i}:80"),
                })
            })
            .collect();
        serde_json::to_vec(&routes).unwrap()
    }

    #[test]
    fn a_payload_comes_back_as_it_was_and_smaller() {
        let json = routes_json(500);
        let packed = compress(&json);
        assert!(
            packed.len() * 3 < json.len(),
            "{} bytes from {}",
            packed.len(),
            json.len()
        );
        assert_eq!(decompress(&packed).unwrap(), json);
    }

    #[test]
    fn small_payloads_stay_plain() {
        assert!(!worth_compressing(MIN_BYTES - 1));
        assert!(worth_compressing(MIN_BYTES));
    }

    #[test]
    fn a_payload_claiming_more_than_lz4_expands_to_is_refused_before_allocating() {
        let mut packed = compress(&routes_json(10));
        packed[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let why = decompress(&packed).unwrap_err();
        assert!(why.contains("more than it can hold"), "{why}");
    }

    #[test]
    fn a_truncated_or_lying_payload_is_refused() {
        let json = routes_json(50);
        let packed = compress(&json);
        let why = decompress(&packed[..packed.len() / 2]).unwrap_err();
        assert!(why.contains("LZ4 payload"), "{why}");
        let why = decompress(&packed[..3]).unwrap_err();
        assert!(why.contains("too short"), "{why}");
        // A claim one byte short of the truth.
        let mut short = packed.clone();
        short[..4].copy_from_slice(&(json.len() as u32 - 1).to_le_bytes());
        assert!(decompress(&short).is_err());
    }
}
