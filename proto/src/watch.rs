//! The receiving side of `FleetService.Watch`: turning the messages of one
//! stream into whole updates — chunks assembled ([`Assembler`]) — and what
//! a whole update means for the configuration held ([`receive`]: older
//! ones dropped, a bare version noted, a snapshot decoded, a delta decoded
//! and applied on a copy of the configuration held).
//!
//! Owns the chunk rules of `ConfigUpdate` (consecutive chunks of one
//! version and encoding, nothing in between, nothing used before the
//! last), reading a compressed payload back ([`Encoded::to_json`]), and the
//! sequence rules of deltas (a delta or bare version must be based on
//! exactly the version held). Whatever breaks them is refused and nothing
//! of it is used: a watcher never holds a half-applied change. Every
//! watcher uses this one copy of the rules: the proxy's control client and
//! the load tool's simulated proxies. Does not own the stream, nor what to
//! do after a refusal (resync), which are the watcher's.
//!
//! Cost per delta: decoding it (O(C)), and — through [`receive`] —
//! applying it on a copy of the held snapshot: a clone of the snapshot,
//! O(R), plus O(R + C log C) for the lists it touches. A watcher that
//! keeps its own structure takes [`decode`]'s checked delta and applies it
//! itself, in O(C).

use crate::model::{ConfigDelta, ConfigSnapshot};
use crate::{compressed, pb};
use prost::bytes::Bytes;

/// Which field a payload travels in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// `snapshot_json`: a whole `ConfigSnapshot`.
    Snapshot,
    /// `delta_json`: a `ConfigDelta`.
    Delta,
}

/// A whole payload as it came: its bytes, and whether they are the JSON
/// itself or its compressed form ([`crate::compressed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// `PAYLOAD_ENCODING_LZ4`.
    pub compressed: bool,
    /// The bytes, chunks concatenated.
    pub bytes: Bytes,
}

impl Encoded {
    /// Plain JSON.
    pub fn json(bytes: Bytes) -> Encoded {
        Encoded {
            compressed: false,
            bytes,
        }
    }

    /// The payload's JSON: the bytes themselves, or decompressed (a copy
    /// of the payload's length times the compression ratio).
    pub fn to_json(&self) -> Result<Bytes, Refused> {
        if !self.compressed {
            return Ok(self.bytes.clone());
        }
        compressed::decompress(&self.bytes)
            .map(Bytes::from)
            .map_err(Refused::Encoding)
    }
}

/// One whole update, its chunks (if any) assembled.
#[derive(Debug, PartialEq, Eq)]
pub struct Whole {
    /// Its version.
    pub version: u64,
    /// The version a delta or bare version is based on (0: unsaid).
    pub base: u64,
    /// The payload, `None` for a bare version.
    pub payload: Option<(Payload, Encoded)>,
}

/// The chunks of one payload received so far.
#[derive(Debug)]
struct Partial {
    version: u64,
    base: u64,
    kind: Payload,
    compressed: bool,
    count: u32,
    received: u32,
    bytes: Vec<u8>,
}

/// Assembles the chunks of one stream. A new stream gets a new one: what
/// a broken stream left half-received is dropped with it.
#[derive(Debug, Default)]
pub struct Assembler {
    partial: Option<Partial>,
}

