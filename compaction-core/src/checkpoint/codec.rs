//! A [`Compacted`] into the row backends store, and back: refusing on the way in a checkpoint
//! no backend should keep (a broken seal, a binding to another agent or namespace), and on the
//! way out another agent's checkpoint and bytes that are not the ones saved.

use crate::binding::CheckpointBinding;
use crate::checkpoint::backend::CheckpointError;
use crate::checkpoint::compacted::Compacted;
use crate::checkpoint::parts::{
    assemble, check_part, is_manifest, manifest_head, parts_needed, split, whole_json,
};
use crate::checkpoint::row::{CheckpointPart, CheckpointRow};
use crate::store::{ContentHash, StoreError};

impl CheckpointRow {
    /// Encodes `compacted` for saving as `agent_id`'s checkpoint in `namespace`; refuses a
    /// checkpoint whose seal is broken (`Integrity`), so no backend ever stores one that could
    /// not be restored, and one bound to another agent or namespace, or keyed and bound to no
    /// agent (`Foreign`), so no backend files a checkpoint under someone else's name.
    ///
    /// `incremental`: as a manifest over parts, for a store that keeps them
    /// ([`CheckpointStore::stores_parts`](crate::checkpoint::CheckpointStore::stores_parts));
    /// otherwise the whole checkpoint's JSON.
    pub(crate) fn encode<S>(
        compacted: &Compacted<S>,
        agent_id: &str,
        namespace: &str,
        incremental: bool,
    ) -> Result<CheckpointRow, CheckpointError> {
        if !compacted.verify_seal() {
            return Err(CheckpointError::Integrity);
        }
        let keyed = compacted.seal_key_id().is_some();
        check_filed(compacted.binding(), keyed, true, agent_id, namespace)?;
        let (json, parts) = if incremental {
            split(compacted)?
        } else {
            let json = serde_json::to_vec(compacted)
                .map_err(|e| CheckpointError::Serialize(e.to_string()))?;
            (json, Vec::new())
        };
        let sha256 = ContentHash::of(&json).to_hex();
        let mut blobs: Vec<ContentHash> = compacted.pointers().iter().map(|p| p.hash()).collect();
        // By bytes: the same order as by their hex (the order rows keep), without a string per
        // comparison.
        blobs.sort_unstable();
        blobs.dedup();
        Ok(CheckpointRow {
            json,
            sha256: Some(sha256),
            state_type: compacted.state_type.clone(),
            blobs,
            parts,
            held_by_parent: Default::default(),
        })
    }

    /// Decodes the row stored as `agent_id`'s checkpoint in `namespace`. Bytes that no longer
    /// parse are `Integrity`; a checkpoint bound to another agent or namespace (a row copied
    /// over this one) is `Foreign`; bytes that parse but are not the ones saved (their stored
    /// SHA-256 does not match, or is missing) come back with a broken seal, so `verify_seal()`
    /// is `false` and `rehydrate` refuses them: the seal covers the content but not its
    /// spelling (hex case, escapes), the row checksum does. A keyed checkpoint bound to no
    /// agent loads: the compactor decides (`accept_unkeyed_checkpoints`).
    ///
    /// A manifest is assembled from the parts attached to it ([`CheckpointRow::with_parts`]):
    /// a part missing is `Store(NotFound)`, a part whose bytes do not hash to its address (or
    /// do not parse) is `Integrity`.
    pub(crate) fn decode<S>(
        &self,
        agent_id: &str,
        namespace: &str,
    ) -> Result<Compacted<S>, CheckpointError> {
        let mut compacted: Compacted<S> = if self.is_manifest() {
            // Another agent's or namespace's manifest is refused as such before its parts are
            // looked for (a row copied over from another namespace names parts this one lacks).
            let head = manifest_head(&self.json)?;
            check_filed(
                head.binding.as_ref(),
                head.keyed,
                false,
                agent_id,
                namespace,
            )?;
            match self.missing_part()? {
                // The manifest is the one saved and every part read is intact: the part is gone
                // from the store. (A run altered in storage may name a part that never was.)
                Some(hash) if self.checksum_matches() && self.parts_intact() => {
                    return Err(StoreError::NotFound { hash }.into());
                }
                // A manifest altered in storage, naming a part that does not exist.
                Some(_) => return Err(CheckpointError::Integrity),
                None => assemble(&self.json, &self.parts)?,
            }
        } else {
            serde_json::from_slice(&self.json).map_err(|_| CheckpointError::Integrity)?
        };
        let keyed = compacted.seal_key_id().is_some();
        check_filed(compacted.binding(), keyed, false, agent_id, namespace)?;
        if !self.checksum_matches() {
            compacted.seal = ContentHash::of(b"compaction: checkpoint bytes altered in storage");
        }
        Ok(compacted)
    }
}

