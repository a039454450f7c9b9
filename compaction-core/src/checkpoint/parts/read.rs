//! A manifest back into the whole checkpoint: which parts a row still needs ([`parts_needed`],
//! the manifest's, then the messages its runs name), and the whole checkpoint's JSON from the
//! manifest and its parts, each checked against its address, every field as stored (so a
//! message's raw argument text or an opaque block comes back byte for byte).

use super::verified::check_part;
use super::write::serialize_error;
use super::MANIFEST_VERSION;
use crate::binding::CheckpointBinding;
use crate::checkpoint::backend::CheckpointError;
use crate::checkpoint::compacted::Compacted;
use crate::checkpoint::row::CheckpointPart;
use crate::checkpoint::transcript_record::MessageDigests;
use crate::store::ContentHash;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::{HashMap, HashSet};

/// A manifest as read: every field the checkpoint keeps as the exact JSON text stored, the
/// parts by hash.
#[derive(Deserialize)]
pub(super) struct ManifestIn<'a> {
    parts: u32,
    #[serde(borrow)]
    format: &'a RawValue,
    #[serde(borrow)]
    state_type: &'a RawValue,
    #[serde(borrow)]
    schema: &'a RawValue,
    #[serde(borrow)]
    budget: &'a RawValue,
    pub(super) front: Vec<ContentHash>,
    #[serde(borrow)]
    tokens: &'a RawValue,
    #[serde(borrow)]
    report: &'a RawValue,
    #[serde(borrow, default)]
    pub(super) transcript: Option<TranscriptIn<'a>>,
    #[serde(borrow, default)]
    binding: Option<&'a RawValue>,
    #[serde(borrow)]
    seal: &'a RawValue,
    #[serde(borrow, default)]
    keyed_seal: Option<&'a RawValue>,
}

#[derive(Deserialize)]
pub(super) struct TranscriptIn<'a> {
    #[serde(borrow)]
    path: &'a RawValue,
    pub(super) runs: Vec<ContentHash>,
    #[serde(borrow)]
    tokens: &'a RawValue,
    #[serde(borrow)]
    request_tokens: &'a RawValue,
    #[serde(borrow)]
    reused: &'a RawValue,
    #[serde(borrow)]
    pub(super) memory: RecordIn<'a>,
    #[serde(default)]
    window: Option<Vec<ContentHash>>,
}

#[derive(Deserialize)]
pub(super) struct RecordIn<'a> {
    #[serde(borrow)]
    len: &'a RawValue,
    #[serde(borrow)]
    link: &'a RawValue,
    pub(super) blocks: Vec<ContentHash>,
    pub(super) handles: Vec<ContentHash>,
    #[serde(borrow)]
    reused: &'a RawValue,
    #[serde(borrow)]
    compacted: &'a RawValue,
    #[serde(borrow, default)]
    opening: Option<&'a RawValue>,
    #[serde(borrow)]
    counter: &'a RawValue,
}

/// One run as read: each message's planner slot (as stored) and its part's hash.
type RunIn<'a> = Vec<(&'a RawValue, ContentHash)>;

/// The front part as read, its fields as stored.
#[derive(Deserialize)]
struct FrontIn<'a> {
    #[serde(borrow)]
    entries: &'a RawValue,
    #[serde(borrow)]
    shapes: &'a RawValue,
    #[serde(borrow)]
    window: &'a RawValue,
}

/// The whole checkpoint, written from a manifest and its parts: the checkpoint's own keys.
#[derive(Serialize)]
struct WholeOut<'a> {
    format: &'a RawValue,
    state_type: &'a RawValue,
    schema: &'a RawValue,
    budget: &'a RawValue,
    entries: &'a RawValue,
    shapes: &'a RawValue,
    window: &'a RawValue,
    tokens: &'a RawValue,
    report: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    transcript: Option<TranscriptWhole<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    binding: Option<&'a RawValue>,
    seal: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    keyed_seal: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct TranscriptWhole<'a> {
    path: &'a RawValue,
    messages: Vec<&'a RawValue>,
    tokens: &'a RawValue,
    request_tokens: &'a RawValue,
    reused: &'a RawValue,
    memory: RecordWhole<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct RecordWhole<'a> {
    len: &'a RawValue,
    link: &'a RawValue,
    slots: Vec<&'a RawValue>,
    blocks: &'a RawValue,
    handles: &'a RawValue,
    reused: &'a RawValue,
    compacted: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    opening: Option<&'a RawValue>,
    counter: &'a RawValue,
}

