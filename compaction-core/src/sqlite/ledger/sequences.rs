//! The newest checkpoint sequence of each agent (`checkpoint_sequences`), forward only: the
//! reference a rolled-back checkpoint is refused against. The table's triggers refuse, in the
//! database itself, an update that moves a sequence back and any delete.

use super::super::ledger_rows::TxError;
use super::{SqliteLedger, SqliteLedgerError};
use rusqlite::OptionalExtension;

impl SqliteLedger {
    /// `EffectLedger::advance_checkpoint`: one transaction that keeps the larger sequence and
    /// returns it.
    pub(super) fn advance_checkpoint_in(
        &self,
        agent_id: &str,
        sequence: u64,
    ) -> Result<u64, SqliteLedgerError> {
        let context = format!("advancing the checkpoint sequence of agent `{agent_id}`");
        self.write(context, |tx| {
            // The column is a signed 64-bit integer; no compactor counts past it.
            let sequence = i64::try_from(sequence).map_err(|_| {
                TxError::Sql(rusqlite::Error::ToSqlConversionFailure(
                    format!("checkpoint sequence {sequence} is above i64::MAX").into(),
                ))
            })?;
            tx.prepare_cached(
                "INSERT INTO checkpoint_sequences (agent_id, sequence, updated_at_ms)
                 VALUES (?1, ?2, ?3)
                 ON CONFLICT (agent_id) DO UPDATE SET
                     sequence = excluded.sequence, updated_at_ms = excluded.updated_at_ms
                 WHERE excluded.sequence > checkpoint_sequences.sequence",
            )?
            .execute(rusqlite::params![
                agent_id,
                sequence,
                super::super::now_ms()
            ])?;
            newest(tx, agent_id)?.ok_or_else(|| {
                TxError::Corrupt("the checkpoint sequence just written is missing".into())
            })
        })
    }

    /// `EffectLedger::newest_checkpoint`.
    pub(super) fn newest_checkpoint_in(
        &self,
        agent_id: &str,
    ) -> Result<Option<u64>, SqliteLedgerError> {
        let context = format!("reading the checkpoint sequence of agent `{agent_id}`");
        self.read(context, |conn| newest(conn, agent_id))
    }
}

fn newest(conn: &rusqlite::Connection, agent_id: &str) -> Result<Option<u64>, TxError> {
    let sequence = conn
        .prepare_cached("SELECT sequence FROM checkpoint_sequences WHERE agent_id = ?1")?
        .query_row([agent_id], |row| row.get::<_, i64>(0))
        .optional()?;
    sequence
        .map(|s| u64::try_from(s).map_err(|_| TxError::Corrupt(format!("sequence {s}"))))
        .transpose()
}
