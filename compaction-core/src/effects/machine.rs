//! The effect state machine, written once: pure transitions from (stored record, operation) to
//! (record to store, history event), which [`EffectLog`](crate::effects::record::EffectLog) and
//! every durable ledger apply. No backend decides a transition itself, so no two can disagree.
//!
//! Each function takes the record currently stored under the key (`None` when the key is new)
//! and returns a [`Change`]: what to store (nothing, when the operation is a no-op) and which
//! status transition to append to the history. A refusal is an [`EffectError`] and changes
//! nothing.

use crate::effects::error::EffectError;
use crate::effects::record::{Effect, EffectStatus};
use crate::effects::transition::{Change, EffectOp, Event, SyncVerdict};

fn not_found(key: &str) -> EffectError {
    EffectError::NotFound { key: key.into() }
}

/// Refuses a `scope` or `key` holding a NUL character ([`EffectError::Nul`]). Every ledger
/// calls it (or [`check_effect`]) before it reads or writes anything, so all of them refuse
/// the same input with the same error: PostgreSQL text cannot hold NUL while SQLite's can,
/// and without this check one backend stored what another reported as corrupt.
pub fn check_key(scope: &str, key: &str) -> Result<(), EffectError> {
    let nul = |part| EffectError::Nul {
        key: key.to_owned(),
        part,
    };
    if key.contains('\0') {
        return Err(nul("key"));
    }
    if scope.contains('\0') {
        return Err(nul("scope"));
    }
    Ok(())
}

/// [`check_key`] for an effect's scope and key, and its action, target and dependencies.
pub fn check_effect(scope: &str, effect: &Effect) -> Result<(), EffectError> {
    check_key(scope, &effect.idempotency_key)?;
    let nul = |part| EffectError::Nul {
        key: effect.idempotency_key.clone(),
        part,
    };
    if effect.action.contains('\0') {
        return Err(nul("action"));
    }
    if effect.target.contains('\0') {
        return Err(nul("target"));
    }
    if effect.depends_on.iter().any(|d| d.contains('\0')) {
        return Err(nul("dependency"));
    }
    Ok(())
}

/// `record`: stores a new key with its details and status. For a stored key: the same action,
/// target and edges again is a no-op (an agent re-records its plan after a restart); a
/// placeholder that `begin` created takes the recorded details and keeps its status; anything
/// else is [`EffectError::DuplicateKey`].
pub fn record(current: Option<&Effect>, effect: &Effect) -> Result<Change, EffectError> {
    let Some(current) = current else {
        return Ok(Change::created(effect.clone(), EffectOp::Record));
    };
    let same = current.action == effect.action
        && current.target == effect.target
        && current.depends_on == effect.depends_on;
    if same {
        return Ok(Change::unchanged());
    }
    if current.is_placeholder() {
        let filled = Effect {
            action: effect.action.clone(),
            target: effect.target.clone(),
            depends_on: effect.depends_on.clone(),
            payload: current.payload.clone().or_else(|| effect.payload.clone()),
            ..current.clone()
        };
        return Ok(Change {
            write: Some(filled),
            event: None,
        });
    }
    Err(EffectError::DuplicateKey {
        key: effect.idempotency_key.clone(),
    })
}

/// `begin`: claims a key before its effect runs. A new key is created as `Unknown` with the
/// details of `effect`; a `NotStarted` key moves to `Unknown`. A committed key is
/// [`EffectError::AlreadyCommitted`], an unknown one [`EffectError::OutcomeUnknown`].
pub fn begin(current: Option<&Effect>, effect: &Effect) -> Result<Change, EffectError> {
    let key = &effect.idempotency_key;
    match current {
        None => Ok(Change::created(
            effect.clone().with_status(EffectStatus::Unknown),
            EffectOp::Begin,
        )),
        Some(current) => match current.status {
            EffectStatus::NotStarted => Ok(Change::moved(
                current,
                EffectStatus::Unknown,
                EffectOp::Begin,
            )),
            EffectStatus::Committed => Err(EffectError::AlreadyCommitted { key: key.clone() }),
            EffectStatus::Unknown => Err(EffectError::OutcomeUnknown { key: key.clone() }),
        },
    }
}

/// `commit`: settles an in-flight key as done (`Unknown -> Committed`).
pub fn commit(current: Option<&Effect>, key: &str) -> Result<Change, EffectError> {
    settle(current, key, EffectStatus::Committed, EffectOp::Commit)
}

/// `fail`: records that an in-flight effect certainly did not happen (`Unknown -> NotStarted`).
pub fn fail(current: Option<&Effect>, key: &str) -> Result<Change, EffectError> {
    settle(current, key, EffectStatus::NotStarted, EffectOp::Fail)
}

fn settle(
    current: Option<&Effect>,
    key: &str,
    to: EffectStatus,
    op: EffectOp,
) -> Result<Change, EffectError> {
    let current = current.ok_or_else(|| not_found(key))?;
    if current.status != EffectStatus::Unknown {
        return Err(EffectError::NotInFlight {
            key: key.into(),
            status: current.status,
        });
    }
    Ok(Change::moved(current, to, op))
}

/// `reconcile`: sets the status an operator established by checking the outside world (any
/// status to any status; recorded even when it does not move, as evidence of the check).
pub fn reconcile(
    current: Option<&Effect>,
    key: &str,
    status: EffectStatus,
) -> Result<Change, EffectError> {
    let current = current.ok_or_else(|| not_found(key))?;
    Ok(Change::moved(current, status, EffectOp::Reconcile))
}

