//! What every checkpoint backend shares: the row a checkpoint is saved as (its JSON and that
//! JSON's own SHA-256), the check on the way back, and what a listing says about one. The
//! backends (`sqlite/checkpoint.rs`, `postgres/checkpoint.rs`) only move these rows.

use crate::checkpoint::compacted::Compacted;
use crate::error::{CompactionError, CHECKPOINT_FIELD};
use crate::store::ContentHash;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What is known about a saved checkpoint without loading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The agent id it was saved under.
    pub agent_id: String,
    /// The Rust type of the compacted state.
    pub state_type: String,
    /// When it was saved (the database's clock).
    pub saved_at: SystemTime,
    /// Size of its JSON, in bytes.
    pub size: usize,
}

impl CheckpointInfo {
    /// A listing row: `saved_at_ms` in milliseconds since the Unix epoch, `size` in bytes
    /// (negative values, which no backend writes, read as 0).
    pub(crate) fn from_row(
        agent_id: String,
        state_type: String,
        saved_at_ms: i64,
        size: i64,
    ) -> Self {
        CheckpointInfo {
            agent_id,
            state_type,
            saved_at: UNIX_EPOCH + Duration::from_millis(saved_at_ms.max(0) as u64),
            size: size.max(0) as usize,
        }
    }
}

/// A checkpoint as a backend stores it: its JSON, and the SHA-256 of exactly those bytes.
pub(crate) struct CheckpointRow {
    pub json: String,
    pub sha256: String,
}

/// Encodes `compacted` for saving; refuses a checkpoint whose seal is broken (`Integrity`), so
/// no backend ever stores one that could not be restored.
pub(crate) fn encode<S>(compacted: &Compacted<S>) -> Result<CheckpointRow, CompactionError> {
    if !compacted.verify_seal() {
        return Err(CompactionError::checkpoint_integrity());
    }
    let json = serde_json::to_string(compacted).map_err(|e| CompactionError::Serialize {
        field: CHECKPOINT_FIELD.into(),
        message: e.to_string(),
    })?;
    let sha256 = ContentHash::of(json.as_bytes()).to_hex();
    Ok(CheckpointRow { json, sha256 })
}

/// Decodes a stored row. Bytes that no longer parse are `Integrity`; bytes that parse but are
/// not the ones saved (their stored SHA-256 does not match, or is missing) come back with a
/// broken seal, so `verify_seal()` is `false` and `rehydrate` refuses them: the seal covers the
/// content but not its spelling (hex case, escapes), the row checksum does.
pub(crate) fn decode<S>(
    json: &[u8],
    sha256: Option<&str>,
) -> Result<Compacted<S>, CompactionError> {
    let mut compacted: Compacted<S> =
        serde_json::from_slice(json).map_err(|_| CompactionError::checkpoint_integrity())?;
    if sha256.and_then(ContentHash::from_hex) != Some(ContentHash::of(json)) {
        compacted.seal = ContentHash::of(b"compaction: checkpoint bytes altered in storage");
    }
    Ok(compacted)
}
