//! Typed checkpoints on any [`CheckpointStore`], held as a trait object: a `Compacted<S>` in,
//! the same `Compacted<S>` out, through the rows the backends move.

use crate::checkpoint::backend::{CheckpointError, CheckpointStore};
use crate::checkpoint::compacted::Compacted;
use crate::checkpoint::row::CheckpointRow;
use crate::future::BoxFuture;

impl dyn CheckpointStore + '_ {
    /// Saves `compacted` as the latest checkpoint of `agent_id` (replacing the previous one),
    /// refusing a broken seal (`Integrity`) and a checkpoint that points at a blob this store
    /// does not hold (`Store(NotFound)`), saving nothing.
    pub fn save<'a, S>(
        &'a self,
        agent_id: &'a str,
        compacted: &'a Compacted<S>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            let row = CheckpointRow::encode(compacted)?;
            self.save_row(agent_id, &row).await
        })
    }

    /// The latest checkpoint of `agent_id`, or `None` when there is none. Bytes that no longer
    /// parse are `Integrity`; bytes that parse but are not the ones saved come back with a
    /// broken seal, which `verify_seal()` and every rehydration refuse.
    pub fn load<'a, S: 'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Compacted<S>>, CheckpointError>> {
        Box::pin(async move {
            match self.load_row(agent_id).await? {
                Some(row) => row.decode().map(Some),
                None => Ok(None),
            }
        })
    }
}
