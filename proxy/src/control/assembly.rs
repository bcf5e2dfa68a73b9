//! The proxy's use of the Watch receiving rules
//! ([`switchyard_proto::watch`]): a refused update becomes a
//! [`ControlError`] naming the coordinator, so the stream logic can log it
//! and ask for a full snapshot. Deltas are applied in place on the
//! configuration the stream task owns ([`apply_delta`]: all or nothing).

use super::error::ControlError;
use switchyard_proto::model::{ConfigDelta, ConfigSnapshot};
#[cfg(test)]
pub(super) use switchyard_proto::watch::Received;
use switchyard_proto::watch::Refused;
pub(super) use switchyard_proto::watch::{Assembler, Decoded, Whole};
#[cfg(test)]
pub(super) use switchyard_proto::watch::{Encoded, Payload};

/// Payloads at least this large are decoded on a blocking thread.
const DECODED_ASIDE_FROM: usize = 64 * 1024;

/// Reads one whole update from `coordinator` without applying it; see
/// [`switchyard_proto::watch::decode`]. A large payload is decoded on a
/// blocking thread: a whole store (15 MB of JSON at 10,000 routes) takes
/// a second or more to decode, and on the runtime's thread it would hold
/// up serving and the heartbeats that keep this proxy's lease (a proxy
/// whose lease runs out meanwhile stops counting toward readiness).
pub(super) async fn decode(
    coordinator: &str,
    held: u64,
    holding: bool,
    resync: bool,
    update: Whole,
) -> Result<Decoded, ControlError> {
    let version = update.version;
    let large = update
        .payload
        .as_ref()
        .is_some_and(|(_, encoded)| encoded.bytes.len() >= DECODED_ASIDE_FROM);
    let decoded = if large {
        let decode = move || switchyard_proto::watch::decode(held, holding, resync, update);
        match super::aside(decode).await {
            Some(decoded) => decoded,
            // The runtime is shutting down and drops this task.
            None => std::future::pending().await,
        }
    } else {
        switchyard_proto::watch::decode(held, holding, resync, update)
    };
    decoded.map_err(|refused| refusal(coordinator, version, refused))
}

/// Applies `delta` (checked by [`decode`]) on `working`, all or nothing:
/// refused, `working` is unchanged and the stream must resync.
pub(super) fn apply_delta(
    coordinator: &str,
    working: &mut Option<ConfigSnapshot>,
    delta: &ConfigDelta,
) -> Result<(), ControlError> {
    let refused = |reason: String| ControlError::OutOfSequence {
        coordinator: coordinator.to_string(),
        version: delta.version,
        reason,
    };
    let Some(config) = working.as_mut() else {
        return Err(refused("a delta came before any snapshot".into()));
    };
    // Bare versions moved what is held past the snapshot's own version
    // without changing it: it is the configuration at the delta's base.
    let own = config.version;
    config.version = delta.base_version;
    config.apply_delta(delta).map_err(|e| {
        config.version = own;
        refused(e.to_string())
    })
}

fn refusal(coordinator: &str, version: u64, refused: Refused) -> ControlError {
    match refused {
        Refused::OutOfSequence(reason) => ControlError::OutOfSequence {
            coordinator: coordinator.to_string(),
            version,
            reason,
        },
        Refused::Decode(source) => ControlError::Decode {
            coordinator: coordinator.to_string(),
            version,
            source,
        },
        Refused::Encoding(reason) => ControlError::Encoding {
            coordinator: coordinator.to_string(),
            version,
            reason,
        },
    }
}

/// Reads one whole update from `coordinator`; see
/// [`switchyard_proto::watch::receive`].
#[cfg(test)]
pub(super) fn receive(
    coordinator: &str,
    held: u64,
    current: Option<&ConfigSnapshot>,
    resync: bool,
    update: Whole,
) -> Result<Received, ControlError> {
    let version = update.version;
    switchyard_proto::watch::receive(held, current, resync, update)
        .map_err(|refused| refusal(coordinator, version, refused))
}
