//! The SQL behind [`PgLedger`](super::PgLedger): reading, locking and writing one namespace's
//! rows of `effects` and `effect_events`. No transition is decided here; the ledger applies
//! [`machine`](crate::effects::machine) and hands its decision to [`store_change`].

use super::error::{Cause, PgErrorKind};
use super::hidden::hidden;
use crate::effects::error::EffectError;
use crate::effects::record::{Effect, EffectStatus};
use crate::effects::transition::{AnnotatedTransition, Change, Transition};
use deadpool_postgres::GenericClient;
use std::time::{Duration, UNIX_EPOCH};
use tokio_postgres::Row;

/// Failure inside a ledger transaction: the guard's refusal, or the database's.
#[derive(Debug)]
pub(super) enum TxError {
    Effect(EffectError),
    Db(Cause),
}

impl From<tokio_postgres::Error> for TxError {
    fn from(e: tokio_postgres::Error) -> Self {
        TxError::Db(Cause::Client(e))
    }
}

impl From<Cause> for TxError {
    fn from(cause: Cause) -> Self {
        TxError::Db(cause)
    }
}

impl From<EffectError> for TxError {
    fn from(e: EffectError) -> Self {
        TxError::Effect(e)
    }
}

impl TxError {
    /// The transaction rolled back because of a concurrent one: run the operation again.
    pub(super) fn is_retryable(&self) -> bool {
        matches!(self, TxError::Db(cause) if cause.kind() == PgErrorKind::Conflict)
    }
}

fn corrupt(detail: String) -> TxError {
    TxError::Db(Cause::Found(PgErrorKind::Corrupt, detail))
}

fn parse_status(text: &str) -> Result<EffectStatus, TxError> {
    [
        EffectStatus::NotStarted,
        EffectStatus::Committed,
        EffectStatus::Unknown,
    ]
    .into_iter()
    .find(|status| status.as_str() == text)
    .ok_or_else(|| corrupt(format!("unknown effect status `{text}`")))
}

const EFFECT_COLUMNS: &str = "action, target, key, status, depends_on, payload";

/// An `Effect` from the columns [`EFFECT_COLUMNS`], starting at column `first`.
fn effect_from_row(row: &Row, first: usize) -> Result<Effect, TxError> {
    let key: String = row.try_get(first + 2)?;
    let json = |column: usize, what: &str| -> Result<Option<serde_json::Value>, TxError> {
        match row.try_get::<_, Option<String>>(first + column)? {
            None => Ok(None),
            Some(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|_| corrupt(format!("effect `{key}`: {what} is not valid JSON"))),
        }
    };
    let depends_on = json(4, "depends_on")?
        .map(serde_json::from_value::<Vec<String>>)
        .transpose()
        .map_err(|_| corrupt(format!("effect `{key}`: depends_on is not a list of keys")))?
        .unwrap_or_default();
    let payload = json(5, "payload")?;
    Ok(Effect {
        action: row.try_get(first)?,
        target: row.try_get(first + 1)?,
        status: parse_status(row.try_get(first + 3)?)?,
        depends_on,
        payload,
        idempotency_key: key,
    })
}

/// The record under `key` in `scope`, as it is (a read: nothing is locked).
pub(super) async fn load_one(
    client: &impl GenericClient,
    namespace: &str,
    scope: &str,
    key: &str,
) -> Result<Option<Effect>, TxError> {
    let sql = format!(
        "SELECT {EFFECT_COLUMNS} FROM compaction.effects
         WHERE namespace = $1 AND scope = $2 AND key = $3"
    );
    let stmt = client.prepare_cached(&sql).await?;
    let row = client
        .query_opt(&stmt, hidden![namespace, scope, key])
        .await?;
    row.map(|row| effect_from_row(&row, 0)).transpose()
}

/// The record under `key` in `scope`, locked (`FOR UPDATE`) until the transaction ends, so
/// concurrent transitions of one key run one after the other; with the status its history's
/// last event ended at (`None` when it has none).
///
/// The last event is read by a second statement, after the lock is held: under READ
/// COMMITTED a `FOR UPDATE` that waited for another transaction returns the row as that one
/// left it, but a subquery of the same statement still reads the statement's older snapshot,
/// so the winner's claim would show without its event and read as a row changed outside the
/// ledger. A new statement sees everything committed before it.
pub(super) async fn load_locked(
    client: &impl GenericClient,
    namespace: &str,
    scope: &str,
    key: &str,
) -> Result<Option<(Effect, Option<EffectStatus>)>, TxError> {
    let sql = format!(
        "SELECT {EFFECT_COLUMNS} FROM compaction.effects
         WHERE namespace = $1 AND scope = $2 AND key = $3 FOR UPDATE"
    );
    let stmt = client.prepare_cached(&sql).await?;
    let Some(row) = client
        .query_opt(&stmt, hidden![namespace, scope, key])
        .await?
    else {
        return Ok(None);
    };
    let effect = effect_from_row(&row, 0)?;
    let last_sql = "SELECT e.to_status FROM compaction.effect_events e
         WHERE e.namespace = $1 AND e.scope = $2 AND e.key = $3
         ORDER BY e.id DESC LIMIT 1";
    let stmt = client.prepare_cached(last_sql).await?;
    let last = client
        .query_opt(&stmt, hidden![namespace, scope, key])
        .await?
        .map(|row| row.try_get::<_, &str>(0).map(parse_status))
        .transpose()?
        .transpose()?;
    Ok(Some((effect, last)))
}

