//! Reconciling with a note: who settled an effect and what they checked, kept in the effect's
//! history next to the transition (the `actor` and `note` columns of `effect_events`).

use super::super::ledger_rows::{load_history, load_one, store_change, TxError};
use super::{SqliteLedger, SqliteLedgerError};
use crate::effects::error::EffectError;
use crate::effects::machine;
use crate::effects::record::EffectStatus;
use crate::effects::transition::Transition;
use rusqlite::{Connection, TransactionBehavior};

/// One transition of an effect's history, with the operator's note when one was given
/// ([`SqliteLedger::reconcile_with_note`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotatedTransition {
    /// The transition.
    pub transition: Transition,
    /// Who made it, when an operator said so.
    pub actor: Option<String>,
    /// Why: what the operator checked.
    pub note: Option<String>,
}

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
    /// [`EffectError::NotInFlight`] (its status says which), checked in the same transaction
    /// as the change, so an agent settling the key meanwhile is never overwritten.
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
        let scope = &*self.scope;
        self.write(format!("reconciling effect `{key}`"), |tx| {
            let current = load_one(tx, scope, key)?;
            if let Some(current) = current.as_ref().filter(|_| only_unknown) {
                if current.status != EffectStatus::Unknown {
                    return Err(EffectError::NotInFlight {
                        key: key.into(),
                        status: current.status,
                    }
                    .into());
                }
            }
            let change = machine::reconcile(current.as_ref(), key, status)?;
            let has_event = change.event.is_some();
            store_change(tx, scope, key, current.is_some(), change)?;
            if has_event {
                // The event row `store_change` just appended is the last insert.
                tx.execute(
                    "UPDATE effect_events SET actor = ?1, note = ?2 WHERE id = last_insert_rowid()",
                    [actor, note],
                )?;
            }
            Ok(())
        })
    }

    /// Every recorded transition of `key` in this handle's scope, oldest first, with who made
    /// it and why when an operator said so.
    pub fn annotated_history(
        &self,
        key: &str,
    ) -> Result<Vec<AnnotatedTransition>, SqliteLedgerError> {
        let scope = &*self.scope;
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
