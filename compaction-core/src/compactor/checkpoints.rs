//! What a [`Compactor`] does with the checkpoints of its agent: verify them (seals and
//! binding), number its next checkpoint after them, and advance the agent's newest sequence in
//! the ledger, refusing a rolled-back checkpoint.

use crate::checkpoint::{check_checkpoint, Compacted};
use crate::compactor::Compactor;
use crate::effects::ledger::EffectLedger;
use crate::error::CompactionError;
use crate::future::block_on;
use std::sync::atomic::Ordering;

impl Compactor {
    /// Checks a checkpoint before its window or state is used: `CheckpointFormat` for another
    /// format, `Integrity { field: "<checkpoint>" }` when its plain seal does not match its
    /// content or, with [`seal_key`](crate::CompactorBuilder::seal_key), when its keyed seal does not
    /// verify under one of this compactor's keys (or is missing, unless
    /// [`accept_unkeyed_checkpoints`](crate::CompactorBuilder::accept_unkeyed_checkpoints)), and
    /// `ForeignCheckpoint` when it is bound to another agent or namespace than this compactor's
    /// [`agent_id`](crate::CompactorBuilder::agent_id) (see there for unbound checkpoints).
    /// [`rehydrate`](Self::rehydrate) and the pointer tool's
    /// [`allow_compacted`](crate::pointer_tool::PointerResolver::allow_compacted) run it first;
    /// call it yourself before sending a loaded checkpoint's [`render`](Compacted::render) or
    /// [`messages`](Compacted::messages) to a model.
    ///
    /// A checkpoint it accepts moves this compactor's compaction numbers past the checkpoint's
    /// sequence number, so the agent's next checkpoint is numbered after it.
    pub fn verify_checkpoint<S>(&self, compacted: &Compacted<S>) -> Result<(), CompactionError> {
        check_checkpoint(compacted, &self.seal_keys, &self.owner)?;
        self.continue_after_checkpoint(compacted);
        Ok(())
    }

    /// The agent id checkpoints are bound to ([`agent_id`](crate::CompactorBuilder::agent_id)).
    pub fn agent_id(&self) -> Option<&str> {
        self.owner.agent_id()
    }

    /// The namespace checkpoints are bound to ([`namespace`](crate::CompactorBuilder::namespace)).
    pub fn namespace(&self) -> &str {
        self.owner.namespace()
    }

    /// Numbers the next compaction after `sequence` (if it is not already later): how a
    /// resumed agent's checkpoints keep going forward. Never moves the numbers back.
    pub(crate) fn continue_after(&self, sequence: u64) {
        self.compactions.fetch_max(sequence, Ordering::Relaxed);
    }

    /// [`continue_after`](Self::continue_after) the sequence of a checkpoint bound to this
    /// compactor's agent (already verified).
    pub(super) fn continue_after_checkpoint<S>(&self, compacted: &Compacted<S>) {
        if let Some(binding) = compacted.binding() {
            if self.owner.agent_id() == Some(binding.agent_id()) {
                self.continue_after(binding.sequence());
            }
        }
    }

    /// Records `compacted` as its agent's newest checkpoint in `ledger`, forward only, after
    /// [verifying](Self::verify_checkpoint) it: refuses it with
    /// [`CheckpointRollback`](CompactionError::CheckpointRollback) when the ledger already holds
    /// a newer checkpoint of the agent (an older, validly sealed checkpoint put back in its
    /// place). Call it after saving a checkpoint, and after loading one, before using it:
    ///
    /// ```
    /// use compaction::{Compactable, CompactionError, Compactor, MemoryLedger, SealKey};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Compactable, Serialize, Deserialize, Default)]
    /// struct State {
    ///     #[protected]
    ///     step: u32,
    /// }
    ///
    /// let ledger = MemoryLedger::new(); // SqliteLedger / PgLedger: kept apart from checkpoints
    /// let compactor = Compactor::builder()
    ///     .budget(200)
    ///     .seal_key(SealKey::new("2026-11", [7u8; 32])?)
    ///     .agent_id("agent-7")
    ///     .build()?;
    /// let old = compactor.compact_with_ledger_blocking(&State { step: 1 }, &ledger)?;
    /// compactor.advance_checkpoint_blocking(&old, &ledger)?; // after saving it
    /// let new = compactor.compact_with_ledger_blocking(&State { step: 2 }, &ledger)?;
    /// compactor.advance_checkpoint_blocking(&new, &ledger)?;
    ///
    /// // The old checkpoint comes back from storage: genuine, and refused.
    /// assert!(compactor.verify_checkpoint(&old).is_ok());
    /// assert!(matches!(
    ///     compactor.advance_checkpoint_blocking(&old, &ledger),
    ///     Err(CompactionError::CheckpointRollback { sequence: 1, newest: 2, .. })
    /// ));
    /// # Ok::<(), CompactionError>(())
    /// ```
    ///
    /// It protects only as far as the ledger is out of reach of whoever can put the old
    /// checkpoint back (guide, docs/guarantees.md). A checkpoint with no binding (accepted under
    /// [`accept_unkeyed_checkpoints`](crate::CompactorBuilder::accept_unkeyed_checkpoints))
    /// has no sequence: nothing is recorded and it is not refused. Needs an
    /// [`agent_id`](crate::CompactorBuilder::agent_id) (`Config` otherwise); a ledger failure
    /// is [`CompactionError::CheckpointSequence`].
    pub async fn advance_checkpoint<S, L: EffectLedger>(
        &self,
        compacted: &Compacted<S>,
        ledger: &L,
    ) -> Result<(), CompactionError> {
        let Some(agent_id) = self.agent_id() else {
            return Err(CompactionError::Config(
                "advance_checkpoint needs the agent's id: build the compactor with \
                 .agent_id(..)"
                    .into(),
            ));
        };
        self.verify_checkpoint(compacted)?;
        let Some(binding) = compacted.binding() else {
            return Ok(());
        };
        let sequence = binding.sequence();
        let newest = ledger
            .advance_checkpoint(agent_id, sequence)
            .await
            .map_err(sequence_error)?;
        if newest > sequence {
            return Err(CompactionError::CheckpointRollback {
                agent_id: agent_id.to_owned(),
                sequence,
                newest,
            });
        }
        Ok(())
    }

    /// [`advance_checkpoint`](Self::advance_checkpoint) for synchronous callers.
    pub fn advance_checkpoint_blocking<S, L: EffectLedger>(
        &self,
        compacted: &Compacted<S>,
        ledger: &L,
    ) -> Result<(), CompactionError> {
        block_on(self.advance_checkpoint(compacted, ledger))
    }

    /// Numbers the next compaction after the newest checkpoint `ledger` recorded for this
    /// compactor's agent (nothing without an agent id): what `compact_with_ledger` runs
    /// first, so a restarted worker never numbers a checkpoint below one already saved.
    pub(crate) async fn continue_after_ledger<L: EffectLedger>(
        &self,
        ledger: &L,
    ) -> Result<(), CompactionError> {
        let Some(agent_id) = self.agent_id() else {
            return Ok(());
        };
        let newest = ledger
            .newest_checkpoint(agent_id)
            .await
            .map_err(sequence_error)?;
        if let Some(newest) = newest {
            self.continue_after(newest);
        }
        Ok(())
    }
}

/// A ledger failure while reading or advancing a checkpoint sequence.
fn sequence_error(error: impl std::error::Error + Send + Sync + 'static) -> CompactionError {
    CompactionError::CheckpointSequence {
        source: Box::new(error),
    }
}
