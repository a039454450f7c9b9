//! Typed checkpoints on any [`CheckpointStore`], held as a trait object: a `Compacted<S>` in,
//! the same `Compacted<S>` out, through the rows the backends move.

use crate::checkpoint::backend::{CheckpointError, CheckpointStore};
use crate::checkpoint::compacted::Compacted;
use crate::checkpoint::row::CheckpointRow;
use crate::future::BoxFuture;

/// The most rounds of reads a manifest's parts take: the manifest's own, then its runs'
/// messages (a third finds nothing).
pub(crate) const MAX_PART_ROUNDS: usize = 3;

impl dyn CheckpointStore + '_ {
    /// Saves `compacted` as the latest checkpoint of `agent_id` (replacing the previous one),
    /// refusing a broken seal (`Integrity`), a checkpoint bound to another agent or namespace
    /// or keyed and bound to no agent (`Foreign`), and a checkpoint that points at a blob this
    /// store does not hold (`Store(NotFound)`), saving nothing.
    pub fn save<'a, S>(
        &'a self,
        agent_id: &'a str,
        compacted: &'a Compacted<S>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            let row =
                CheckpointRow::encode(compacted, agent_id, self.namespace(), self.stores_parts())?;
            self.save_row(agent_id, &row).await
        })
    }

    /// The latest checkpoint of `agent_id`, or `None` when there is none. Bytes that no longer
    /// parse are `Integrity`; another agent's or namespace's checkpoint in this row is
    /// `Foreign`; bytes that parse but are not the ones saved come back with a broken seal,
    /// which `verify_seal()` and every rehydration refuse.
    pub fn load<'a, S: 'a>(
        &'a self,
        agent_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Compacted<S>>, CheckpointError>> {
        Box::pin(async move {
            match self.load_row(agent_id).await? {
                Some(row) => self
                    .read_parts(row)
                    .await?
                    .decode(agent_id, self.namespace())
                    .map(Some),
                None => Ok(None),
            }
        })
    }

    /// `row` with every part it needs read from this store and attached (a whole row as it
    /// is): the manifest's parts, then the messages its runs name. A part the store lacks is
    /// left out (decoding the row then reports it).
    pub fn read_parts<'a>(
        &'a self,
        row: CheckpointRow,
    ) -> BoxFuture<'a, Result<CheckpointRow, CheckpointError>> {
        Box::pin(async move {
            let mut row = row;
            // Two rounds for a manifest (its parts, then its runs' messages); a round that
            // finds nothing ends it, and so does a third (a store that answers with parts it
            // was not asked for never loops).
            for _ in 0..MAX_PART_ROUNDS {
                let needed = row.parts_needed()?;
                if needed.is_empty() {
                    break;
                }
                let found = self.load_parts(&needed).await?;
                if found.is_empty() {
                    break;
                }
                row = row.with_parts(found);
            }
            Ok(row)
        })
    }
}
