//! The agent's fence as the ledger sees it: its record read, and raised when a session opens
//! (the table and its state machine are `sqlite/fence.rs`'s; the check before each write is in
//! the ledger's `write`).

use super::super::fence;
use super::super::ledger_rows::TxError;
use super::{SqliteLedger, SqliteLedgerError};
use crate::effects::error::EffectError;
use crate::fence::{Fence, FenceRecord};

impl SqliteLedger {
    /// `EffectLedger::fence_record`.
    pub(super) fn fence_record_in(
        &self,
        agent_id: &str,
    ) -> Result<Option<FenceRecord>, SqliteLedgerError> {
        let context = format!("reading the fence of agent `{agent_id}`");
        self.read(context, |conn| Ok(fence::record(conn, agent_id)?))
    }

    /// `EffectLedger::raise_epoch`: one transaction (unfenced: raising is how a session
    /// starts writing here).
    pub(super) fn raise_epoch_in(&self, to: &Fence) -> Result<(), SqliteLedgerError> {
        let context = format!("opening a session of agent `{}`", to.agent_id());
        let unfenced = SqliteLedger {
            fence: None,
            ..self.clone()
        };
        unfenced.write(context, |tx| {
            fence::raise(tx, to)?
                .map_err(EffectError::Superseded)
                .map_err(TxError::Effect)
        })
    }
}
