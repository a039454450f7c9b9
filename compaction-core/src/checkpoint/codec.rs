//! A [`Compacted`] into the row backends store, and back: refusing on the way in a checkpoint
//! no backend should keep (a broken seal), and on the way out bytes that are not the ones
//! saved.

use crate::checkpoint::backend::CheckpointError;
use crate::checkpoint::compacted::Compacted;
use crate::checkpoint::row::CheckpointRow;
use crate::store::ContentHash;

impl CheckpointRow {
    /// Encodes `compacted` for saving; refuses a checkpoint whose seal is broken
    /// (`Integrity`), so no backend ever stores one that could not be restored.
    pub(crate) fn encode<S>(compacted: &Compacted<S>) -> Result<CheckpointRow, CheckpointError> {
        if !compacted.verify_seal() {
            return Err(CheckpointError::Integrity);
        }
        let json = serde_json::to_string(compacted)
            .map_err(|e| CheckpointError::Serialize(e.to_string()))?;
        let sha256 = ContentHash::of(json.as_bytes()).to_hex();
        let mut blobs: Vec<ContentHash> = compacted.pointers().iter().map(|p| p.hash()).collect();
        blobs.sort_unstable_by_key(|h| h.to_hex());
        blobs.dedup();
        Ok(CheckpointRow {
            json: json.into_bytes(),
            sha256: Some(sha256),
            state_type: compacted.state_type.clone(),
            blobs,
        })
    }

    /// Decodes a stored row. Bytes that no longer parse are `Integrity`; bytes that parse but
    /// are not the ones saved (their stored SHA-256 does not match, or is missing) come back
    /// with a broken seal, so `verify_seal()` is `false` and `rehydrate` refuses them: the
    /// seal covers the content but not its spelling (hex case, escapes), the row checksum does.
    pub(crate) fn decode<S>(&self) -> Result<Compacted<S>, CheckpointError> {
        let mut compacted: Compacted<S> =
            serde_json::from_slice(&self.json).map_err(|_| CheckpointError::Integrity)?;
        if self.sha256().and_then(ContentHash::from_hex) != Some(ContentHash::of(&self.json)) {
            compacted.seal = ContentHash::of(b"compaction: checkpoint bytes altered in storage");
        }
        Ok(compacted)
    }
}
