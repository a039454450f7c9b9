//! The `agent_fences` table: each agent's newest epoch in a namespace and when a session of it
//! last wrote, read and written inside the caller's transaction by the store and the ledger
//! alike (on one database and namespace they share one row), through the one state machine of
//! [`crate::fence`]. Times are the server's clock (`compaction.now_ms()`), one clock for every
//! machine of a fleet, so a lease means the same to all of them.
//!
//! Every helper that decides locks the agent's row first (`FOR UPDATE`, or the upsert's own
//! lock when the row may not exist yet) and holds it to the end of the caller's transaction:
//! a fenced write and an open of the same agent run one after the other, never interleaved.

use super::error::{Cause, PgErrorKind};
use super::hidden::hidden;
use crate::fence::{AgentLive, Fence, FenceRecord, Superseded};
use deadpool_postgres::GenericClient;
use std::time::Duration;
use tokio_postgres::Row;

/// An epoch as the `BIGINT` column holds it.
fn column(epoch: u64) -> Result<i64, Cause> {
    i64::try_from(epoch).map_err(|_| {
        Cause::Found(
            PgErrorKind::Other,
            format!("epoch {epoch} is above i64::MAX"),
        )
    })
}

/// The record of a row read as `epoch, renewed_at_ms` from column `first` on.
fn record_of(row: &Row, first: usize) -> Result<FenceRecord, Cause> {
    Ok(FenceRecord {
        // The column's CHECK keeps it at or above 0.
        epoch: row.try_get::<_, i64>(first)?.max(0) as u64,
        renewed_at_ms: row.try_get(first + 1)?,
    })
}

/// The agent's record, if it has one (a read: nothing is locked).
pub(super) async fn record(
    client: &impl GenericClient,
    namespace: &str,
    agent_id: &str,
) -> Result<Option<FenceRecord>, Cause> {
    let stmt = client
        .prepare_cached(
            "SELECT epoch, renewed_at_ms FROM compaction.agent_fences
             WHERE namespace = $1 AND agent_id = $2",
        )
        .await?;
    let row = client
        .query_opt(&stmt, hidden![namespace, agent_id])
        .await?;
    row.map(|row| record_of(&row, 0)).transpose()
}

/// The agent's record, its row locked until the caller's transaction ends, and the server's
/// clock. An agent without a row gets one (epoch 0, never committed as such: the caller
/// overwrites it or rolls back), so that two first opens of an agent also wait for each other:
/// `FOR UPDATE` cannot lock a row that does not exist yet, the upsert can (a second one waits
/// for the first to commit, then finds its row).
async fn lock_or_create(
    client: &impl GenericClient,
    namespace: &str,
    agent_id: &str,
) -> Result<(Option<FenceRecord>, i64), Cause> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO compaction.agent_fences AS f (namespace, agent_id, epoch, renewed_at_ms)
             VALUES ($1, $2, 0, 0)
             ON CONFLICT (namespace, agent_id) DO UPDATE SET epoch = f.epoch
             RETURNING epoch, renewed_at_ms, compaction.now_ms()",
        )
        .await?;
    let row = client
        .query_one(&stmt, hidden![namespace, agent_id])
        .await?;
    let held = record_of(&row, 0)?;
    // Epoch 0 is the placeholder just made: no session of the agent ever opened here.
    Ok(((held.epoch > 0).then_some(held), row.try_get(2)?))
}

/// Writes `record` over the agent's row, which the caller holds locked.
async fn store(
    client: &impl GenericClient,
    namespace: &str,
    agent_id: &str,
    record: FenceRecord,
) -> Result<(), Cause> {
    let stmt = client
        .prepare_cached(
            "UPDATE compaction.agent_fences SET epoch = $3, renewed_at_ms = $4
             WHERE namespace = $1 AND agent_id = $2",
        )
        .await?;
    let updated = client
        .execute(
            &stmt,
            hidden![
                namespace,
                agent_id,
                column(record.epoch)?,
                record.renewed_at_ms
            ],
        )
        .await?;
    if updated != 1 {
        // Only a row deleted under our lock gets here, which the table's trigger refuses.
        return Err(Cause::Found(
            PgErrorKind::Corrupt,
            format!("the fence row of agent `{agent_id}` vanished while locked"),
        ));
    }
    Ok(())
}

/// Takes the agent's next epoch (see [`FenceRecord::take`]); call inside a transaction.
pub(super) async fn take(
    client: &impl GenericClient,
    namespace: &str,
    agent_id: &str,
    at_least: u64,
    lease: Option<Duration>,
) -> Result<Result<FenceRecord, AgentLive>, Cause> {
    let (held, now) = lock_or_create(client, namespace, agent_id).await?;
    match FenceRecord::take(held, agent_id, at_least, lease, now) {
        Ok(taken) => {
            store(client, namespace, agent_id, taken).await?;
            Ok(Ok(taken))
        }
        Err(live) => Ok(Err(live)),
    }
}

/// Raises the agent to `fence`'s epoch (see [`FenceRecord::raise`]); call inside a
/// transaction.
pub(super) async fn raise(
    client: &impl GenericClient,
    namespace: &str,
    fence: &Fence,
) -> Result<Result<(), Superseded>, Cause> {
    let (held, now) = lock_or_create(client, namespace, fence.agent_id()).await?;
    match FenceRecord::raise(held, fence, now) {
        Ok(raised) => {
            store(client, namespace, fence.agent_id(), raised).await?;
            Ok(Ok(()))
        }
        Err(refusal) => Ok(Err(refusal)),
    }
}

/// Checks `fence` (renewing it when due) for a write made in the same transaction (see
/// [`FenceRecord::check`]), its row locked until that transaction ends: an open of the agent
/// waits for the write to commit, and a write waiting on an open sees the epoch it took. No
/// fence (an unfenced handle) writes freely.
pub(super) async fn check(
    client: &impl GenericClient,
    namespace: &str,
    fence: Option<&Fence>,
) -> Result<Result<(), Superseded>, Cause> {
    let Some(fence) = fence else {
        return Ok(Ok(()));
    };
    let stmt = client
        .prepare_cached(
            "SELECT epoch, renewed_at_ms, compaction.now_ms() FROM compaction.agent_fences
             WHERE namespace = $1 AND agent_id = $2 FOR UPDATE",
        )
        .await?;
    let row = client
        .query_opt(&stmt, hidden![namespace, fence.agent_id()])
        .await?;
    let (held, now) = match row {
        Some(row) => (Some(record_of(&row, 0)?), row.try_get(2)?),
        // No row: refused whatever the clock says.
        None => (None, 0),
    };
    match FenceRecord::check(held, fence, now) {
        Ok(Some(renewed)) => {
            store(client, namespace, fence.agent_id(), renewed).await?;
            Ok(Ok(()))
        }
        Ok(None) => Ok(Ok(())),
        Err(refusal) => Ok(Err(refusal)),
    }
}
