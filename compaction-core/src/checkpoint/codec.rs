//! A [`Compacted`] into the row backends store, and back: refusing on the way in a checkpoint
//! no backend should keep (a broken seal, a binding to another agent or namespace), and on the
//! way out another agent's checkpoint and bytes that are not the ones saved.

use crate::binding::CheckpointBinding;
use crate::checkpoint::backend::CheckpointError;
use crate::checkpoint::compacted::Compacted;
use crate::checkpoint::row::CheckpointRow;
use crate::store::ContentHash;

impl CheckpointRow {
    /// Encodes `compacted` for saving as `agent_id`'s checkpoint in `namespace`; refuses a
    /// checkpoint whose seal is broken (`Integrity`), so no backend ever stores one that could
    /// not be restored, and one bound to another agent or namespace, or keyed and bound to no
    /// agent (`Foreign`), so no backend files a checkpoint under someone else's name.
    pub(crate) fn encode<S>(
        compacted: &Compacted<S>,
        agent_id: &str,
        namespace: &str,
    ) -> Result<CheckpointRow, CheckpointError> {
        if !compacted.verify_seal() {
            return Err(CheckpointError::Integrity);
        }
        let keyed = compacted.seal_key_id().is_some();
        check_filed(compacted.binding(), keyed, true, agent_id, namespace)?;
        let json = serde_json::to_string(compacted)
            .map_err(|e| CheckpointError::Serialize(e.to_string()))?;
        let sha256 = ContentHash::of(json.as_bytes()).to_hex();
        let mut blobs: Vec<ContentHash> = compacted.pointers().iter().map(|p| p.hash()).collect();
        // By bytes: the same order as by their hex (the order rows keep), without a string per
        // comparison.
        blobs.sort_unstable();
        blobs.dedup();
        Ok(CheckpointRow {
            json: json.into_bytes(),
            sha256: Some(sha256),
            state_type: compacted.state_type.clone(),
            blobs,
        })
    }

    /// Decodes the row stored as `agent_id`'s checkpoint in `namespace`. Bytes that no longer
    /// parse are `Integrity`; a checkpoint bound to another agent or namespace (a row copied
    /// over this one) is `Foreign`; bytes that parse but are not the ones saved (their stored
    /// SHA-256 does not match, or is missing) come back with a broken seal, so `verify_seal()`
    /// is `false` and `rehydrate` refuses them: the seal covers the content but not its
    /// spelling (hex case, escapes), the row checksum does. A keyed checkpoint bound to no
    /// agent loads: the compactor decides (`accept_unkeyed_checkpoints`).
    pub(crate) fn decode<S>(
        &self,
        agent_id: &str,
        namespace: &str,
    ) -> Result<Compacted<S>, CheckpointError> {
        let mut compacted: Compacted<S> =
            serde_json::from_slice(&self.json).map_err(|_| CheckpointError::Integrity)?;
        let keyed = compacted.seal_key_id().is_some();
        check_filed(compacted.binding(), keyed, false, agent_id, namespace)?;
        if self.sha256().and_then(ContentHash::from_hex) != Some(ContentHash::of(&self.json)) {
            compacted.seal = ContentHash::of(b"compaction: checkpoint bytes altered in storage");
        }
        Ok(compacted)
    }
}

/// Whether a checkpoint bound as `found` (with a keyed seal when `keyed`) may be saved or
/// loaded under `agent_id` in `namespace`: bound to exactly them, or bound to nobody without
/// a keyed seal (unkeyed checkpoints of compactors without an agent id, as before bindings).
/// A keyed checkpoint bound to nobody is refused on save (a keyed compactor must know its
/// agent to file under it) but loaded, so a migrating compactor can decide
/// (`CompactorBuilder::accept_unkeyed_checkpoints`).
fn check_filed(
    found: Option<&CheckpointBinding>,
    keyed: bool,
    saving: bool,
    agent_id: &str,
    namespace: &str,
) -> Result<(), CheckpointError> {
    let matches = match found {
        Some(binding) => binding.agent_id() == agent_id && binding.namespace() == namespace,
        None => !(keyed && saving),
    };
    if matches {
        return Ok(());
    }
    Err(CheckpointError::Foreign {
        agent_id: agent_id.to_owned(),
        namespace: namespace.to_owned(),
        found: found.cloned().map(Box::new),
    })
}