impl Assembler {
    /// Takes the next message of the stream: `Ok(None)` while a payload
    /// waits for more chunks, the whole update once its last chunk is
    /// in, or why the message does not fit the sequence (the partial
    /// payload is dropped).
    pub fn push(&mut self, update: pb::ConfigUpdate) -> Result<Option<Whole>, String> {
        let version = update.version;
        let compressed = match pb::PayloadEncoding::try_from(update.encoding) {
            Ok(pb::PayloadEncoding::Json) => false,
            Ok(pb::PayloadEncoding::Lz4) => true,
            Err(_) => {
                self.partial = None;
                return Err(format!("unknown payload encoding {}", update.encoding));
            }
        };
        let (kind, bytes) = match (
            update.snapshot_json.is_empty(),
            update.delta_json.is_empty(),
        ) {
            (true, true) => (None, Bytes::new()),
            (false, true) => (Some(Payload::Snapshot), update.snapshot_json),
            (true, false) => (Some(Payload::Delta), update.delta_json),
            (false, false) => {
                self.partial = None;
                return Err("it carries both a snapshot and a delta".into());
            }
        };
        let (index, count) = (update.chunk_index, update.chunk_count);
        if count <= 1 {
            if let Some(p) = self.partial.take() {
                return Err(format!(
                    "a whole update came after chunk {} of {} of version {}",
                    p.received, p.count, p.version
                ));
            }
            if index != 0 {
                return Err(format!("chunk {index} of a one-chunk payload"));
            }
            return Ok(Some(Whole {
                version,
                base: update.base_version,
                payload: kind.map(|k| (k, Encoded { compressed, bytes })),
            }));
        }
        let Some(kind) = kind else {
            self.partial = None;
            return Err(format!("chunk {index} of {count} is empty"));
        };
        let mut partial = match self.partial.take() {
            None if index == 0 => Partial {
                version,
                base: update.base_version,
                kind,
                compressed,
                count,
                received: 0,
                bytes: Vec::with_capacity(bytes.len().saturating_mul(count as usize)),
            },
            None => return Err(format!("chunk {index} of {count} came without chunk 0")),
            Some(p) => {
                let expected = (p.version, p.base, p.kind, p.compressed, p.count, p.received);
                if (version, update.base_version, kind, compressed, count, index) != expected {
                    return Err(format!(
                        "chunk {index} of {count} of version {version} came where chunk {} of {} of version {} was due",
                        p.received, p.count, p.version
                    ));
                }
                p
            }
        };
        partial.bytes.extend_from_slice(&bytes);
        partial.received += 1;
        if partial.received < partial.count {
            self.partial = Some(partial);
            return Ok(None);
        }
        Ok(Some(Whole {
            version: partial.version,
            base: partial.base,
            payload: Some((
                partial.kind,
                Encoded {
                    compressed: partial.compressed,
                    bytes: Bytes::from(partial.bytes),
                },
            )),
        }))
    }
}

/// What one whole update means to a stream holding `held`.
#[derive(Debug)]
pub enum Received {
    /// No newer than what is held (a coordinator behind another): dropped.
    Stale,
    /// Only the version moved (a registration, say): what is held is
    /// current at this version.
    Version(u64),
    /// A new configuration (from a snapshot, or a delta applied on the
    /// one held), at this version. Boxed: it is large and the other
    /// variants are a word.
    Snapshot(u64, Box<ConfigSnapshot>),
}

/// Why a whole update cannot be taken.
#[derive(Debug)]
pub enum Refused {
    /// It does not follow what is held (wrong base, a change while a full
    /// snapshot was asked for, a delta that does not apply).
    OutOfSequence(String),
    /// Its JSON does not decode.
    Decode(serde_json::Error),
    /// Its compressed payload does not decompress (why, in words).
    Encoding(String),
}

/// What one whole update says, decoded and checked against the sequence
/// held, before anything is applied.
#[derive(Debug)]
pub enum Decoded {
    /// No newer than what is held: dropped.
    Stale,
    /// Only the version moved.
    Version(u64),
    /// A whole configuration at this version.
    Snapshot(u64, ConfigSnapshot),
    /// The changes from exactly the version held to this one, to apply
    /// all or nothing on the configuration held.
    Delta(u64, ConfigDelta),
}

/// Whether a whole snapshot at `version` is no news to a watcher holding
/// version `held` ([`decode`]'s rule, for watchers that look at a
/// snapshot's bytes before decoding them): older, or the same version
/// when the watcher did not ask for a full snapshot again (`resync`).
pub fn snapshot_is_stale(held: u64, resync: bool, version: u64) -> bool {
    version < held || (version == held && !resync)
}

/// What a whole update asks of a watcher by the sequence rules alone,
/// before its payload is decoded.
#[derive(Debug)]
pub enum Step {
    /// No newer than what is held: dropped.
    Stale,
    /// Only the version moved.
    Version(u64),
    /// A whole configuration at this version, still encoded.
    Snapshot(u64, Encoded),
    /// The changes from exactly the version held to `version`, still
    /// encoded: [`decode_delta`] checks that they say so themselves.
    Delta {
        /// The version they lead to.
        version: u64,
        /// The version they apply on (the one held).
        base: u64,
        /// Their payload.
        payload: Encoded,
    },
}

