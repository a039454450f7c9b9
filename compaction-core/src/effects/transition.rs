//! The words of the effect state machine, shared by the machine and every backend: the
//! operations ([`EffectOp`]), what one accepted operation does ([`Change`], [`Event`]), what a
//! sync did ([`SyncVerdict`], [`SyncSummary`]), and a ledger's history record ([`Transition`]).

use crate::effects::record::{Effect, EffectStatus};
use std::time::SystemTime;

/// The operation behind a history event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EffectOp {
    /// `record`: the key was created with its details.
    Record,
    /// `begin`: the key was claimed (`not_started -> unknown`, or created as `unknown`).
    Begin,
    /// `commit`: `unknown -> committed`.
    Commit,
    /// `fail`: `unknown -> not_started`.
    Fail,
    /// `reconcile`: an operator set the status after checking the outside world.
    Reconcile,
    /// `sync`: an in-memory log was merged forward into the ledger.
    Sync,
}

impl EffectOp {
    /// The name stored in a ledger's history (`record`, `begin`, `commit`, `fail`, `reconcile`,
    /// `sync`).
    pub fn as_str(self) -> &'static str {
        match self {
            EffectOp::Record => "record",
            EffectOp::Begin => "begin",
            EffectOp::Commit => "commit",
            EffectOp::Fail => "fail",
            EffectOp::Reconcile => "reconcile",
            EffectOp::Sync => "sync",
        }
    }
}

/// One status transition, as a ledger appends it to its history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// What caused it.
    pub op: EffectOp,
    /// The status before (`None` when the operation created the key).
    pub from: Option<EffectStatus>,
    /// The status after.
    pub to: EffectStatus,
}

/// What an accepted operation does to one key.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Change {
    /// The record to store under the key; `None` leaves the stored record as it is.
    pub write: Option<Effect>,
    /// The transition to append to the history; `None` when the status did not move.
    pub event: Option<Event>,
}

impl Change {
    pub(super) fn unchanged() -> Self {
        Change::default()
    }

    pub(super) fn created(record: Effect, op: EffectOp) -> Self {
        let to = record.status;
        Change {
            write: Some(record),
            event: Some(Event { op, from: None, to }),
        }
    }

    pub(super) fn moved(current: &Effect, to: EffectStatus, op: EffectOp) -> Self {
        Change {
            write: Some(current.clone().with_status(to)),
            event: Some(Event {
                op,
                from: Some(current.status),
                to,
            }),
        }
    }
}

/// What a sync did with one record of the incoming log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncVerdict {
    /// The key was new: inserted with the log's status.
    Inserted,
    /// The status moved forward to the log's.
    Advanced,
    /// The log's status would move the stored one backwards: the stored status was kept.
    Kept {
        /// The stored status, kept.
        stored: EffectStatus,
        /// The log's status, not applied.
        incoming: EffectStatus,
    },
    /// Same status (details may have been filled in).
    Unchanged,
}

/// What a sync did, over a whole log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncSummary {
    /// Records the ledger did not have, inserted with the log's status.
    pub inserted: usize,
    /// Records whose status moved forward to the log's (`not_started -> unknown`,
    /// `not_started -> committed`, `unknown -> committed`).
    pub advanced: usize,
    /// Records where the log's status would move the ledger backwards (e.g. the log says
    /// `not_started`, the ledger `unknown`): the ledger kept its status. `(key, ledger, log)`.
    pub kept: Vec<(String, EffectStatus, EffectStatus)>,
}

impl SyncSummary {
    /// Counts one record's verdict.
    pub fn add(&mut self, key: &str, verdict: SyncVerdict) {
        match verdict {
            SyncVerdict::Inserted => self.inserted += 1,
            SyncVerdict::Advanced => self.advanced += 1,
            SyncVerdict::Kept { stored, incoming } => {
                self.kept.push((key.to_string(), stored, incoming))
            }
            SyncVerdict::Unchanged => {}
        }
    }
}

/// One recorded status transition of an effect (a ledger's append-only history).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The idempotency key.
    pub key: String,
    /// What caused it: `record`, `begin`, `commit`, `fail`, `reconcile` or `sync`.
    pub op: String,
    /// The status before (`None` when the operation created the key).
    pub from: Option<EffectStatus>,
    /// The status after.
    pub to: EffectStatus,
    /// When.
    pub at: SystemTime,
    /// The id of the process that made it.
    pub pid: u32,
}

impl Transition {
    /// The transition a state machine `Event` describes, made now by this process.
    pub fn now(key: &str, event: Event) -> Self {
        Transition {
            key: key.to_string(),
            op: event.op.as_str().to_string(),
            from: event.from,
            to: event.to,
            at: SystemTime::now(),
            pid: std::process::id(),
        }
    }

    /// The operation, when `op` names one of the state machine's.
    pub fn effect_op(&self) -> Option<EffectOp> {
        [
            EffectOp::Record,
            EffectOp::Begin,
            EffectOp::Commit,
            EffectOp::Fail,
            EffectOp::Reconcile,
            EffectOp::Sync,
        ]
        .into_iter()
        .find(|op| op.as_str() == self.op)
    }
}
