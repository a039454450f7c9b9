//! The `agent_fences` table: each agent's newest epoch and when a session of it last wrote,
//! read and written inside the caller's transaction by the store and the ledger alike (they may
//! share one file, and then one row), through the one state machine of [`crate::fence`].

use super::now_ms;
use crate::fence::{AgentLive, Fence, FenceRecord, Superseded};
use rusqlite::{Connection, OptionalExtension};
use std::time::Duration;

/// The agent's record, if it has one.
pub(super) fn record(conn: &Connection, agent_id: &str) -> rusqlite::Result<Option<FenceRecord>> {
    conn.prepare_cached("SELECT epoch, renewed_at_ms FROM agent_fences WHERE agent_id = ?1")?
        .query_row([agent_id], |row| {
            Ok(FenceRecord {
                // The column's CHECK keeps it at or above 0.
                epoch: row.get::<_, i64>(0)?.max(0) as u64,
                renewed_at_ms: row.get(1)?,
            })
        })
        .optional()
}

fn store(conn: &Connection, agent_id: &str, record: FenceRecord) -> rusqlite::Result<()> {
    let epoch = i64::try_from(record.epoch).map_err(|_| {
        rusqlite::Error::ToSqlConversionFailure(
            format!("epoch {} is above i64::MAX", record.epoch).into(),
        )
    })?;
    conn.prepare_cached(
        "INSERT INTO agent_fences (agent_id, epoch, renewed_at_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT (agent_id) DO UPDATE SET
             epoch = excluded.epoch, renewed_at_ms = excluded.renewed_at_ms",
    )?
    .execute(rusqlite::params![agent_id, epoch, record.renewed_at_ms])?;
    Ok(())
}

/// Takes the agent's next epoch (see [`FenceRecord::take`]); call inside a write transaction.
pub(super) fn take(
    conn: &Connection,
    agent_id: &str,
    at_least: u64,
    lease: Option<Duration>,
) -> rusqlite::Result<Result<FenceRecord, AgentLive>> {
    let held = record(conn, agent_id)?;
    match FenceRecord::take(held, agent_id, at_least, lease, now_ms()) {
        Ok(taken) => store(conn, agent_id, taken).map(|()| Ok(taken)),
        Err(live) => Ok(Err(live)),
    }
}

/// Raises the agent to `fence`'s epoch (see [`FenceRecord::raise`]).
pub(super) fn raise(conn: &Connection, fence: &Fence) -> rusqlite::Result<Result<(), Superseded>> {
    let held = record(conn, fence.agent_id())?;
    match FenceRecord::raise(held, fence, now_ms()) {
        Ok(raised) => store(conn, fence.agent_id(), raised).map(Ok),
        Err(refusal) => Ok(Err(refusal)),
    }
}

/// Checks `fence` for a write made in the same transaction, renewing it when due (see
/// `FenceRecord::check`).
pub(super) fn check(conn: &Connection, fence: &Fence) -> rusqlite::Result<Result<(), Superseded>> {
    let held = record(conn, fence.agent_id())?;
    match FenceRecord::check(held, fence, now_ms()) {
        Ok(Some(renewed)) => store(conn, fence.agent_id(), renewed).map(Ok),
        Ok(None) => Ok(Ok(())),
        Err(refusal) => Ok(Err(refusal)),
    }
}
