//! The proxy's use of the Watch receiving rules
//! ([`switchyard_proto::watch`]): a refused update becomes a
//! [`ControlError`] naming the coordinator, so the stream logic can log it
//! and ask for a full snapshot.

use super::error::ControlError;
use switchyard_proto::model::ConfigSnapshot;
#[cfg(test)]
pub(super) use switchyard_proto::watch::Payload;
use switchyard_proto::watch::Refused;
pub(super) use switchyard_proto::watch::{Assembler, Received, Whole};

/// Reads one whole update from `coordinator`; see
/// [`switchyard_proto::watch::receive`].
pub(super) fn receive(
    coordinator: &str,
    held: u64,
    current: Option<&ConfigSnapshot>,
    resync: bool,
    update: Whole,
) -> Result<Received, ControlError> {
    let version = update.version;
    switchyard_proto::watch::receive(held, current, resync, update).map_err(|refused| match refused
    {
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
    })
}
