//! What a manifest row keeps from garbage collection: every part it names (the runs' messages
//! included), and the blobs its front's entries, handle table and blocks' chunks point at.

use super::read::{manifest, manifest_parts, run_messages};
use super::verified::check_part;
use crate::checkpoint::compacted::entry_pointers;
use crate::planner::memory::MemoryRecord;
use crate::store::ContentHash;
use crate::window::field::Entry;
use serde::Deserialize;

/// Every address a manifest row keeps from garbage collection, reading the parts that name
/// others ([`gc_parts`] lists them) with `part_bytes`. `None` when the manifest or one of those
/// parts is missing, altered or does not parse: which blobs it needs is then unknown.
pub(crate) fn referenced_by_manifest(
    json: &[u8],
    part_bytes: &dyn Fn(&ContentHash) -> Option<Vec<u8>>,
) -> Option<Vec<ContentHash>> {
    #[derive(Deserialize)]
    struct Front {
        entries: Vec<Entry>,
    }
    let manifest = manifest(json).ok()?;
    let mut out = manifest_parts(&manifest);
    let read = |hash: &ContentHash| -> Option<Vec<u8>> {
        let bytes = part_bytes(hash)?;
        check_part(hash, &bytes).then_some(bytes)
    };
    // A chunked part's bytes, put back together.
    let joined = |hashes: &[ContentHash]| -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        for hash in hashes {
            bytes.extend(read(hash)?);
        }
        Some(bytes)
    };
    let front: Front = serde_json::from_slice(&joined(&manifest.front)?).ok()?;
    out.extend(entry_pointers(&front.entries).iter().map(|p| p.hash()));
    if let Some(transcript) = &manifest.transcript {
        for run in &transcript.runs {
            out.extend(run_messages(&read(run)?).ok()?);
        }
        let memory = &transcript.memory;
        let record = MemoryRecord {
            len: 0,
            link: crate::conversation::transcript::ROOT,
            slots: Vec::new(),
            blocks: serde_json::from_slice(&joined(&memory.blocks)?).ok()?,
            handles: serde_json::from_slice(&joined(&memory.handles)?).ok()?,
            reused: 0,
            compacted: false,
            opening: 0,
            counter: String::new(),
        };
        out.extend(record.pointers().iter().map(|p| p.hash()));
    }
    Some(out)
}

/// The parts of a manifest row whose bytes [`referenced_by_manifest`] reads: its front, runs,
/// blocks and handle table (empty when the bytes do not parse as a manifest).
#[cfg(feature = "postgres")]
pub(crate) fn gc_parts(json: &[u8]) -> Vec<ContentHash> {
    let Ok(manifest) = manifest(json) else {
        return Vec::new();
    };
    let mut out = manifest.front.clone();
    if let Some(t) = &manifest.transcript {
        out.extend(&t.runs);
        out.extend(&t.memory.blocks);
        out.extend(&t.memory.handles);
    }
    out
}
