//! The database file: opening it (pragmas), its schema and the migrations between versions.

use super::error::{SqliteError, SqliteErrorKind};
use super::now_ms;
use super::options::{SqliteOptions, SyncMode};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Statements kept prepared per connection (rusqlite's default keeps 16; the store's, the
/// ledger's and the fence's hot statements together are about 25).
const STATEMENT_CACHE: usize = 64;

/// The schema version this crate writes. Opening a database with a lower version migrates it
/// (in one transaction); a higher version is refused with [`SqliteErrorKind::Schema`].
pub const SCHEMA_VERSION: i64 = 7;

/// The migrations, in order: `MIGRATIONS[n]` takes the schema from version `n` to `n + 1`.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "blobs, checkpoints, effects and their event history",
        r#"
    CREATE TABLE IF NOT EXISTS blobs (
        hash          TEXT    PRIMARY KEY NOT NULL,  -- 64 lowercase hex digits of SHA-256(bytes)
        bytes         BLOB    NOT NULL,
        size          INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS checkpoints (
        agent_id    TEXT    PRIMARY KEY NOT NULL,
        state_type  TEXT    NOT NULL,
        json        TEXT    NOT NULL,                -- serde_json of Compacted<S>
        sha256      TEXT    NOT NULL,                -- hex SHA-256 of json
        saved_at_ms INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS effects (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,  -- record order
        key           TEXT    NOT NULL UNIQUE,            -- idempotency key
        action        TEXT    NOT NULL DEFAULT '',
        target        TEXT    NOT NULL DEFAULT '',
        status        TEXT    NOT NULL CHECK (status IN ('not_started', 'committed', 'unknown')),
        depends_on    TEXT    NOT NULL DEFAULT '[]',      -- JSON array of keys
        payload       TEXT,                                -- JSON, or NULL
        updated_at_ms INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS effects_by_status ON effects (status);
    CREATE TABLE IF NOT EXISTS effect_events (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        key         TEXT    NOT NULL,
        op          TEXT    NOT NULL,                -- record, begin, commit, fail, reconcile, sync
        from_status TEXT,                            -- NULL when the key was new
        to_status   TEXT    NOT NULL,
        at_ms       INTEGER NOT NULL,
        pid         INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS effect_events_by_key ON effect_events (key);
    "#,
    ),
    (
        "effect scopes: a key is unique within its scope; older records get the scope ''",
        // SQLite cannot change a UNIQUE constraint in place: the table is rebuilt, keeping
        // every row and its id (the record order).
        r#"
    CREATE TABLE effects_scoped (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,  -- record order
        scope         TEXT    NOT NULL DEFAULT '',        -- the #[effect] field's scope
        key           TEXT    NOT NULL,                   -- idempotency key, unique per scope
        action        TEXT    NOT NULL DEFAULT '',
        target        TEXT    NOT NULL DEFAULT '',
        status        TEXT    NOT NULL CHECK (status IN ('not_started', 'committed', 'unknown')),
        depends_on    TEXT    NOT NULL DEFAULT '[]',      -- JSON array of keys
        payload       TEXT,                                -- JSON, or NULL
        updated_at_ms INTEGER NOT NULL,
        UNIQUE (scope, key)
    );
    INSERT INTO effects_scoped
        (id, scope, key, action, target, status, depends_on, payload, updated_at_ms)
        SELECT id, '', key, action, target, status, depends_on, payload, updated_at_ms
        FROM effects;
    DROP TABLE effects;
    ALTER TABLE effects_scoped RENAME TO effects;
    CREATE INDEX effects_by_status ON effects (scope, status);
    ALTER TABLE effect_events ADD COLUMN scope TEXT NOT NULL DEFAULT '';
    DROP INDEX IF EXISTS effect_events_by_key;
    CREATE INDEX effect_events_by_key ON effect_events (scope, key);
    "#,
    ),
    (
        "operator notes: who settled an effect and why (reconcile with a note)",
        r#"
    ALTER TABLE effect_events ADD COLUMN actor TEXT;  -- who, for an operator's reconcile
    ALTER TABLE effect_events ADD COLUMN note  TEXT;  -- why: what they checked
    "#,
    ),
    (
        "named entries beside the blobs (the summary cache)",
        r#"
    CREATE TABLE entries (
        name          TEXT    PRIMARY KEY NOT NULL,
        bytes         BLOB    NOT NULL,              -- verified by whoever reads it
        updated_at_ms INTEGER NOT NULL
    );
    "#,
    ),
    (
        "the effect history is append-only: triggers refuse to change or delete an event",
        // As on PostgreSQL: an effect's history is the evidence of what happened to it, so
        // the database itself refuses to rewrite it (whoever can drop a trigger can still;
        // `compaction verify` then finds statuses no event led to).
        r#"
    CREATE TRIGGER effect_events_no_update BEFORE UPDATE ON effect_events
    BEGIN
        SELECT RAISE(ABORT, 'effect_events is append-only');
    END;
    CREATE TRIGGER effect_events_no_delete BEFORE DELETE ON effect_events
    BEGIN
        SELECT RAISE(ABORT, 'effect_events is append-only');
    END;
    "#,
    ),
    (
        "the newest checkpoint sequence of each agent, forward only (rollback refusal)",
        r#"
    CREATE TABLE checkpoint_sequences (
        agent_id      TEXT    PRIMARY KEY NOT NULL,
        sequence      INTEGER NOT NULL CHECK (sequence >= 0),
        updated_at_ms INTEGER NOT NULL
    );
    CREATE TRIGGER checkpoint_sequences_forward_only
    BEFORE UPDATE ON checkpoint_sequences
    WHEN NEW.sequence < OLD.sequence OR NEW.agent_id IS NOT OLD.agent_id
    BEGIN
        SELECT RAISE(ABORT, 'checkpoint_sequences: a checkpoint sequence goes forward only');
    END;
    CREATE TRIGGER checkpoint_sequences_kept
    BEFORE DELETE ON checkpoint_sequences
    BEGIN
        SELECT RAISE(ABORT, 'checkpoint_sequences: a checkpoint sequence goes forward only; rows are kept');
    END;
    "#,
    ),
    (
        "fencing: each agent's newest epoch, forward only (one writer per agent)",
        // An agent with a checkpoint but no row here (saved before this version) gets its row
        // when its next session opens, and is fenced from then on.
        r#"
    CREATE TABLE agent_fences (
        agent_id      TEXT    PRIMARY KEY NOT NULL,
        epoch         INTEGER NOT NULL CHECK (epoch >= 0),
        renewed_at_ms INTEGER NOT NULL
    );
    CREATE TRIGGER agent_fences_forward_only
    BEFORE UPDATE ON agent_fences
    WHEN NEW.epoch < OLD.epoch OR NEW.agent_id IS NOT OLD.agent_id
    BEGIN
        SELECT RAISE(ABORT, 'agent_fences: an epoch goes forward only');
    END;
    CREATE TRIGGER agent_fences_kept
    BEFORE DELETE ON agent_fences
    BEGIN
        SELECT RAISE(ABORT, 'agent_fences: an epoch goes forward only; rows are kept');
    END;
    "#,
    ),
];

/// One open connection to a database file, shared by the clones of a handle.
pub(crate) struct Db {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Opens (creating when allowed) the file, sets WAL mode, the busy timeout and the sync
    /// mode, and brings the schema to [`SCHEMA_VERSION`].
    pub(crate) fn open(
        path: &Path,
        options: &SqliteOptions,
        default_sync: SyncMode,
    ) -> Result<Db, SqliteError> {
        let err = |context: &str| {
            let context = context.to_string();
            move |e: rusqlite::Error| SqliteError::new(path, context, e)
        };
        let flags = if options.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let mut conn = Connection::open_with_flags(path, flags).map_err(err("opening"))?;
        // First, so that every step below waits for other connections' locks.
        conn.busy_timeout(options.busy_timeout)
            .map_err(err("setting the busy timeout"))?;
        let deadline = Instant::now() + options.busy_timeout;
        if !options.read_only {
            // Reading the header here is also what detects a file that is not a database.
            // SQLite answers `SQLITE_BUSY` at once, without its busy handler, when another
            // process switches the same fresh file to WAL at the same moment (the switch
            // upgrades a read lock, which the handler never waits for lest it deadlock): so
            // the switch is tried again until the busy timeout has passed.
            retry_while_busy(deadline, || {
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| {
                    row.get::<_, String>(0)
                })
            })
            .map_err(err("switching to WAL mode"))?;
        }
        let sync = options.sync_mode.unwrap_or(default_sync);
        conn.pragma_update(None, "synchronous", sync.pragma())
            .map_err(err("setting the sync mode"))?;
        migrate(&mut conn, path, options.read_only, deadline)?;
        // Every statement of a request's path is prepared once per connection and reused
        // (`prepare_cached`): preparing SQL again at each call was 27% of a profiled session's
        // time (the ledger's sync reads and checks each effect at every request). Room for all
        // of them at once.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // And reused as prepared: without the query planner stability guarantee, the bundled
        // SQLite (built with STAT4) marks a statement to be prepared again whenever a parameter
        // its plan looked at is bound to a new value, as every lookup by key binds one. Every
        // statement here is an indexed lookup whose plan does not depend on the values.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
            .map_err(err("setting the query planner stability guarantee"))?;
        Ok(Db {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The connection. A panic in another thread while it held the lock cannot have left a
    /// transaction open (a dropped `Transaction` rolls back), so a poisoned lock is reused.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A `SqliteError` for this file.
    pub(crate) fn error(&self, context: impl Into<String>, e: rusqlite::Error) -> SqliteError {
        SqliteError::new(&self.path, context, e)
    }
}

/// Runs `step` again while SQLite answers busy or locked at once, until `deadline`; then
/// returns its last answer. Waits grow from 1 ms to 50 ms between tries.
fn retry_while_busy<T>(
    deadline: Instant,
    mut step: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let mut wait = Duration::from_millis(1);
    loop {
        match step() {
            Err(e) if SqliteErrorKind::of(&e) == SqliteErrorKind::Locked => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(e);
                }
                std::thread::sleep(wait.min(deadline - now));
                wait = (wait * 2).min(Duration::from_millis(50));
            }
            answer => return answer,
        }
    }
}

fn read_version(conn: &Connection) -> rusqlite::Result<i64> {
    let has_table: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
        [],
        |row| row.get(0),
    )?;
    if !has_table {
        return Ok(0);
    }
    conn.query_row("SELECT max(version) FROM schema_version", [], |row| {
        row.get::<_, Option<i64>>(0)
    })
    .optional()
    .map(|v| v.flatten().unwrap_or(0))
}

fn migrate(
    conn: &mut Connection,
    path: &Path,
    read_only: bool,
    deadline: Instant,
) -> Result<(), SqliteError> {
    let err = |context: &'static str| move |e: rusqlite::Error| SqliteError::new(path, context, e);
    let too_new = |found: i64| {
        SqliteError::without_source(
            path,
            SqliteErrorKind::Schema,
            format!(
                "reading the schema version: found {found}, this version supports up to \
                 {SCHEMA_VERSION}; upgrade the crate"
            ),
        )
    };
    // Most opens find the schema current: check with a read so they take no write lock.
    let found = retry_while_busy(deadline, || read_version(conn))
        .map_err(err("reading the schema version"))?;
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    if read_only {
        return Err(SqliteError::without_source(
            path,
            SqliteErrorKind::Schema,
            format!(
                "opening read-only: the database has schema version {found}, not \
                 {SCHEMA_VERSION}; open it read-write once to create or migrate it"
            ),
        ));
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err("migrating the schema"))?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
             version       INTEGER PRIMARY KEY NOT NULL,
             applied_at_ms INTEGER NOT NULL,
             description   TEXT    NOT NULL
         );",
    )
    .map_err(err("migrating the schema"))?;
    // Another process may have migrated while this one waited for the lock.
    let found = read_version(&tx).map_err(err("migrating the schema"))?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    for (index, (description, sql)) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql).map_err(err("migrating the schema"))?;
        tx.execute(
            "INSERT INTO schema_version (version, applied_at_ms, description) VALUES (?1, ?2, ?3)",
            rusqlite::params![index as i64 + 1, now_ms(), description],
        )
        .map_err(err("migrating the schema"))?;
    }
    tx.commit().map_err(err("migrating the schema"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the guarantee, a cached lookup is prepared again at every new key (see `open`):
    /// preparing SQL was then 27% of a profiled session's time (BENCHMARKS).
    #[test]
    fn every_connection_keeps_its_statements_prepared() {
        let dir = std::env::temp_dir().join(format!("compaction-db-qpsg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::open(
            &dir.join("a.db"),
            &SqliteOptions::default(),
            SyncMode::Normal,
        )
        .unwrap();
        let conn = db.lock();
        assert!(conn
            .db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG)
            .unwrap());
        drop(conn);
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
