//! The SQL behind [`SqliteLedger`](super::SqliteLedger): reading and writing one scope's rows of
//! the `effects` and `effect_events` tables. No transition is decided here; the ledger applies
//! [`machine`](crate::effects::machine) and hands the result to [`store_change`].

use super::now_ms;
use crate::effects::error::EffectError;
use crate::effects::record::{Effect, EffectStatus};
use crate::effects::transition::{Change, Event, Transition};
use rusqlite::{Connection, OptionalExtension};
use std::time::{Duration, UNIX_EPOCH};

/// Failure inside a ledger transaction, before the path is attached.
pub(super) enum TxError {
    Effect(EffectError),
    Sql(rusqlite::Error),
    Corrupt(String),
}

impl From<rusqlite::Error> for TxError {
    fn from(e: rusqlite::Error) -> Self {
        TxError::Sql(e)
    }
}

impl From<EffectError> for TxError {
    fn from(e: EffectError) -> Self {
        TxError::Effect(e)
    }
}

const EFFECT_COLUMNS: &str = "action, target, key, status, depends_on, payload";

pub(super) fn parse_status(text: &str) -> Result<EffectStatus, TxError> {
    match text {
        "not_started" => Ok(EffectStatus::NotStarted),
        "committed" => Ok(EffectStatus::Committed),
        "unknown" => Ok(EffectStatus::Unknown),
        other => Err(TxError::Corrupt(format!("unknown effect status `{other}`"))),
    }
}

type Row = (String, String, String, String, String, Option<String>);

fn effect_from_row(row: Row) -> Result<Effect, TxError> {
    let (action, target, key, status, depends_on, payload) = row;
    let corrupt =
        |what: &str| TxError::Corrupt(format!("effect `{key}`: {what} is not valid JSON"));
    let depends_on: Vec<String> =
        serde_json::from_str(&depends_on).map_err(|_| corrupt("depends_on"))?;
    let payload = match payload {
        Some(p) => Some(serde_json::from_str(&p).map_err(|_| corrupt("payload"))?),
        None => None,
    };
    Ok(Effect {
        status: parse_status(&status)?,
        action,
        target,
        idempotency_key: key,
        depends_on,
        payload,
    })
}

fn read_row(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Row> {
    Ok((
        row.get(first)?,
        row.get(first + 1)?,
        row.get(first + 2)?,
        row.get(first + 3)?,
        row.get(first + 4)?,
        row.get(first + 5)?,
    ))
}

/// The record under `key` in `scope`.
pub(super) fn load_one(
    conn: &Connection,
    scope: &str,
    key: &str,
) -> Result<Option<Effect>, TxError> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE scope = ?1 AND key = ?2"
        ))?
        .query_row([scope, key], |row| read_row(row, 0))
        .optional()?;
    row.map(effect_from_row).transpose()
}

/// The records of `scope` (with `status`, when given), in record order.
pub(super) fn load_scope(
    conn: &Connection,
    scope: &str,
    status: Option<EffectStatus>,
) -> Result<Vec<Effect>, TxError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {EFFECT_COLUMNS} FROM effects
         WHERE scope = ?1 AND (?2 IS NULL OR status = ?2) ORDER BY id"
    ))?;
    let rows: Vec<Row> = stmt
        .query_map(
            rusqlite::params![scope, status.map(EffectStatus::as_str)],
            |row| read_row(row, 0),
        )?
        .collect::<Result<_, _>>()?;
    rows.into_iter().map(effect_from_row).collect()
}

/// Every record of every scope, in record order, with its scope.
pub(super) fn load_every(conn: &Connection) -> Result<Vec<(String, Effect)>, TxError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT scope, {EFFECT_COLUMNS} FROM effects ORDER BY id"
    ))?;
    let rows: Vec<(String, Row)> = stmt
        .query_map([], |row| Ok((row.get(0)?, read_row(row, 1)?)))?
        .collect::<Result<_, _>>()?;
    rows.into_iter()
        .map(|(scope, row)| Ok((scope, effect_from_row(row)?)))
        .collect()
}

