//! [`MemoryStore`] as a [`CheckpointStore`]: checkpoints in process memory beside its blobs,
//! for tests and sessions without a database. No namespaces; the blobs a checkpoint points at
//! must be in the same store, as on every backend.

use crate::checkpoint::backend::{
    check_agent_id, check_parent, CheckpointError, CheckpointStore, TakenEpoch,
};
use crate::checkpoint::row::CheckpointPart;
use crate::checkpoint::row::{CheckpointInfo, CheckpointRow};
use crate::fence::{now_ms, Fence, FenceRecord};
use crate::future::BoxFuture;
use crate::store::memory::{MemoryCheckpoint, MemoryStore};
use crate::store::{ContentHash, StoreError};
use std::time::{Duration, SystemTime};

impl MemoryStore {
    /// Saves `row` over `parent` (when given: `Some(None)` means over no checkpoint), under
    /// this handle's fence: the fences' lock, then the checkpoints' lock, held through the
    /// check and the write.
    fn save_over(
        &self,
        agent_id: &str,
        row: &CheckpointRow,
        parent: Option<Option<&str>>,
    ) -> Result<(), CheckpointError> {
        check_agent_id(agent_id)?;
        let _fenced = self.write_lock()?;
        // Blobs are never removed from a memory store, so one that is there now stays.
        let mut checkpoints = self.checkpoints();
        if let Some(parent) = parent {
            let found = checkpoints.get(agent_id).and_then(|c| c.sha256.clone());
            check_parent(agent_id, parent, found)?;
        }
        if let Some(hash) = row.blobs().iter().find(|h| !self.holds(h)) {
            return Err(StoreError::NotFound { hash: *hash }.into());
        }
        // Parts beside the blobs, like every backend's (content-addressed: one held is the
        // same bytes).
        let over_parent = matches!(parent, Some(Some(_)));
        self.insert_parts(row.new_parts(over_parent).map(|p| (p.hash(), p.bytes())));
        let saved = MemoryCheckpoint {
            json: row.json().to_vec(),
            sha256: row.sha256().map(str::to_owned),
            state_type: row.state_type().to_owned(),
            saved_at: SystemTime::now(),
        };
        checkpoints.insert(agent_id.to_owned(), saved);
        Ok(())
    }
}

impl CheckpointStore for MemoryStore {
    fn namespace(&self) -> &str {
        ""
    }

    fn save_row<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move { self.save_over(agent_id, row, None) })
    }

    fn load_row<'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CheckpointRow>, CheckpointError>> {
        Box::pin(async move {
            check_agent_id(agent_id)?;
            Ok(self
                .raw_checkpoint(agent_id)
                .map(|(json, sha256)| CheckpointRow::stored(json, sha256)))
        })
    }

    fn stores_parts(&self) -> bool {
        true
    }

    fn load_parts<'a>(
        &'a self,
        hashes: &'a [ContentHash],
    ) -> BoxFuture<'a, Result<Vec<CheckpointPart>, CheckpointError>> {
        Box::pin(async move {
            Ok(hashes
                .iter()
                .filter_map(|hash| Some(CheckpointPart::stored(*hash, self.raw(hash)?)))
                .collect())
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
        Box::pin(async move {
            check_agent_id(agent_id)?;
            let _fenced = self.write_lock()?;
            Ok(self.checkpoints().remove(agent_id).is_some())
        })
    }

    fn take_epoch<'a>(
        &'a self,
        agent_id: &'a str,
        at_least: u64,
        lease: Option<Duration>,
    ) -> BoxFuture<'a, Result<Option<TakenEpoch>, CheckpointError>> {
        Box::pin(async move {
            check_agent_id(agent_id)?;
            let mut fences = self.fences();
            let held = fences.get(agent_id).copied();
            let taken = FenceRecord::take(held, agent_id, at_least, lease, now_ms())
                .map_err(CheckpointError::Live)?;
            // Read while the fences' lock is held: no save of an older epoch can come between.
            let row = self
                .raw_checkpoint(agent_id)
                .map(|(json, sha256)| CheckpointRow::stored(json, sha256));
            fences.insert(agent_id.to_owned(), taken);
            Ok(Some(TakenEpoch {
                epoch: taken.epoch,
                row,
            }))
        })
    }

    fn save_row_over<'a>(
        &'a self,
        agent_id: &'a str,
        row: &'a CheckpointRow,
        parent: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move { self.save_over(agent_id, row, Some(parent)) })
    }

    fn renew<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            check_agent_id(agent_id)?;
            match self.fence() {
                Some(fence) if fence.agent_id() == agent_id => Ok(self.write_lock().map(drop)?),
                _ => Ok(()),
            }
        })
    }

    fn fenced(&self, fence: &Fence) -> Option<Self> {
        Some(self.with_fence(fence))
    }
}
