//! A checkpoint into its manifest and parts (see the module's notes for the layout).

use super::chunks::cut;
use super::MANIFEST_VERSION;
use crate::binding::CheckpointBinding;
use crate::checkpoint::backend::CheckpointError;
use crate::checkpoint::compacted::Compacted;
use crate::checkpoint::fingerprint::SchemaFingerprint;
use crate::checkpoint::row::CheckpointPart;
use crate::checkpoint::seal::KeyedSeal;
use crate::checkpoint::transcript_record::CompactedTranscript;
use crate::conversation::transcript::Link;
use crate::planner::memory::SlotMeta;
use crate::report::CompactionReport;
use crate::state::path::Shape;
use crate::store::ContentHash;
use crate::window::field::Entry;
use serde::Serialize;
use std::collections::HashSet;

/// One run ends after a message whose digest's first byte is a multiple of this (so a run holds
/// this many messages on average), wherever the message sits: an append leaves every earlier
/// run as it was, and rewrites only the last.
const RUN_SPLIT: u8 = 8;

/// The most messages one run holds.
const RUN_MAX: usize = 32;

/// The manifest as written: the checkpoint's fields, with the parts' hashes in place of the
/// parts. Its keys are the checkpoint's own (`read.rs` puts each part back in its place).
#[derive(Serialize)]
struct ManifestOut<'a> {
    parts: u32,
    format: u32,
    state_type: &'a str,
    schema: &'a SchemaFingerprint,
    budget: usize,
    front: Vec<ContentHash>,
    tokens: usize,
    report: &'a CompactionReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    transcript: Option<TranscriptOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    binding: Option<&'a CheckpointBinding>,
    seal: ContentHash,
    #[serde(skip_serializing_if = "Option::is_none")]
    keyed_seal: Option<&'a KeyedSeal>,
}

/// The front: what the window at the front was rendered from, and its text (in chunks).
#[derive(Serialize)]
struct FrontOut<'a> {
    entries: &'a [Entry],
    shapes: &'a [(String, Shape)],
    window: &'a str,
}

#[derive(Serialize)]
struct TranscriptOut<'a> {
    path: &'a str,
    runs: Vec<ContentHash>,
    tokens: usize,
    request_tokens: usize,
    reused: usize,
    memory: RecordOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<Vec<ContentHash>>,
}

/// The planner memory in a manifest: its slots are in the runs beside their messages, the
/// blocks and handle table (which grow with the session) are parts.
#[derive(Serialize)]
struct RecordOut<'a> {
    len: usize,
    #[serde(serialize_with = "crate::conversation::transcript::link_hex::serialize")]
    link: Link,
    blocks: Vec<ContentHash>,
    handles: Vec<ContentHash>,
    reused: usize,
    compacted: bool,
    #[serde(skip_serializing_if = "is_zero")]
    opening: usize,
    counter: &'a str,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

/// `compacted` as a manifest and its parts (each once, in the order first named).
pub(crate) fn split<S>(
    compacted: &Compacted<S>,
) -> Result<(Vec<u8>, Vec<CheckpointPart>), CheckpointError> {
    let mut parts = Parts::default();
    let front = parts.add_chunked(&FrontOut {
        entries: &compacted.entries,
        shapes: &compacted.shapes,
        window: &compacted.window,
    })?;
    let transcript = match &compacted.transcript {
        Some(transcript) => Some(transcript_out(transcript, &mut parts)?),
        None => None,
    };
    let manifest = ManifestOut {
        parts: MANIFEST_VERSION,
        format: compacted.format,
        state_type: &compacted.state_type,
        schema: &compacted.schema,
        budget: compacted.budget,
        front,
        tokens: compacted.tokens,
        report: &compacted.report,
        transcript,
        binding: compacted.binding.as_ref(),
        seal: compacted.seal,
        keyed_seal: compacted.keyed_seal.as_ref(),
    };
    let json = serde_json::to_vec(&manifest).map_err(serialize_error)?;
    Ok((json, parts.list))
}

fn transcript_out<'a>(
    transcript: &'a CompactedTranscript,
    parts: &mut Parts,
) -> Result<TranscriptOut<'a>, CheckpointError> {
    let memory = &transcript.memory;
    if memory.slots.len() != transcript.messages.len() {
        // `MemoryRecord::check` holds for every transcript made or loaded.
        return Err(CheckpointError::Integrity);
    }
    let known = &transcript.digests.0;
    let known = (known.len() == transcript.messages.len()).then_some(known);
    let mut runs = Vec::new();
    let mut run: Vec<(&SlotMeta, ContentHash)> = Vec::new();
    for (i, (message, slot)) in transcript.messages.iter().zip(&memory.slots).enumerate() {
        let bytes = serde_json::to_vec(message).map_err(serialize_error)?;
        // The digest the compaction computed is the SHA-256 of exactly these bytes
        // (`message_digest`): reuse it rather than hash every message again.
        let hash = match known {
            Some(known) => known[i],
            None => ContentHash::of(&bytes),
        };
        parts.add_bytes(hash, bytes);
        run.push((slot, hash));
        if hash.as_bytes()[0].is_multiple_of(RUN_SPLIT) || run.len() == RUN_MAX {
            runs.push(parts.add(&run)?);
            run.clear();
        }
    }
    if !run.is_empty() {
        runs.push(parts.add(&run)?);
    }
    let window = match &transcript.window {
        Some(record) => Some(parts.add_chunked(record)?),
        None => None,
    };
    Ok(TranscriptOut {
        path: &transcript.path,
        runs,
        tokens: transcript.tokens,
        request_tokens: transcript.request_tokens,
        reused: transcript.reused,
        memory: RecordOut {
            len: memory.len,
            link: memory.link,
            blocks: parts.add_chunked(&memory.blocks)?,
            handles: parts.add_chunked(&memory.handles)?,
            reused: memory.reused,
            compacted: memory.compacted,
            opening: memory.opening,
            counter: &memory.counter,
        },
        window,
    })
}

pub(super) fn serialize_error(error: serde_json::Error) -> CheckpointError {
    CheckpointError::Serialize(error.to_string())
}

/// The parts of one manifest, each once.
#[derive(Default)]
struct Parts {
    list: Vec<CheckpointPart>,
    seen: HashSet<ContentHash>,
}

impl Parts {
    fn add(&mut self, value: &impl Serialize) -> Result<ContentHash, CheckpointError> {
        let bytes = serde_json::to_vec(value).map_err(serialize_error)?;
        let hash = ContentHash::of(&bytes);
        self.add_bytes(hash, bytes);
        Ok(hash)
    }

    /// `value`'s JSON cut into content-defined chunks (`chunks.rs`), each a part: the
    /// chunks' hashes, in order.
    fn add_chunked(&mut self, value: &impl Serialize) -> Result<Vec<ContentHash>, CheckpointError> {
        let bytes = serde_json::to_vec(value).map_err(serialize_error)?;
        Ok(cut(&bytes)
            .into_iter()
            .map(|chunk| {
                let hash = ContentHash::of(chunk);
                self.add_bytes(hash, chunk.to_vec());
                hash
            })
            .collect())
    }

    fn add_bytes(&mut self, hash: ContentHash, bytes: Vec<u8>) {
        if self.seen.insert(hash) {
            self.list.push(CheckpointPart { hash, bytes });
        }
    }
}
