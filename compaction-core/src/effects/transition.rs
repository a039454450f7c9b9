//! The words of the effect state machine, shared by the machine and every backend: the
//! operations ([`EffectOp`]), what one accepted operation does ([`Change`], [`Event`]), what a
//! sync did ([`SyncVerdict`], [`SyncSummary`]), a ledger's history record ([`Transition`]), and
//! whether a status is where its history led ([`history_problem`]).

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

/// One transition of an effect's history, with the operator's name and note when it was a
/// settlement made with one (`reconcile_with_note` on `SqliteLedger` and `PgLedger`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotatedTransition {
    /// The transition.
    pub transition: Transition,
    /// Who made it, when an operator said so.
    pub actor: Option<String>,
    /// Why: what the operator checked.
    pub note: Option<String>,
}

/// What an operator found when settling an effect ([`EffectLedger::settle`]): the status the
/// outside world shows, who checked and what they checked.
///
/// [`EffectLedger::settle`]: crate::effects::EffectLedger::settle
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// The status to record.
    pub status: EffectStatus,
    /// Who settled it (an operator's name).
    pub actor: String,
    /// What they checked.
    pub note: String,
    /// Refuse a key that is not `unknown` ([`EffectError::NotInFlight`]) instead of
    /// overwriting its status.
    ///
    /// [`EffectError::NotInFlight`]: crate::effects::EffectError::NotInFlight
    pub only_unknown: bool,
}

impl Settlement {
    /// The settlement of an `unknown` key to `status` by `actor`, who checked `note`.
    pub fn of_unknown(status: EffectStatus, actor: &str, note: &str) -> Settlement {
        Settlement {
            status,
            actor: actor.to_owned(),
            note: note.to_owned(),
            only_unknown: true,
        }
    }

    /// The same settlement for a key in any status (`--force`).
    pub fn forced(mut self) -> Settlement {
        self.only_unknown = false;
        self
    }
}

// Whether an effect's status is where its history led: every ledger appends one event per
// status change in the same transaction as the change, so a status that no event led to was
// written by someone else (an edited row: a committed charge set back to `not_started`, its
// events deleted, would otherwise be claimed and run again). `compaction verify` reports every
// such effect; the durable ledgers refuse to act on one, except to settle it: an operator's
// settlement records the status it found, so it may start from anything.

/// What is wrong between an effect's `status` and its `history` (oldest first), or `None`
/// when the history starts with the key's creation, each event starts where the one before
/// it ended (a `reconcile` may start anywhere: it settles what the row said), and the last
/// one ends at `status`.
///
/// ```
/// use compaction::history_problem;
/// use compaction::{Effect, EffectLedger, EffectStatus, MemoryLedger};
///
/// let ledger = MemoryLedger::new();
/// compaction::block_on(async {
///     ledger.record("", &Effect::new("charge", "psp://c", "k")).await?;
///     ledger.begin("", "k").await?;
///     ledger.commit("", "k").await?;
///     let history = ledger.history("", "k").await?;
///     assert_eq!(history_problem(EffectStatus::Committed, &history), None);
///     // The row rewritten to `not_started`, or its history deleted: both are found.
///     assert!(history_problem(EffectStatus::NotStarted, &history).is_some());
///     assert!(history_problem(EffectStatus::NotStarted, &[]).is_some());
///     Ok::<(), compaction::EffectError>(())
/// })?;
/// # Ok::<(), compaction::EffectError>(())
/// ```
pub fn history_problem(status: EffectStatus, history: &[Transition]) -> Option<String> {
    let Some(first) = history.first() else {
        return Some(format!(
            "its status is {status} but it has no history: no recorded operation led to it \
             (its events were deleted, or the row was written outside the ledger)"
        ));
    };
    if let Some(from) = first.from.filter(|_| first.op != "reconcile") {
        return Some(format!(
            "its history does not begin with its creation (the first event, {}, starts from \
             {from}): events were deleted",
            first.op
        ));
    }
    for pair in history.windows(2) {
        if pair[1].from != Some(pair[0].to) && pair[1].op != "reconcile" {
            return Some(format!(
                "its history has a gap: one event ends at {}, the next ({}) starts from {}: \
                 events were deleted or changed",
                pair[0].to,
                pair[1].op,
                pair[1]
                    .from
                    .map_or("nothing".to_string(), |s| s.to_string())
            ));
        }
    }
    let last = history.last().map(|t| t.to).unwrap_or(first.to);
    (last != status).then(|| {
        format!(
            "its status is {status}, but its history ends at {last}: the status was changed \
             outside the ledger"
        )
    })
}

/// The guard's form of [`history_problem`], for a ledger about to act on a key (anything but
/// `reconcile`, which is how an operator repairs one): its stored `status` must be where the
/// last event (`last`, read in the same transaction) ended.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn check_latest(status: EffectStatus, last: Option<EffectStatus>) -> Result<(), String> {
    match last {
        Some(last) if last == status => Ok(()),
        Some(last) => Err(format!(
            "its status is {status}, but its history ends at {last}: the row was changed outside \
             the ledger, so nothing was done (check the outside world, then settle it with \
             reconcile)"
        )),
        None => Err(format!(
            "its status is {status} but it has no history: the row was written or its events \
             deleted outside the ledger, so nothing was done (check the outside world, then \
             settle it with reconcile)"
        )),
    }
}
