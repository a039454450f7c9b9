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
//! | `agent_fences`   | each agent's newest session `epoch` (see [`crate::fence`])         |
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
//! [`SqliteLedgerError::Backend`], checkpoints in `CompactionError::Store`.

mod admin;
mod checkpoint;
mod db;
mod error;
mod fence;
mod ledger;
mod ledger_rows;
mod options;
mod store;

pub use crate::effects::AnnotatedTransition;
/// Garbage collection's types, written once for every durable backend (SQLite and PostgreSQL).
pub use crate::gc::{BlobInfo, EntryInfo, GcError, GcOptions, GcReport, Progress};
pub use db::SCHEMA_VERSION;
pub use error::{SqliteError, SqliteErrorKind};
pub use ledger::{SqliteLedger, SqliteLedgerError};
pub use options::{SqliteOptions, SyncMode};
pub use store::SqliteStore;

/// The `rusqlite` this module is built on, for callers who need raw access to the database
/// (inspection, their own tables next to ours, tests that tamper with stored bytes).
pub use rusqlite;

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