/// [`decode`]'s sequence rules without the decoding: for watchers that
/// look at a payload's bytes first (the load tool's agents share the
/// decode of identical bytes). Every rule [`decode`] applies before
/// decoding is here, and [`decode`] applies them through this.
pub fn step(held: u64, holding: bool, resync: bool, update: Whole) -> Result<Step, Refused> {
    let version = update.version;
    let out_of_sequence = Refused::OutOfSequence;
    match update.payload {
        Some((Payload::Snapshot, payload)) => {
            if snapshot_is_stale(held, resync, version) {
                return Ok(Step::Stale);
            }
            Ok(Step::Snapshot(version, payload))
        }
        _ if version <= held => Ok(Step::Stale),
        _ if resync => Err(out_of_sequence(
            "a full snapshot was asked for and a change came".into(),
        )),
        // A bare version from a coordinator older than `base_version`.
        None if update.base == 0 => Ok(Step::Version(version)),
        _ if update.base != held => Err(out_of_sequence(format!(
            "it is based on version {}, this proxy holds {held}",
            update.base
        ))),
        None => Ok(Step::Version(version)),
        Some((Payload::Delta, _)) if !holding => {
            Err(out_of_sequence("a delta came before any snapshot".into()))
        }
        Some((Payload::Delta, payload)) => Ok(Step::Delta {
            version,
            base: update.base,
            payload,
        }),
    }
}

/// Decodes a delta [`step`] let through, and checks it goes from `base`
/// to `version` as its update said.
pub fn decode_delta(version: u64, base: u64, json: &[u8]) -> Result<ConfigDelta, Refused> {
    let delta: ConfigDelta = serde_json::from_slice(json).map_err(Refused::Decode)?;
    if (delta.base_version, delta.version) != (base, version) {
        return Err(Refused::OutOfSequence(format!(
            "its delta goes from {} to {}, the update says {base} to {version}",
            delta.base_version, delta.version
        )));
    }
    Ok(delta)
}

/// What one whole update means to a watcher holding version `held`, and a
/// configuration if `holding`, without applying anything: for watchers
/// that keep their own structure and apply a delta to it themselves (all
/// or nothing). `resync`: the watcher asked for a full snapshot after an
/// error, and takes one at `held` itself too (its copy at `held` may be
/// the wrong one).
pub fn decode(held: u64, holding: bool, resync: bool, update: Whole) -> Result<Decoded, Refused> {
    match step(held, holding, resync, update)? {
        Step::Stale => Ok(Decoded::Stale),
        Step::Version(version) => Ok(Decoded::Version(version)),
        Step::Snapshot(version, payload) => serde_json::from_slice(&payload.to_json()?)
            .map(|snapshot| Decoded::Snapshot(version, snapshot))
            .map_err(Refused::Decode),
        Step::Delta {
            version,
            base,
            payload,
        } => decode_delta(version, base, &payload.to_json()?)
            .map(|delta| Decoded::Delta(version, delta)),
    }
}

/// What one whole update means to a watcher holding version `held` and
/// configuration `current` (if any). `resync`: as for [`decode`]. A delta
/// is applied on a copy of `current`; nothing held is changed here.
pub fn receive(
    held: u64,
    current: Option<&ConfigSnapshot>,
    resync: bool,
    update: Whole,
) -> Result<Received, Refused> {
    match decode(held, current.is_some(), resync, update)? {
        Decoded::Stale => Ok(Received::Stale),
        Decoded::Version(version) => Ok(Received::Version(version)),
        Decoded::Snapshot(version, snapshot) => Ok(Received::Snapshot(version, Box::new(snapshot))),
        Decoded::Delta(version, delta) => {
            let Some(current) = current else {
                return Err(Refused::OutOfSequence(
                    "a delta came before any snapshot".into(),
                ));
            };
            let mut next = current.clone();
            // Bare versions moved what is held past the snapshot's own
            // version without changing it: it is the configuration at
            // `held`.
            next.version = delta.base_version;
            next.apply_delta(&delta)
                .map_err(|e| Refused::OutOfSequence(e.to_string()))?;
            Ok(Received::Snapshot(version, Box::new(next)))
        }
    }
}
