//! `show`'s comparison of a checkpoint's effect statuses with the ledger's current ones: an
//! effect the checkpoint saw `unknown` that an operator has since reconciled, or one the agent
//! claimed after the checkpoint, is named with both statuses and the ledger's last transition,
//! so the operator does not trust a window that no longer says what the ledger says.

use crate::backend::{AnyCheckpoint, Ledger};
use crate::ledger_cmd::scope_label;
use crate::output::{millis, printable, table, utc};
use crate::target::{Access, Database};
use compaction::{AnnotatedTransition, Effect, EffectLog, EffectStatus, FormView};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// An effect whose status in the ledger is not the one the checkpoint holds.
pub struct Moved {
    field: String,
    scope: String,
    key: String,
    checkpoint: EffectStatus,
    ledger: EffectStatus,
    /// The ledger's last transition of the key (what moved it).
    last: Option<AnnotatedTransition>,
}

/// The comparison of one checkpoint with the ledger.
pub enum Drift {
    /// The checkpoint holds no effect record in its window: nothing to compare.
    NoRecords,
    /// The ledger could not be read (e.g. the database holds no ledger); nothing was compared.
    Unavailable(String),
    /// Compared.
    Compared {
        /// Records of the window compared with the ledger.
        compared: usize,
        /// Records whose key is in no scope of the ledger, or in several scopes none of which
        /// is the field's path (the ledger scope cannot be told without the state's type).
        unmatched: usize,
        /// Records spilled to the store (only counts are in the window): not compared.
        spilled: usize,
        /// The effects whose status moved on.
        moved: Vec<Moved>,
    },
}

/// The window's effect records, as `(field path, record)`, and how many records were spilled.
fn records(compacted: &AnyCheckpoint) -> (Vec<(String, Effect)>, usize) {
    let mut records = Vec::new();
    let mut spilled = 0;
    for field in compacted.fields() {
        if let FormView::Effects(view) = field.form {
            records.extend(view.records().map(|e| (field.path.to_string(), e.clone())));
            spilled += view.spilled().map_or(0, |(_, count, ..)| count);
        }
    }
    (records, spilled)
}

/// The ledger scope holding the record of the field at `path`: the field's path (a field's
/// default scope), else the only scope that holds the key (a field with a named scope).
fn scope_of<'a>(all: &'a BTreeMap<String, EffectLog>, path: &str, key: &str) -> Option<&'a str> {
    if let Some((scope, _)) = all
        .get_key_value(path)
        .filter(|(_, l)| l.get(key).is_some())
    {
        return Some(scope);
    }
    let mut holding = all.iter().filter(|(_, log)| log.get(key).is_some());
    match (holding.next(), holding.next()) {
        (Some((scope, _)), None) => Some(scope),
        _ => None,
    }
}

impl Drift {
    /// Compares `compacted` with the ledger of `db`.
    pub fn of(db: &Database, compacted: &AnyCheckpoint) -> Drift {
        let (records, spilled) = records(compacted);
        if records.is_empty() && spilled == 0 {
            return Drift::NoRecords;
        }
        let ledger = match db.ledger(Access::Read) {
            Ok(ledger) => ledger,
            Err(failure) => return Drift::Unavailable(failure.message),
        };
        match Self::compare(&ledger, records, spilled) {
            Ok(drift) => drift,
            Err(failure) => Drift::Unavailable(failure.message),
        }
    }

    fn compare(
        ledger: &Ledger,
        records: Vec<(String, Effect)>,
        spilled: usize,
    ) -> Result<Drift, crate::fail::Failure> {
        let all = ledger.load_all()?;
        let (mut compared, mut unmatched, mut moved) = (0, 0, Vec::new());
        for (field, record) in records {
            let key = &record.idempotency_key;
            let Some(scope) = scope_of(&all, &field, key) else {
                unmatched += 1;
                continue;
            };
            compared += 1;
            let Some(now) = all[scope].status(key) else {
                continue;
            };
            if now != record.status {
                let last = ledger.history(scope, key)?.pop();
                moved.push(Moved {
                    field,
                    scope: scope.to_string(),
                    key: key.clone(),
                    checkpoint: record.status,
                    ledger: now,
                    last,
                });
            }
        }
        Ok(Drift::Compared {
            compared,
            unmatched,
            spilled,
            moved,
        })
    }

    /// `ledger_drift` in `show --json`: `null` without effect records.
    pub fn to_json(&self) -> Value {
        match self {
            Drift::NoRecords => Value::Null,
            Drift::Unavailable(why) => json!({ "compared": 0, "unavailable": why }),
            Drift::Compared {
                compared,
                unmatched,
                spilled,
                moved,
            } => json!({
                "compared": compared,
                "unmatched": unmatched,
                "spilled_not_compared": spilled,
                "moved": moved.iter().map(|m| {
                    let t = m.last.as_ref();
                    json!({
                        "field": m.field,
                        "scope": m.scope,
                        "key": m.key,
                        "checkpoint_status": m.checkpoint.as_str(),
                        "ledger_status": m.ledger.as_str(),
                        "last_op": t.map(|a| a.transition.op.clone()),
                        "last_at": t.map(|a| utc(a.transition.at)),
                        "last_at_ms": t.map(|a| millis(a.transition.at)),
                        "last_actor": t.and_then(|a| a.actor.clone()),
                        "last_note": t.and_then(|a| a.note.clone()),
                    })
                }).collect::<Vec<_>>(),
            }),
        }
    }

    /// The text `show` appends: nothing when every compared status agrees.
    pub fn to_text(&self) -> String {
        match self {
            Drift::NoRecords => String::new(),
            Drift::Unavailable(why) => format!(
                "\nnote: effect statuses not compared with the ledger: {}\n",
                printable(why)
            ),
            Drift::Compared { moved, .. } if moved.is_empty() => String::new(),
            Drift::Compared { moved, .. } => {
                let rows: Vec<Vec<String>> = moved
                    .iter()
                    .map(|m| {
                        let since = m.last.as_ref().map_or("-".to_string(), |a| {
                            let mut text = format!(
                                "{} at {}",
                                printable(&a.transition.op),
                                utc(a.transition.at)
                            );
                            if let Some(actor) = &a.actor {
                                text.push_str(&format!(" by {}", printable(actor)));
                            }
                            if let Some(note) = &a.note {
                                text.push_str(&format!(": {}", printable(note)));
                            }
                            text
                        });
                        vec![
                            format!("  {}", printable(&m.key)),
                            printable(&scope_label(&m.scope)),
                            m.checkpoint.to_string(),
                            m.ledger.to_string(),
                            since,
                        ]
                    })
                    .collect();
                format!(
                    "\nthe ledger has moved on since this checkpoint ({} effects): the window \
                     shows the checkpoint's status, the ledger's is current\n{}",
                    moved.len(),
                    table(&["  KEY", "SCOPE", "CHECKPOINT", "LEDGER", "SINCE"], &rows)
                )
            }
        }
    }
}