impl CheckpointRow {
    /// Whether the row is a manifest over parts (an incremental row), rather than the whole
    /// checkpoint.
    pub fn is_manifest(&self) -> bool {
        is_manifest(&self.json)
    }

    /// The parts this row still needs before it can be decoded, each once: for a manifest,
    /// those it names, then the messages its runs name once the runs are attached
    /// ([`with_parts`](Self::with_parts)); empty for a whole checkpoint, and for a manifest with
    /// every part attached. A backend reads them ([`CheckpointStore::load_parts`](crate::checkpoint::CheckpointStore::load_parts))
    /// and attaches them until nothing more is needed (or a part is missing: loading then
    /// reports it). `Integrity` when a manifest or an attached run does not parse.
    pub fn parts_needed(&self) -> Result<Vec<ContentHash>, CheckpointError> {
        if !self.is_manifest() {
            return Ok(Vec::new());
        }
        parts_needed(&self.json, &self.parts)
    }

    /// The whole checkpoint's JSON: a whole row's bytes as they are; a manifest assembled with
    /// the parts attached ([`with_parts`](Self::with_parts)), each checked against its address
    /// (`Integrity` when one is altered, missing or does not parse). For an operator's export,
    /// or a tool that reads checkpoints as JSON; the row's checksum and seals are not checked.
    pub fn whole_json(&self) -> Result<Vec<u8>, CheckpointError> {
        if !self.is_manifest() {
            return Ok(self.json.clone());
        }
        whole_json(&self.json, &self.parts)
    }

    /// The parts a save must store (and, on PostgreSQL, lock): every part, but for a save over
    /// its parent checkpoint (`over_parent`, checked in the save's transaction) those the
    /// parent holds.
    pub(crate) fn new_parts(&self, over_parent: bool) -> impl Iterator<Item = &CheckpointPart> {
        self.parts
            .iter()
            .filter(move |p| !(over_parent && self.held_by_parent.contains(&p.hash)))
    }

    /// Whether the stored checksum is the SHA-256 of the stored bytes.
    fn checksum_matches(&self) -> bool {
        self.sha256().and_then(ContentHash::from_hex) == Some(ContentHash::of(&self.json))
    }

    /// Whether every part attached is the bytes its address names.
    fn parts_intact(&self) -> bool {
        self.parts.iter().all(|p| check_part(&p.hash, &p.bytes))
    }

    /// The first part the manifest (or a run attached) names that is not attached to the row.
    fn missing_part(&self) -> Result<Option<ContentHash>, CheckpointError> {
        Ok(self.parts_needed()?.into_iter().next())
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

#[cfg(test)]
mod tests {
    use crate::checkpoint::row::{CheckpointPart, CheckpointRow};
    use crate::store::ContentHash;

    fn part(bytes: &[u8]) -> CheckpointPart {
        CheckpointPart::stored(ContentHash::of(bytes), bytes.to_vec())
    }

    #[test]
    fn a_save_over_its_parent_skips_only_the_parts_the_parent_holds() {
        let (a, b, c) = (part(b"a"), part(b"b"), part(b"c"));
        let mut row = CheckpointRow::stored(b"{}".to_vec(), None).with_parts(vec![
            a.clone(),
            b.clone(),
            c.clone(),
        ]);
        row.held_by_parent = [*a.hash(), *c.hash(), ContentHash::of(b"elsewhere")]
            .into_iter()
            .collect();
        let new: Vec<&CheckpointPart> = row.new_parts(true).collect();
        assert_eq!(new, [&b]);
        // Saved over no checkpoint (or without a parent), every part is written.
        assert_eq!(row.new_parts(false).count(), 3);
    }
}