fn json_of<T: serde::Serialize>(value: &T) -> Result<String, TxError> {
    serde_json::to_string(value).map_err(|e| TxError::Corrupt(e.to_string()))
}

/// Stores what the state machine decided: the record (inserted when the key was new, else
/// replaced) and the history event, with an operator's `(actor, note)` when one was given.
pub(super) fn store_change(
    conn: &Connection,
    scope: &str,
    key: &str,
    existed: bool,
    change: Change,
    note: Option<(&str, &str)>,
) -> Result<(), TxError> {
    if let Some(record) = change.write {
        let payload = record.payload.as_ref().map(json_of).transpose()?;
        let sql = if existed {
            "UPDATE effects SET action = ?3, target = ?4, status = ?5, depends_on = ?6,
                 payload = ?7, updated_at_ms = ?8
             WHERE scope = ?1 AND key = ?2"
        } else {
            "INSERT INTO effects
                 (scope, key, action, target, status, depends_on, payload, updated_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        };
        conn.prepare_cached(sql)?.execute(rusqlite::params![
            scope,
            key,
            record.action,
            record.target,
            record.status.as_str(),
            json_of(&record.depends_on)?,
            payload,
            now_ms()
        ])?;
    }
    if let Some(event) = change.event {
        append_event(conn, scope, key, event, note)?;
    }
    Ok(())
}

/// Appends one event (the table refuses every other change: see the schema's triggers).
fn append_event(
    conn: &Connection,
    scope: &str,
    key: &str,
    event: Event,
    note: Option<(&str, &str)>,
) -> Result<(), TxError> {
    conn.prepare_cached(
        "INSERT INTO effect_events (scope, key, op, from_status, to_status, at_ms, pid, actor, note)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(rusqlite::params![
        scope,
        key,
        event.op.as_str(),
        event.from.map(EffectStatus::as_str),
        event.to.as_str(),
        now_ms(),
        std::process::id(),
        note.map(|(actor, _)| actor),
        note.map(|(_, note)| note),
    ])?;
    Ok(())
}

/// The status the last event of `key` in `scope` ended at (`None` when it has no history).
pub(super) fn last_status(
    conn: &Connection,
    scope: &str,
    key: &str,
) -> Result<Option<EffectStatus>, TxError> {
    let last: Option<String> = conn
        .prepare_cached(
            "SELECT to_status FROM effect_events WHERE scope = ?1 AND key = ?2
             ORDER BY id DESC LIMIT 1",
        )?
        .query_row([scope, key], |row| row.get(0))
        .optional()?;
    last.as_deref().map(parse_status).transpose()
}

/// Refuses to act on a stored record whose status is not where its history led (a row
/// changed outside the ledger): a backend error of kind `Corrupt`, nothing written.
pub(super) fn guard(
    conn: &Connection,
    scope: &str,
    key: &str,
    current: &Effect,
) -> Result<(), TxError> {
    let last = last_status(conn, scope, key)?;
    crate::effects::transition::check_latest(current.status, last)
        .map_err(|why| TxError::Corrupt(format!("effect `{key}`: {why}")))
}

/// The history of `key` in `scope`, oldest first.
pub(super) fn load_history(
    conn: &Connection,
    scope: &str,
    key: &str,
) -> Result<Vec<Transition>, TxError> {
    let mut stmt = conn.prepare_cached(
        "SELECT key, op, from_status, to_status, at_ms, pid FROM effect_events
         WHERE scope = ?1 AND key = ?2 ORDER BY id",
    )?;
    let rows = stmt.query_map([scope, key], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, Option<String>>(2)?,
            row.get::<_, String>(3)?,
            row.get::<_, i64>(4)?,
            row.get::<_, i64>(5)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (key, op, from, to, at, pid) = row?;
        out.push(Transition {
            key,
            op,
            from: from.as_deref().map(parse_status).transpose()?,
            to: parse_status(&to)?,
            at: UNIX_EPOCH + Duration::from_millis(at.max(0) as u64),
            pid: pid as u32,
        });
    }
    Ok(out)
}
