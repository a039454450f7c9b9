//! Options for opening a SQLite store or ledger: busy timeout, read-only, sync mode.

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
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            SyncMode::Normal => "NORMAL",
            SyncMode::Full => "FULL",
        }
    }
}

/// Options for opening a [`SqliteStore`](super::SqliteStore) or [`SqliteLedger`](super::SqliteLedger).
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
    pub(crate) busy_timeout: Duration,
    pub(crate) read_only: bool,
    pub(crate) sync_mode: Option<SyncMode>,
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
    /// [`SqliteErrorKind::Locked`](super::SqliteErrorKind::Locked).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Opens the file read-only: it must exist and carry the schema; every write fails with
    /// [`SqliteErrorKind::ReadOnly`](super::SqliteErrorKind::ReadOnly). For inspecting a database another process writes.
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
