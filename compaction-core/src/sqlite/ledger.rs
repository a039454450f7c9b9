//! `SqliteLedger`: the effect guard of [`EffectLog`], durable and shared between processes.

use super::error::{SqliteError, SqliteErrorKind};
use super::schema::Db;
use super::{now_ms, SqliteOptions, SyncMode};
use crate::{Effect, EffectError, EffectLog, EffectStatus};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why a [`SqliteLedger`] operation failed: the guard refused (the same [`EffectError`] the
/// in-memory [`EffectLog`] returns), or the database failed (with its path).
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The guard refused the transition: e.g. `begin` on a committed key
    /// ([`EffectError::AlreadyCommitted`]) or on one whose outcome is unknown
    /// ([`EffectError::OutcomeUnknown`]: reconcile it first).
    #[error(transparent)]
    Effect(#[from] EffectError),
    /// The database failed; nothing was changed.
    #[error(transparent)]
    Backend(#[from] SqliteError),
}

impl LedgerError {
    /// The guard's refusal, if this is one.
    pub fn as_effect(&self) -> Option<&EffectError> {
        match self {
            LedgerError::Effect(e) => Some(e),
            LedgerError::Backend(_) => None,
        }
    }

    /// The database failure, if this is one.
    pub fn as_backend(&self) -> Option<&SqliteError> {
        match self {
            LedgerError::Backend(e) => Some(e),
            LedgerError::Effect(_) => None,
        }
    }
}

/// One recorded status transition of an effect (the `effect_events` table, append-only).
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

/// What [`SqliteLedger::sync_log`] did.
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

/// Failure inside a ledger transaction, before the path is attached.
enum TxError {
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

/// A durable effect ledger with the guard semantics of [`EffectLog`], safe to share between
/// threads and processes.
///
/// Every operation is one `BEGIN IMMEDIATE` transaction synced to disk before it returns, so:
/// - `begin(key)` atomically claims a key: of any number of threads and processes calling it
///   at once, exactly one succeeds. The key is stored as `Unknown` while the effect is in
///   flight, so a crash (even `SIGKILL`) leaves it `Unknown`: never retried by accident.
/// - `commit` / `fail` settle an in-flight key (`Committed` / back to `NotStarted`).
/// - `begin` on a committed key returns [`EffectError::AlreadyCommitted`], on an unknown one
///   [`EffectError::OutcomeUnknown`]: check the outside world and
///   [`reconcile`](Self::reconcile).
/// - Every transition is appended to `effect_events` ([`history`](Self::history)).
///
/// ```
/// use compaction::{Effect, EffectError, EffectStatus};
/// use compaction::sqlite::{LedgerError, SqliteLedger};
///
/// let path = std::env::temp_dir().join(format!("compaction-doc-ledger-{}.db", std::process::id()));
/// let ledger = SqliteLedger::open(&path)?;
/// ledger.record(&Effect::new("apply_migration", "db://prod/users", "mig-0042"))?;
/// ledger.begin("mig-0042")?;                 // claimed: Unknown until settled
/// // ... apply the migration ...
/// ledger.commit("mig-0042")?;
///
/// // After a restart (here: a new handle), the guard still refuses to run it again.
/// let reopened = SqliteLedger::open(&path)?;
/// assert_eq!(reopened.status("mig-0042")?, Some(EffectStatus::Committed));
/// assert!(matches!(
///     reopened.begin("mig-0042"),
///     Err(LedgerError::Effect(EffectError::AlreadyCommitted { .. }))
/// ));
///
/// // An `#[effect]` field reads its records from the ledger.
/// let log = reopened.load_log()?;
/// assert_eq!(log.status("mig-0042"), Some(EffectStatus::Committed));
/// # drop((ledger, reopened));
/// # for suffix in ["", "-wal", "-shm"] {
/// #     let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
/// # }
/// # Ok::<(), LedgerError>(())
/// ```
///
/// # Backing an `EffectLog` field
///
/// The ledger is the source of truth; the `EffectLog` in the agent's state is a view of it.
/// On start, `state.migrations = ledger.load_log()?`. Run each effect through the ledger
/// (`begin`, do it, `commit` or `fail`), and refresh the view with `load_log` before
/// compacting. An agent that changed its in-memory log instead can push it with
/// [`sync_log`](Self::sync_log), which only ever moves a status forward.
#[derive(Debug, Clone)]
pub struct SqliteLedger {
    db: Arc<Db>,
}

const EFFECT_COLUMNS: &str = "action, target, key, status, depends_on, payload";

impl SqliteLedger {
    /// Opens the ledger in the database at `path`, creating the file and schema when missing.
    /// The file may be the one a [`SqliteStore`](super::SqliteStore) uses.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteLedger, LedgerError> {
        Self::open_with(path, &SqliteOptions::default())
    }

    /// [`open`](Self::open) with options (busy timeout, read-only, sync mode).
    pub fn open_with(
        path: impl AsRef<Path>,
        options: &SqliteOptions,
    ) -> Result<SqliteLedger, LedgerError> {
        let db = Db::open(path.as_ref(), options, SyncMode::Full)?;
        Ok(SqliteLedger { db: Arc::new(db) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// Records an effect (usually `NotStarted`) with its action, target, `depends_on` edges and
    /// payload. Recording the same key again with the same action, target and edges is a no-op
    /// (so an agent can re-record its plan after a restart); with different ones it is
    /// [`EffectError::DuplicateKey`]. A key that `begin` created on the spot (empty action and
    /// target) takes the recorded details, keeping its status.
    pub fn record(&self, effect: &Effect) -> Result<(), LedgerError> {
        let key = effect.idempotency_key.as_str();
        self.write(format!("recording effect `{key}`"), |tx| {
            match load_one(tx, key)? {
                None => {
                    insert(tx, effect, effect.status)?;
                    event(tx, key, "record", None, effect.status)?;
                }
                Some(existing) => {
                    let same = existing.action == effect.action
                        && existing.target == effect.target
                        && existing.depends_on == effect.depends_on;
                    let placeholder = existing.action.is_empty()
                        && existing.target.is_empty()
                        && existing.depends_on.is_empty();
                    if placeholder && !same {
                        update_details(tx, effect)?;
                    } else if !same {
                        return Err(EffectError::DuplicateKey { key: key.into() }.into());
                    }
                }
            }
            Ok(())
        })
    }

    /// Claims `key` before running its effect: `NotStarted -> Unknown` (a key not yet recorded
    /// is recorded on the spot, with empty action and target). Atomic across threads and
    /// processes; refuses a committed or unknown key.
    pub fn begin(&self, key: &str) -> Result<(), LedgerError> {
        self.begin_effect(&Effect::new("", "", key))
    }

    /// [`begin`](Self::begin) that also records the effect's action, target and edges when
    /// the key is new (one transaction).
    pub fn begin_effect(&self, effect: &Effect) -> Result<(), LedgerError> {
        let key = effect.idempotency_key.as_str();
        self.write(format!("claiming effect `{key}`"), |tx| {
            match status_of(tx, key)? {
                None => {
                    insert(tx, effect, EffectStatus::Unknown)?;
                    event(tx, key, "begin", None, EffectStatus::Unknown)?;
                    Ok(())
                }
                Some(EffectStatus::NotStarted) => {
                    set_status(tx, key, EffectStatus::Unknown)?;
                    event(
                        tx,
                        key,
                        "begin",
                        Some(EffectStatus::NotStarted),
                        EffectStatus::Unknown,
                    )?;
                    Ok(())
                }
                Some(EffectStatus::Committed) => {
                    Err(EffectError::AlreadyCommitted { key: key.into() }.into())
                }
                Some(EffectStatus::Unknown) => {
                    Err(EffectError::OutcomeUnknown { key: key.into() }.into())
                }
            }
        })
    }

    /// Settles an in-flight effect as done: `Unknown -> Committed`.
    pub fn commit(&self, key: &str) -> Result<(), LedgerError> {
        self.settle(key, "commit", EffectStatus::Committed)
    }

    /// Records that an in-flight effect certainly did not happen: `Unknown -> NotStarted`, so
    /// it may be retried.
    pub fn fail(&self, key: &str) -> Result<(), LedgerError> {
        self.settle(key, "fail", EffectStatus::NotStarted)
    }

    fn settle(&self, key: &str, op: &'static str, to: EffectStatus) -> Result<(), LedgerError> {
        self.write(
            format!("settling effect `{key}` ({op})"),
            |tx| match status_of(tx, key)? {
                None => Err(EffectError::NotFound { key: key.into() }.into()),
                Some(EffectStatus::Unknown) => {
                    set_status(tx, key, to)?;
                    event(tx, key, op, Some(EffectStatus::Unknown), to)?;
                    Ok(())
                }
                Some(status) => Err(EffectError::NotInFlight {
                    key: key.into(),
                    status,
                }
                .into()),
            },
        )
    }

    /// Sets the status an operator established by checking the outside world (any status to
    /// any status; recorded in the history as `reconcile`).
    pub fn reconcile(&self, key: &str, status: EffectStatus) -> Result<(), LedgerError> {
        self.write(format!("reconciling effect `{key}`"), |tx| {
            let from =
                status_of(tx, key)?.ok_or_else(|| EffectError::NotFound { key: key.into() })?;
            set_status(tx, key, status)?;
            event(tx, key, "reconcile", Some(from), status)?;
            Ok(())
        })
    }

    /// Sets the payload (a tool's result) of `key`.
    pub fn set_payload(&self, key: &str, payload: &serde_json::Value) -> Result<(), LedgerError> {
        self.write(format!("setting the payload of effect `{key}`"), |tx| {
            let n = tx.execute(
                "UPDATE effects SET payload = ?2, updated_at_ms = ?3 WHERE key = ?1",
                rusqlite::params![key, payload.to_string(), now_ms()],
            )?;
            if n == 0 {
                return Err(EffectError::NotFound { key: key.into() }.into());
            }
            Ok(())
        })
    }

    /// The status of `key`, if recorded.
    pub fn status(&self, key: &str) -> Result<Option<EffectStatus>, LedgerError> {
        self.read(format!("reading the status of effect `{key}`"), |conn| {
            status_of(conn, key)
        })
    }

    /// The effect under `key`, if recorded.
    pub fn get(&self, key: &str) -> Result<Option<Effect>, LedgerError> {
        self.read(format!("reading effect `{key}`"), |conn| {
            load_one(conn, key)
        })
    }

    /// The effects with `status`, in record order. `list(EffectStatus::Unknown)` is the
    /// operator's to-do list after a crash.
    pub fn list(&self, status: EffectStatus) -> Result<Vec<Effect>, LedgerError> {
        self.read(format!("listing {status} effects"), |conn| {
            load_where(conn, Some(status))
        })
    }

    /// Every effect, in record order.
    pub fn effects(&self) -> Result<Vec<Effect>, LedgerError> {
        self.read("listing effects", |conn| load_where(conn, None))
    }

    /// The ledger as an [`EffectLog`] (records in order, with payloads): the value of an
    /// `#[effect]` field backed by this ledger.
    pub fn load_log(&self) -> Result<EffectLog, LedgerError> {
        let effects = self.effects()?;
        EffectLog::from_effects(effects).map_err(LedgerError::from)
    }

    /// Writes an in-memory [`EffectLog`] into the ledger, in one transaction: records the
    /// ledger lacks are inserted with their status; for known keys, action, target, edges and
    /// payload are updated and the status moves *forward* only (`not_started -> unknown`,
    /// `not_started -> committed`, `unknown -> committed`). A log status that would move the
    /// ledger backwards (it may be stale: another process claimed the key since) is not
    /// applied and is reported in [`SyncSummary::kept`]; use [`fail`](Self::fail) or
    /// [`reconcile`](Self::reconcile) for those transitions.
    pub fn sync_log(&self, log: &EffectLog) -> Result<SyncSummary, LedgerError> {
        self.write("syncing an effect log", |tx| {
            let mut summary = SyncSummary::default();
            for effect in log {
                let key = effect.idempotency_key.as_str();
                match status_of(tx, key)? {
                    None => {
                        insert(tx, effect, effect.status)?;
                        event(tx, key, "sync", None, effect.status)?;
                        summary.inserted += 1;
                    }
                    Some(current) => {
                        update_details(tx, effect)?;
                        let forward = matches!(
                            (current, effect.status),
                            (EffectStatus::NotStarted, EffectStatus::Unknown)
                                | (EffectStatus::NotStarted, EffectStatus::Committed)
                                | (EffectStatus::Unknown, EffectStatus::Committed)
                        );
                        if forward {
                            set_status(tx, key, effect.status)?;
                            event(tx, key, "sync", Some(current), effect.status)?;
                            summary.advanced += 1;
                        } else if current != effect.status {
                            summary.kept.push((key.to_string(), current, effect.status));
                        }
                    }
                }
            }
            Ok(summary)
        })
    }

    /// Every recorded transition of `key`, oldest first.
    pub fn history(&self, key: &str) -> Result<Vec<Transition>, LedgerError> {
        self.read(format!("reading the history of effect `{key}`"), |conn| {
            let mut stmt = conn.prepare(
                "SELECT key, op, from_status, to_status, at_ms, pid FROM effect_events
                 WHERE key = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map([key], |row| {
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
        })
    }

    fn read<T>(
        &self,
        context: impl Into<String>,
        f: impl FnOnce(&Connection) -> Result<T, TxError>,
    ) -> Result<T, LedgerError> {
        let conn = self.db.lock();
        f(&conn).map_err(|e| self.ledger_error(context.into(), e))
    }

    fn write<T>(
        &self,
        context: impl Into<String>,
        f: impl FnOnce(&Connection) -> Result<T, TxError>,
    ) -> Result<T, LedgerError> {
        let mut conn = self.db.lock();
        let result = (|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = f(&tx)?; // on error, dropping `tx` rolls back
            tx.commit()?;
            Ok(value)
        })();
        result.map_err(|e| self.ledger_error(context.into(), e))
    }

    fn ledger_error(&self, context: String, e: TxError) -> LedgerError {
        match e {
            TxError::Effect(e) => LedgerError::Effect(e),
            TxError::Sql(e) => LedgerError::Backend(self.db.error(context, e)),
            TxError::Corrupt(detail) => LedgerError::Backend(SqliteError::without_source(
                self.db.path(),
                SqliteErrorKind::Corrupt,
                format!("{context}: {detail}"),
            )),
        }
    }
}

fn parse_status(text: &str) -> Result<EffectStatus, TxError> {
    match text {
        "not_started" => Ok(EffectStatus::NotStarted),
        "committed" => Ok(EffectStatus::Committed),
        "unknown" => Ok(EffectStatus::Unknown),
        other => Err(TxError::Corrupt(format!("unknown effect status `{other}`"))),
    }
}

fn status_of(conn: &Connection, key: &str) -> Result<Option<EffectStatus>, TxError> {
    let status: Option<String> = conn
        .query_row("SELECT status FROM effects WHERE key = ?1", [key], |row| {
            row.get(0)
        })
        .optional()?;
    status.as_deref().map(parse_status).transpose()
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

fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
    ))
}

fn load_one(conn: &Connection, key: &str) -> Result<Option<Effect>, TxError> {
    let row = conn
        .query_row(
            &format!("SELECT {EFFECT_COLUMNS} FROM effects WHERE key = ?1"),
            [key],
            read_row,
        )
        .optional()?;
    row.map(effect_from_row).transpose()
}

fn load_where(conn: &Connection, status: Option<EffectStatus>) -> Result<Vec<Effect>, TxError> {
    let mut stmt = match status {
        Some(_) => conn.prepare(&format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE status = ?1 ORDER BY id"
        ))?,
        None => conn.prepare(&format!("SELECT {EFFECT_COLUMNS} FROM effects ORDER BY id"))?,
    };
    let rows: Vec<Row> = match status {
        Some(s) => stmt
            .query_map([s.as_str()], read_row)?
            .collect::<Result<_, _>>()?,
        None => stmt.query_map([], read_row)?.collect::<Result<_, _>>()?,
    };
    rows.into_iter().map(effect_from_row).collect()
}

fn json_of<T: serde::Serialize>(value: &T) -> Result<String, TxError> {
    serde_json::to_string(value).map_err(|e| TxError::Corrupt(e.to_string()))
}

fn insert(conn: &Connection, effect: &Effect, status: EffectStatus) -> Result<(), TxError> {
    let payload = effect.payload.as_ref().map(json_of).transpose()?;
    conn.execute(
        "INSERT INTO effects (key, action, target, status, depends_on, payload, updated_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        rusqlite::params![
            effect.idempotency_key,
            effect.action,
            effect.target,
            status.as_str(),
            json_of(&effect.depends_on)?,
            payload,
            now_ms()
        ],
    )?;
    Ok(())
}

fn update_details(conn: &Connection, effect: &Effect) -> Result<(), TxError> {
    let payload = effect.payload.as_ref().map(json_of).transpose()?;
    conn.execute(
        "UPDATE effects SET action = ?2, target = ?3, depends_on = ?4,
             payload = coalesce(?5, payload), updated_at_ms = ?6
         WHERE key = ?1",
        rusqlite::params![
            effect.idempotency_key,
            effect.action,
            effect.target,
            json_of(&effect.depends_on)?,
            payload,
            now_ms()
        ],
    )?;
    Ok(())
}

fn set_status(conn: &Connection, key: &str, status: EffectStatus) -> Result<(), TxError> {
    conn.execute(
        "UPDATE effects SET status = ?2, updated_at_ms = ?3 WHERE key = ?1",
        rusqlite::params![key, status.as_str(), now_ms()],
    )?;
    Ok(())
}

fn event(
    conn: &Connection,
    key: &str,
    op: &str,
    from: Option<EffectStatus>,
    to: EffectStatus,
) -> Result<(), TxError> {
    conn.execute(
        "INSERT INTO effect_events (key, op, from_status, to_status, at_ms, pid)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        rusqlite::params![
            key,
            op,
            from.map(EffectStatus::as_str),
            to.as_str(),
            now_ms(),
            std::process::id()
        ],
    )?;
    Ok(())
}
