//! Reconciling with a note: who settled an effect and what they checked, kept in the effect's
//! history next to the transition (the `actor` and `note` columns of `effect_events`).

use super::super::ledger_rows::{load_history, load_one, store_change, TxError};
use super::{SqliteLedger, SqliteLedgerError};
use crate::effects::machine;
use crate::effects::record::EffectStatus;
use crate::effects::transition::AnnotatedTransition;
use rusqlite::{Connection, TransactionBehavior};

impl SqliteLedger {
    /// [`reconcile`](Self::reconcile) that also keeps who did it and why in the effect's
    /// history (one transaction): any status to any status, like `reconcile`.
    ///
    /// ```
    /// use compaction::{Effect, EffectStatus};
    /// use compaction::sqlite::SqliteLedger;
    ///
    /// let path = std::env::temp_dir().join(format!("compaction-doc-note-{}.db", std::process::id()));
    /// let ledger = SqliteLedger::open(&path)?;
    /// ledger.record(&Effect::new("charge_card", "psp://cards/4242", "charge-7"))?;
    /// ledger.begin("charge-7")?; // ... and the process died: unknown
    /// ledger.reconcile_with_note(
    ///     "charge-7",
    ///     EffectStatus::Committed,
    ///     "charge ch_7 is in the PSP dashboard",
    ///     "oncall-ana",
    /// )?;
    /// let last = ledger.annotated_history("charge-7")?.pop().unwrap();
    /// assert_eq!(last.transition.op, "reconcile");
    /// assert_eq!(last.actor.as_deref(), Some("oncall-ana"));
    /// # drop(ledger);
    /// # for suffix in ["", "-wal", "-shm"] {
    /// #     let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    /// # }
    /// # Ok::<(), compaction::SqliteLedgerError>(())
    /// ```
    pub fn reconcile_with_note(
        &self,
        key: &str,
        status: EffectStatus,
        note: &str,
        actor: &str,
    ) -> Result<(), SqliteLedgerError> {
        self.reconcile_noted(key, status, note, actor, false)
    }

    /// [`reconcile_with_note`](Self::reconcile_with_note) only when the outcome is unknown:
    /// a key that is `committed` or `not_started` is refused with
    /// [`EffectError::NotInFlight`](crate::EffectError::NotInFlight) (its status says which),
    /// checked in the same transaction as the change, so an agent settling the key meanwhile
    /// is never overwritten.
    pub fn reconcile_unknown_with_note(
        &self,
        key: &str,
        status: EffectStatus,
        note: &str,
        actor: &str,
    ) -> Result<(), SqliteLedgerError> {
        self.reconcile_noted(key, status, note, actor, true)
    }

    fn reconcile_noted(
        &self,
        key: &str,
        status: EffectStatus,
        note: &str,
        actor: &str,
        only_unknown: bool,
    ) -> Result<(), SqliteLedgerError> {
        self.settle_in(&self.scope, key, status, Some((actor, note)), only_unknown)
    }

    /// An operator's settlement of `key` (any status to any status, or from `unknown` only),
    /// with who and why when given, in one transaction. It is the one step that may act on a
    /// key whose status its history does not explain: that is how such a key is repaired.
    pub(super) fn settle_in(
        &self,
        scope: &str,
        key: &str,
        status: EffectStatus,
        note: Option<(&str, &str)>,
        only_unknown: bool,
    ) -> Result<(), SqliteLedgerError> {
        machine::check_key(scope, key)?;
        self.write(format!("reconciling effect `{key}`"), |tx| {
            let current = load_one(tx, scope, key)?;
            let change = machine::settled(current.as_ref(), key, status, only_unknown)?;
            store_change(tx, scope, key, current.is_some(), change, note)
        })
    }

    /// Every recorded transition of `key` in this handle's scope, oldest first, with who made
    /// it and why when an operator said so.
    pub fn annotated_history(
        &self,
        key: &str,
    ) -> Result<Vec<AnnotatedTransition>, SqliteLedgerError> {
        self.annotated_in(&self.scope, key)
    }

    pub(super) fn annotated_in(
        &self,
        scope: &str,
        key: &str,
    ) -> Result<Vec<AnnotatedTransition>, SqliteLedgerError> {
        if machine::check_key(scope, key).is_err() {
            return Ok(Vec::new());
        }
        let context = format!("reading the history of effect `{key}`");
        let mut conn = self.db.lock();
        let result = (|| {
            // One read transaction, so the notes line up with the transitions.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
            let transitions = load_history(&tx, scope, key)?;
            let notes = load_notes(&tx, scope, key)?;
            Ok::<_, TxError>(
                transitions
                    .into_iter()
                    .zip(notes)
                    .map(|(transition, (actor, note))| AnnotatedTransition {
                        transition,
                        actor,
                        note,
                    })
                    .collect(),
            )
        })();
        result.map_err(|e| self.ledger_error(context, e))
    }
}

type Note = (Option<String>, Option<String>);

fn load_notes(conn: &Connection, scope: &str, key: &str) -> Result<Vec<Note>, TxError> {
    let mut stmt = conn.prepare(
        "SELECT actor, note FROM effect_events WHERE scope = ?1 AND key = ?2 ORDER BY id",
    )?;
    let rows = stmt.query_map([scope, key], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}
