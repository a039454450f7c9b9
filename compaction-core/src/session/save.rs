//! A request's checkpoint saved: over the one this session loaded or saved last (only over it,
//! under the fence), writing the parts that one does not hold, remembering every save whose
//! acknowledgement was lost; then its sequence recorded and its pointers allowed.

use super::{allow, Session, SessionError};
use crate::checkpoint::{CheckpointError, CheckpointRow, Compacted};
use crate::error::CompactionError;
use crate::state::has_transcript::HasTranscript;

/// How many unacknowledged saves a session remembers as possibly its own (see `unacked`).
const MAX_UNACKED: usize = 32;

impl<S: HasTranscript + Send + Sync> Session<S> {
    /// Compacts the state, saves the checkpoint over the last one (under the fence), records
    /// its sequence and allows its pointers.
    pub(super) async fn checkpointed(&mut self) -> Result<Compacted<S>, SessionError> {
        let compacted = self.ledger.compact(&self.compactor, &self.state).await?;
        let incremental = self.checkpoints.stores_parts();
        let mut row =
            CheckpointRow::encode(&compacted, &self.agent_id, &self.namespace, incremental)
                .map_err(CompactionError::from)?;
        row.held_by_parent = self.parent_parts.clone();
        let saved = self
            .checkpoints
            .save_row_over(&self.agent_id, &row, self.parent.as_deref())
            .await;
        let saved = match saved {
            // An earlier try of this request was written after all (its answer was lost):
            // the store's newest is this session's own row, so this one goes over it (whose
            // parts this session does not track: all are written).
            Err(CheckpointError::Conflict {
                found: Some(found), ..
            }) if self.unacked.contains(&found) => {
                row.held_by_parent.clear();
                self.checkpoints
                    .save_row_over(&self.agent_id, &row, Some(&found))
                    .await
            }
            other => other,
        };
        if let Err(error) = saved {
            if !matches!(
                error,
                CheckpointError::Conflict { .. } | CheckpointError::Superseded(_)
            ) {
                if self.unacked.len() == MAX_UNACKED {
                    // The oldest goes: found later, it is refused as a conflict (loud, never
                    // an overwrite).
                    self.unacked.remove(0);
                }
                self.unacked.extend(row.sha256().map(str::to_owned));
            }
            return Err(SessionError::from_checkpoint(error));
        }
        // The store holds it now, whatever happens next: a retry after a failed advance saves
        // over this row (the same request planned again), not over the one before it.
        self.parent = row.sha256().map(str::to_owned);
        self.parent_parts = row.parts().iter().map(|part| *part.hash()).collect();
        self.unacked.clear();
        self.ledger.advance(&self.compactor, &compacted).await?;
        allow(&mut self.resolver, &self.compactor, &compacted)?;
        Ok(compacted)
    }
}