/// An operator's settlement: [`reconcile`] that, with `only_unknown`, refuses a key that is not
/// `unknown` ([`EffectError::NotInFlight`], its status says which).
pub fn settled(
    current: Option<&Effect>,
    key: &str,
    status: EffectStatus,
    only_unknown: bool,
) -> Result<Change, EffectError> {
    if let Some(current) = current.filter(|_| only_unknown) {
        if current.status != EffectStatus::Unknown {
            return Err(EffectError::NotInFlight {
                key: key.into(),
                status: current.status,
            });
        }
    }
    reconcile(current, key, status)
}

/// `set_payload`: stores a tool's result on a recorded key.
pub fn set_payload(
    current: Option<&Effect>,
    key: &str,
    payload: &serde_json::Value,
) -> Result<Change, EffectError> {
    let current = current.ok_or_else(|| not_found(key))?;
    Ok(Change {
        write: Some(current.clone().with_payload(payload.clone())),
        event: None,
    })
}

/// Whether moving a ledger from `from` to `to` is forward: `not_started -> unknown`,
/// `not_started -> committed`, `unknown -> committed`. Only these may come from a sync.
pub fn is_forward(from: EffectStatus, to: EffectStatus) -> bool {
    matches!(
        (from, to),
        (EffectStatus::NotStarted, EffectStatus::Unknown)
            | (EffectStatus::NotStarted, EffectStatus::Committed)
            | (EffectStatus::Unknown, EffectStatus::Committed)
    )
}

/// `sync`: merges one record of an in-memory log into the stored one, never erasing anything.
/// A new key is inserted as it is. For a stored key the status moves forward only
/// ([`is_forward`]); a placeholder's empty action, target and edges are filled from the log,
/// and a missing payload is added; stored details and payloads are never overwritten (the log
/// may be stale: another process may know more).
pub fn sync(current: Option<&Effect>, incoming: &Effect) -> (Change, SyncVerdict) {
    let Some(current) = current else {
        return (
            Change::created(incoming.clone(), EffectOp::Sync),
            SyncVerdict::Inserted,
        );
    };
    let fills = current.is_placeholder() && !incoming.is_placeholder();
    let advances = is_forward(current.status, incoming.status);
    if !fills && !advances && (current.payload.is_some() || incoming.payload.is_none()) {
        // Nothing to write (the common case: a log synced again as it was), so no copy of
        // the record: a session syncs its whole log after every effect.
        let verdict = if current.status == incoming.status {
            SyncVerdict::Unchanged
        } else {
            SyncVerdict::Kept {
                stored: current.status,
                incoming: incoming.status,
            }
        };
        return (Change::unchanged(), verdict);
    }
    let mut next = current.clone();
    if fills {
        next.action = incoming.action.clone();
        next.target = incoming.target.clone();
        next.depends_on = incoming.depends_on.clone();
    }
    if next.payload.is_none() {
        next.payload = incoming.payload.clone();
    }
    let (event, verdict) = if advances {
        next.status = incoming.status;
        let event = Event {
            op: EffectOp::Sync,
            from: Some(current.status),
            to: incoming.status,
        };
        (Some(event), SyncVerdict::Advanced)
    } else if current.status != incoming.status {
        let kept = SyncVerdict::Kept {
            stored: current.status,
            incoming: incoming.status,
        };
        (None, kept)
    } else {
        (None, SyncVerdict::Unchanged)
    };
    let write = (next != *current).then_some(next);
    (Change { write, event }, verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholder(key: &str) -> Effect {
        Effect::new("", "", key).with_status(EffectStatus::Unknown)
    }

    #[test]
    fn re_record_is_a_no_op_or_a_duplicate_or_fills_a_placeholder() {
        let stored = Effect::new("charge", "stripe://c1", "k").with_status(EffectStatus::Committed);
        let same = Effect::new("charge", "stripe://c1", "k");
        assert_eq!(record(Some(&stored), &same), Ok(Change::unchanged()));
        let other = Effect::new("charge", "stripe://c2", "k");
        assert_eq!(
            record(Some(&stored), &other),
            Err(EffectError::DuplicateKey { key: "k".into() })
        );
        let change = record(Some(&placeholder("k")), &other).unwrap();
        let written = change.write.unwrap();
        assert_eq!(written.target, "stripe://c2");
        assert_eq!(written.status, EffectStatus::Unknown, "keeps its status");
        assert_eq!(change.event, None);
    }

    #[test]
    fn sync_never_erases_stored_details() {
        let stored = Effect::new("charge", "stripe://c1", "k")
            .depends_on("quote")
            .with_payload(serde_json::json!({"id": 7}));
        let stale = placeholder("k");
        let (change, verdict) = sync(Some(&stored), &stale);
        assert_eq!(verdict, SyncVerdict::Advanced);
        let written = change.write.unwrap();
        assert_eq!(written.action, "charge");
        assert_eq!(written.depends_on, ["quote"]);
        assert_eq!(written.payload, Some(serde_json::json!({"id": 7})));
        assert_eq!(written.status, EffectStatus::Unknown);

        let (change, verdict) = sync(Some(&placeholder("k")), &stored);
        assert_eq!(
            verdict,
            SyncVerdict::Kept {
                stored: EffectStatus::Unknown,
                incoming: EffectStatus::NotStarted
            }
        );
        assert_eq!(
            change.write.unwrap().target,
            "stripe://c1",
            "placeholder filled"
        );
    }
}
