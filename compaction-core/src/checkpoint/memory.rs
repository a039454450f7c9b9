//! [`MemoryStore`] as a [`CheckpointStore`]: checkpoints in process memory beside its blobs,
//! for tests and sessions without a database. No namespaces; the blobs a checkpoint points at
//! must be in the same store, as on every backend.

use crate::checkpoint::backend::{CheckpointError, CheckpointStore};
use crate::checkpoint::row::{CheckpointInfo, CheckpointRow};
use crate::future::BoxFuture;
use crate::store::memory::MemoryCheckpoint;
use crate::store::{MemoryStore, StoreError};
use std::time::SystemTime;

impl CheckpointStore for MemoryStore {
    fn namespace(&self) -> &str {
        ""
    }

    fn save_row<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            // Checked and written under the checkpoints' lock; blobs are never removed from a
            // memory store, so one that is there now stays.
            let mut checkpoints = self.checkpoints();
            if let Some(hash) = row.blobs().iter().find(|h| !self.holds(h)) {
                return Err(StoreError::NotFound { hash: *hash }.into());
            }
            let saved = MemoryCheckpoint {
                json: row.json().to_vec(),
                sha256: row.sha256().map(str::to_owned),
                state_type: row.state_type().to_owned(),
                saved_at: SystemTime::now(),
            };
            checkpoints.insert(agent_id.to_owned(), saved);
            Ok(())
        })
    }

    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>> {
        Box::pin(async move {
            Ok(self
                .raw_checkpoint(agent_id)
                .map(|(json, sha256)| CheckpointRow::stored(json, sha256)))
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<CheckpointInfo>, CheckpointError>> {
        Box::pin(async move {
            Ok(self
                .checkpoints()
                .iter()
                .map(|(agent_id, saved)| CheckpointInfo {
                    agent_id: agent_id.clone(),
                    state_type: saved.state_type.clone(),
                    saved_at: saved.saved_at,
                    size: saved.json.len(),
                })
                .collect())
        })
    }

    fn delete<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        Box::pin(async move { Ok(self.checkpoints().remove(agent_id).is_some()) })
    }
}
