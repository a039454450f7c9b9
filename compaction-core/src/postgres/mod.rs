//! The fleet backend: [`PgStore`] (content-addressed blobs and checkpoints) and [`PgLedger`]
//! (the effect ledger) on a PostgreSQL server that many agent processes on many machines
//! share, each handle confined to one namespace (a tenant).
//!
//! Enabled by the `postgres` feature. Built on `tokio-postgres` with a `deadpool-postgres`
//! connection pool; the handles drive their connections on a small runtime of their own, so
//! they work from any caller (tokio, another executor, or `compaction::block_on` on a plain
//! thread). Every operation that talks to the server is an `async fn`.
//!
//! # Where data lives
//!
//! In the PostgreSQL schema `compaction` of the database the connection string names (created
//! on first connect, migrated in one transaction under an advisory lock):
//!
//! | table            | holds                                                              |
//! |------------------|--------------------------------------------------------------------|
//! | `schema_version` | one row per applied schema migration                               |
//! | `blobs`          | spilled values: `namespace`, `hash` (hex SHA-256), `bytes`         |
//! | `checkpoints`    | the latest `Compacted<S>` per `namespace` and `agent_id`, its hash |
//! | `effects`        | one row per `namespace`, `scope` and idempotency `key`: `status`, ... |
//! | `effect_events`  | append-only history of every status transition (a trigger refuses `UPDATE`/`DELETE`) |
//! | `checkpoint_sequences` | the newest checkpoint sequence of each agent, forward only      |
//! | `agent_fences`   | each agent's newest session `epoch`, forward only (see [`crate::fence`]) |
//!
//! # Namespaces
//!
//! Every handle is opened for one namespace (`PgStore::connect(url, "acme")`), and every query
//! it sends names that namespace as a bound parameter. Blobs, checkpoints, effects and events
//! of another namespace cannot be read, listed, overwritten or probed for existence through
//! it: the same content stored by two tenants is two rows. The separation rests on this
//! crate's queries, not on the server: code holding the connection string's credentials can
//! read every namespace with plain SQL. Give tenants that must be kept apart from each
//! other's *code* separate databases or roles.
//!
//! # Errors
//!
//! Failures are a [`PgError`] naming the server, database and namespace (never the password)
//! with a [`PgErrorKind`]: a bad connection string, an unreachable server, a connection lost
//! mid-operation, a schema written by a newer version, a corrupt row. Every write is one
//! transaction: a connection lost mid-operation leaves it applied whole or not at all. The
//! store wraps the error in `StoreError::Backend` ([`PgError::from_store_error`] gets it back),
//! checkpoints in `CompactionError::Store`.
//!
//! Connections are not encrypted (the crate links no TLS library): reach the server over a
//! private network, a Unix socket (`host=/var/run/postgresql`) or a tunnel.

mod admin;
mod checkpoint;
mod db;
mod error;
mod fence;
mod hidden;
mod ledger;
mod ledger_ops;
mod ledger_rows;
mod schema;
mod store;

/// Garbage collection's types, written once for every durable backend (SQLite and PostgreSQL).
pub use crate::gc::{BlobInfo, EntryInfo, GcError, GcOptions, GcReport, Progress};
pub use db::target_of;
pub use error::{PgError, PgErrorKind};
pub use ledger::{PgLedger, PgLedgerError};
pub use schema::SCHEMA_VERSION;
pub use store::PgStore;

/// The `tokio-postgres` this module is built on, for callers who need raw access to the
/// database (inspection, their own tables next to ours, tests that tamper with stored rows).
pub use tokio_postgres;

use std::time::Duration;

/// Options for connecting a [`PgStore`] or a [`PgLedger`].
///
/// ```
/// use compaction::postgres::PgOptions;
/// use std::time::Duration;
///
/// let options = PgOptions::new()
///     .max_connections(16)
///     .connect_timeout(Duration::from_secs(3));
/// # let _ = options;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    max_connections: usize,
    connect_timeout: Duration,
    wait_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            max_connections: 8,
            connect_timeout: Duration::from_secs(10),
            wait_timeout: Duration::from_secs(30),
        }
    }
}

impl PgOptions {
    /// The defaults: up to 8 pooled connections per handle, 10 s to connect (unless the
    /// connection string sets `connect_timeout`), 30 s to wait for a free pooled connection.
    pub fn new() -> Self {
        Self::default()
    }

    /// The most connections the handle (and its clones) keeps open at once.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }

    /// How long making a connection may take before failing with
    /// [`PgErrorKind::CannotConnect`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long an operation waits for a pooled connection when all are busy before failing
    /// with [`PgErrorKind::CannotConnect`].
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = timeout;
        self
    }
}