/// Refuses to act on a record whose status is not where its history led (a row changed
/// outside the ledger): a backend error of kind `Corrupt`, nothing written.
pub(super) fn guard(key: &str, effect: &Effect, last: Option<EffectStatus>) -> Result<(), TxError> {
    crate::effects::transition::check_latest(effect.status, last)
        .map_err(|why| corrupt(format!("effect `{key}`: {why}")))
}

/// The records of `scope` (with `status`, when given), in record order.
pub(super) async fn load_scope(
    client: &impl GenericClient,
    namespace: &str,
    scope: &str,
    status: Option<EffectStatus>,
) -> Result<Vec<Effect>, TxError> {
    let sql = format!(
        "SELECT {EFFECT_COLUMNS} FROM compaction.effects
         WHERE namespace = $1 AND scope = $2 AND ($3::text IS NULL OR status = $3) ORDER BY id"
    );
    let stmt = client.prepare_cached(&sql).await?;
    let status = status.map(EffectStatus::as_str);
    let rows = client
        .query(&stmt, hidden![namespace, scope, status])
        .await?;
    rows.iter().map(|row| effect_from_row(row, 0)).collect()
}

/// Every record of every scope of the namespace, in record order, with its scope.
pub(super) async fn load_every(
    client: &impl GenericClient,
    namespace: &str,
) -> Result<Vec<(String, Effect)>, TxError> {
    let sql = format!(
        "SELECT scope, {EFFECT_COLUMNS} FROM compaction.effects
         WHERE namespace = $1 ORDER BY id"
    );
    let rows = client.query(&sql, hidden![namespace]).await?;
    rows.iter()
        .map(|row| Ok((row.try_get(0)?, effect_from_row(row, 1)?)))
        .collect()
}

fn json_of<T: serde::Serialize>(value: &T) -> Result<String, TxError> {
    serde_json::to_string(value).map_err(|e| corrupt(e.to_string()))
}

/// Stores what the state machine decided: the record (inserted when the key was new, else
/// replaced) and the history event, with an operator's `(actor, note)` when one was given,
/// inside the caller's transaction.
pub(super) async fn store_change(
    client: &impl GenericClient,
    namespace: &str,
    scope: &str,
    key: &str,
    existed: bool,
    change: Change,
    note: Option<(&str, &str)>,
) -> Result<(), TxError> {
    if let Some(record) = change.write {
        let payload = record.payload.as_ref().map(json_of).transpose()?;
        let sql = if existed {
            "UPDATE compaction.effects SET action = $4, target = $5, status = $6,
                 depends_on = $7, payload = $8, updated_at_ms = compaction.now_ms()
             WHERE namespace = $1 AND scope = $2 AND key = $3"
        } else {
            // A concurrent insert of the same key makes this a unique violation: the caller
            // retries the whole transaction and then finds (and locks) the row.
            "INSERT INTO compaction.effects (namespace, scope, key, action, target, status,
                 depends_on, payload, updated_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, compaction.now_ms())"
        };
        let stmt = client.prepare_cached(sql).await?;
        client
            .execute(
                &stmt,
                hidden![
                    namespace,
                    scope,
                    key,
                    record.action,
                    record.target,
                    record.status.as_str(),
                    json_of(&record.depends_on)?,
                    payload,
                ],
            )
            .await?;
    }
    if let Some(event) = change.event {
        let stmt = client
            .prepare_cached(
                "INSERT INTO compaction.effect_events
                     (namespace, scope, key, op, from_status, to_status, at_ms, pid, actor, note)
                 VALUES ($1, $2, $3, $4, $5, $6, compaction.now_ms(), $7, $8, $9)",
            )
            .await?;
        client
            .execute(
                &stmt,
                hidden![
                    namespace,
                    scope,
                    key,
                    event.op.as_str(),
                    event.from.map(EffectStatus::as_str),
                    event.to.as_str(),
                    i64::from(std::process::id()),
                    note.map(|(actor, _)| actor),
                    note.map(|(_, note)| note),
                ],
            )
            .await?;
    }
    Ok(())
}

/// The history of `key` in `scope`, oldest first, with operators' notes.
pub(super) async fn load_history(
    client: &impl GenericClient,
    namespace: &str,
    scope: &str,
    key: &str,
) -> Result<Vec<AnnotatedTransition>, TxError> {
    let rows = client
        .query(
            "SELECT key, op, from_status, to_status, at_ms, pid, actor, note
             FROM compaction.effect_events
             WHERE namespace = $1 AND scope = $2 AND key = $3 ORDER BY id",
            hidden![namespace, scope, key],
        )
        .await?;
    rows.iter()
        .map(|row| {
            let from: Option<&str> = row.try_get(2)?;
            let transition = Transition {
                key: row.try_get(0)?,
                op: row.try_get(1)?,
                from: from.map(parse_status).transpose()?,
                to: parse_status(row.try_get(3)?)?,
                at: UNIX_EPOCH + Duration::from_millis(row.try_get::<_, i64>(4)?.max(0) as u64),
                pid: row.try_get::<_, i64>(5)? as u32,
            };
            Ok(AnnotatedTransition {
                transition,
                actor: row.try_get(6)?,
                note: row.try_get(7)?,
            })
        })
        .collect()
}