/// Parses a manifest: `Integrity` when it is not one this version reads.
pub(super) fn manifest(json: &[u8]) -> Result<ManifestIn<'_>, CheckpointError> {
    let manifest: ManifestIn<'_> =
        serde_json::from_slice(json).map_err(|_| CheckpointError::Integrity)?;
    if manifest.parts != MANIFEST_VERSION {
        return Err(CheckpointError::Integrity);
    }
    Ok(manifest)
}

/// The parts a manifest names itself (not the messages its runs name), each once, in order.
pub(super) fn manifest_parts(manifest: &ManifestIn<'_>) -> Vec<ContentHash> {
    let mut out = manifest.front.clone();
    if let Some(t) = &manifest.transcript {
        out.extend(&t.runs);
        out.extend(&t.memory.blocks);
        out.extend(&t.memory.handles);
        out.extend(t.window.iter().flatten());
    }
    out
}

/// The messages a run's bytes name (`Integrity` when they do not parse as a run).
pub(super) fn run_messages(bytes: &[u8]) -> Result<Vec<ContentHash>, CheckpointError> {
    let run: RunIn<'_> = serde_json::from_slice(bytes).map_err(|_| CheckpointError::Integrity)?;
    Ok(run.into_iter().map(|(_, hash)| hash).collect())
}

/// The parts a manifest row names that are not among `attached` yet: first the manifest's own,
/// then the messages of the runs attached. Empty once the row can be assembled (or a part is
/// missing from the store: then assembling says which).
pub(crate) fn parts_needed(
    json: &[u8],
    attached: &[CheckpointPart],
) -> Result<Vec<ContentHash>, CheckpointError> {
    let manifest = manifest(json)?;
    let held: HashMap<&ContentHash, &[u8]> =
        attached.iter().map(|p| (&p.hash, &p.bytes[..])).collect();
    let mut named = manifest_parts(&manifest);
    if let Some(t) = &manifest.transcript {
        for run in &t.runs {
            if let Some(bytes) = held.get(run) {
                named.extend(run_messages(bytes)?);
            }
        }
    }
    let mut seen = HashSet::new();
    Ok(named
        .into_iter()
        .filter(|hash| !held.contains_key(hash) && seen.insert(*hash))
        .collect())
}

/// What a manifest says of where it belongs, read before its parts are: its binding, and
/// whether it has a keyed seal.
pub(crate) struct ManifestHead {
    pub(crate) binding: Option<CheckpointBinding>,
    pub(crate) keyed: bool,
}

/// The binding and keyed-seal presence of manifest bytes: `Integrity` when they do not parse.
pub(crate) fn manifest_head(json: &[u8]) -> Result<ManifestHead, CheckpointError> {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(default)]
        binding: Option<CheckpointBinding>,
        #[serde(borrow, default)]
        keyed_seal: Option<&'a RawValue>,
    }
    let head: Head<'_> = serde_json::from_slice(json).map_err(|_| CheckpointError::Integrity)?;
    Ok(ManifestHead {
        binding: head.binding,
        keyed: head.keyed_seal.is_some(),
    })
}

/// The whole checkpoint a manifest and its parts stand for: `Integrity` when a part is missing
/// from `parts`, its bytes do not hash to its address, or anything does not parse.
pub(crate) fn assemble<S>(
    json: &[u8],
    parts: &[CheckpointPart],
) -> Result<Compacted<S>, CheckpointError> {
    let (whole, digests) = assemble_json(json, parts)?;
    let mut compacted: Compacted<S> =
        serde_json::from_slice(&whole).map_err(|_| CheckpointError::Integrity)?;
    if let Some(transcript) = compacted.transcript.as_mut() {
        // Each message parsed from bytes whose SHA-256 was just checked to be this digest: the
        // seal's digests, without hashing every message again.
        transcript.digests = MessageDigests(digests);
    }
    Ok(compacted)
}

