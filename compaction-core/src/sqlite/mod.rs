//! The embedded durable backend: [`SqliteStore`] (content-addressed blobs and checkpoints) and
//! [`SqliteLedger`] (a crash-safe effect ledger), on one SQLite file that needs no server.
//!
//! SQLite is compiled into the crate (`rusqlite` with the `bundled` feature), so a fresh machine
//! needs nothing installed. Enabled by the default `sqlite` feature.
//!
//! # Where data lives
//!
//! Everything is in the one file you pass to `open` (plus SQLite's `-wal` and `-shm` files next
//! to it while a connection is open: the database runs in WAL mode). A store and a ledger may
//! share one file or use two. The tables:
//!
//! | table            | holds                                                              |
//! |------------------|--------------------------------------------------------------------|
//! | `schema_version` | one row per applied schema migration (`version`, `applied_at_ms`)   |
//! | `blobs`          | spilled values: `hash` (64 lowercase hex of SHA-256), `bytes`      |
//! | `checkpoints`    | the latest `Compacted<S>` per `agent_id`: `json`, its `sha256`     |
//! | `effects`        | one row per idempotency `key`: `action`, `target`, `status`, ...   |
//! | `effect_events`  | append-only history of every status transition of every effect   |
//!
//! # Concurrency and durability
//!
//! Handles are `Clone + Send + Sync`; clones share one connection behind a mutex. Separate
//! `open` calls (other threads, other processes on the same machine) get their own connections
//! and are serialized by SQLite's file locks: every write runs in a `BEGIN IMMEDIATE`
//! transaction and waits up to the busy timeout (default 5 s) for the write lock. The ledger
//! syncs every transaction to disk (`synchronous = FULL`) so a claim is on disk before the
//! effect runs; the blob store uses `synchronous = NORMAL` (a process crash loses nothing, a
//! power loss may lose the last writes but never corrupts the file). [`SqliteOptions`] changes
//! both.
//!
//! # Errors
//!
//! A missing directory, a read-only, locked or corrupt file, or a schema written by a newer
//! version gives a [`SqliteError`] that names the path and says which of these it is
//! ([`SqliteErrorKind`]); never a panic. The store wraps it in `StoreError::Backend` (its
//! message names the path; the `SqliteError` is its `source`), the ledger in
//! [`LedgerError::Backend`], checkpoints in `CompactionError::Store`.

mod checkpoint;
mod error;
mod ledger;
mod schema;
mod store;

pub use checkpoint::CheckpointInfo;
pub use error::{SqliteError, SqliteErrorKind};
pub use ledger::{LedgerError, SqliteLedger, SyncSummary, Transition};
pub use schema::SCHEMA_VERSION;
pub use store::SqliteStore;

/// The `rusqlite` this module is built on, for callers who need raw access to the database
/// (inspection, their own tables next to ours, tests that tamper with stored bytes).
pub use rusqlite;

use std::time::Duration;

/// How often SQLite flushes to disk (`PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Sync at WAL checkpoints only: a process crash loses nothing; a power loss may roll back
    /// the most recent transactions (never corrupting the file). The store's default.
    Normal,
    /// Sync the WAL on every commit: a committed transaction survives a power loss. The
    /// ledger's default.
    Full,
}

impl SyncMode {
    fn pragma(self) -> &'static str {
        match self {
            SyncMode::Normal => "NORMAL",
            SyncMode::Full => "FULL",
        }
    }
}

/// Options for opening a [`SqliteStore`] or [`SqliteLedger`].
///
/// ```
/// use compaction::sqlite::{SqliteOptions, SyncMode};
/// use std::time::Duration;
///
/// let options = SqliteOptions::new()
///     .busy_timeout(Duration::from_millis(250))
///     .sync_mode(SyncMode::Full);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    busy_timeout: Duration,
    read_only: bool,
    sync_mode: Option<SyncMode>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            read_only: false,
            sync_mode: None,
        }
    }
}

impl SqliteOptions {
    /// The defaults: 5 s busy timeout, read-write (the file and schema are created when
    /// missing), the component's own sync mode.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a write waits for another connection's lock before failing with
    /// [`SqliteErrorKind::Locked`].
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Opens the file read-only: it must exist and carry the schema; every write fails with
    /// [`SqliteErrorKind::ReadOnly`]. For inspecting a database another process writes.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Overrides the sync mode (store default [`SyncMode::Normal`], ledger [`SyncMode::Full`]).
    pub fn sync_mode(mut self, mode: SyncMode) -> Self {
        self.sync_mode = Some(mode);
        self
    }

    /// The busy timeout.
    pub fn get_busy_timeout(&self) -> Duration {
        self.busy_timeout
    }

    /// Whether the file is opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