/// The whole checkpoint's JSON a manifest and its parts stand for (each part checked against
/// its address).
pub(crate) fn whole_json(
    json: &[u8],
    parts: &[CheckpointPart],
) -> Result<Vec<u8>, CheckpointError> {
    assemble_json(json, parts).map(|(whole, _)| whole)
}

/// `bytes` as one JSON value, kept as written.
fn raw(bytes: &[u8]) -> Result<&RawValue, CheckpointError> {
    serde_json::from_slice(bytes).map_err(|_| CheckpointError::Integrity)
}

/// The whole checkpoint's JSON a manifest and its parts stand for, and its messages' digests.
fn assemble_json(
    json: &[u8],
    parts: &[CheckpointPart],
) -> Result<(Vec<u8>, Vec<ContentHash>), CheckpointError> {
    let by_hash: HashMap<&ContentHash, &[u8]> =
        parts.iter().map(|p| (&p.hash, &p.bytes[..])).collect();
    let part = |hash: &ContentHash| -> Result<&[u8], CheckpointError> {
        let bytes = by_hash.get(hash).ok_or(CheckpointError::Integrity)?;
        if !check_part(hash, bytes) {
            return Err(CheckpointError::Integrity);
        }
        Ok(bytes)
    };
    // A chunked part's bytes: its chunks, each checked, put back together.
    let joined = |hashes: &[ContentHash]| -> Result<Vec<u8>, CheckpointError> {
        let mut bytes = Vec::new();
        for hash in hashes {
            bytes.extend_from_slice(part(hash)?);
        }
        Ok(bytes)
    };
    let manifest = manifest(json)?;
    let front_bytes = joined(&manifest.front)?;
    let front: FrontIn<'_> =
        serde_json::from_slice(&front_bytes).map_err(|_| CheckpointError::Integrity)?;
    let (window_bytes, blocks_bytes, handles_bytes) = match &manifest.transcript {
        Some(t) => (
            t.window.as_deref().map(joined).transpose()?,
            joined(&t.memory.blocks)?,
            joined(&t.memory.handles)?,
        ),
        None => (None, Vec::new(), Vec::new()),
    };
    let mut digests = Vec::new();
    let transcript = match &manifest.transcript {
        None => None,
        Some(t) => {
            let (mut slots, mut messages) = (Vec::new(), Vec::new());
            for run in &t.runs {
                let run: RunIn<'_> =
                    serde_json::from_slice(part(run)?).map_err(|_| CheckpointError::Integrity)?;
                for (slot, hash) in run {
                    slots.push(slot);
                    messages.push(raw(part(&hash)?)?);
                    digests.push(hash);
                }
            }
            let window = window_bytes.as_deref().map(raw).transpose()?;
            let m = &t.memory;
            Some(TranscriptWhole {
                path: t.path,
                messages,
                tokens: t.tokens,
                request_tokens: t.request_tokens,
                reused: t.reused,
                memory: RecordWhole {
                    len: m.len,
                    link: m.link,
                    slots,
                    blocks: raw(&blocks_bytes)?,
                    handles: raw(&handles_bytes)?,
                    reused: m.reused,
                    compacted: m.compacted,
                    opening: m.opening,
                    counter: m.counter,
                },
                window,
            })
        }
    };
    let whole = WholeOut {
        format: manifest.format,
        state_type: manifest.state_type,
        schema: manifest.schema,
        budget: manifest.budget,
        entries: front.entries,
        shapes: front.shapes,
        window: front.window,
        tokens: manifest.tokens,
        report: manifest.report,
        transcript,
        binding: manifest.binding,
        seal: manifest.seal,
        keyed_seal: manifest.keyed_seal,
    };
    let bytes = serde_json::to_vec(&whole).map_err(serialize_error)?;
    Ok((bytes, digests))
}
