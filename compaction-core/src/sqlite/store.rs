//! `SqliteStore`: content-addressed blobs in a SQLite file.

use super::db::Db;
use super::error::SqliteError;
use super::now_ms;
use super::options::{SqliteOptions, SyncMode};
use crate::fence::Fence;
use crate::store::{entry_name_shown, ContentHash, Store, StoreError};
use rusqlite::{OptionalExtension, TransactionBehavior};
use std::path::Path;
use std::sync::Arc;

/// A durable [`Store`]: spilled values as content-addressed blobs in a SQLite file, plus the
/// latest checkpoint of each agent ([`save_checkpoint`](Self::save_checkpoint),
/// [`load_checkpoint`](Self::load_checkpoint)).
///
/// - `put` is idempotent (the same content is stored once) and runs in a transaction; it
///   refuses bytes that do not hash to the given address, and repairs a stored blob that no
///   longer matches its address.
/// - `get` re-hashes what it reads: `StoreError::Integrity` when the bytes were altered,
///   `StoreError::NotFound` when nothing is stored under the hash.
/// - Named entries ([`put_entry`](Store::put_entry), the summary cache) live in the same
///   file, so cached summaries survive a restart; the engine verifies them when it reads them.
/// - Clones share one connection; other threads and processes may open the same file.
///   SQLite calls block the calling thread (they are short); the futures are `Send`.
///
/// ```
/// use compaction::{ContentHash, Store, StoreError};
/// use compaction::sqlite::SqliteStore;
///
/// let path = std::env::temp_dir().join(format!("compaction-doc-store-{}.db", std::process::id()));
/// let store = SqliteStore::open(&path)?;
/// let bytes = b"[\"never touch /etc/prod\"]";
/// let hash = ContentHash::of(bytes);
/// compaction::block_on(store.put(&hash, bytes))?;
/// compaction::block_on(store.put(&hash, bytes))?; // idempotent
/// assert_eq!(compaction::block_on(store.get(&hash))?, bytes);
///
/// // Reopening the file (another process could) finds the blob again.
/// drop(store);
/// let again = SqliteStore::open(&path)?;
/// assert!(again.contains(&hash)?);
/// # drop(again);
/// # for suffix in ["", "-wal", "-shm"] {
/// #     let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
/// # }
/// # Ok::<(), StoreError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pub(super) db: Arc<Db>,
    /// The session this handle writes for, when fenced: every write checks it in its own
    /// transaction (see [`crate::fence`]).
    pub(super) fence: Option<Arc<Fence>>,
}

impl SqliteStore {
    /// Opens the database at `path`, creating the file and the schema when missing, with the
    /// default [`SqliteOptions`]. A missing directory, a read-only, locked or corrupt file
    /// gives `StoreError::Backend` whose message names the path and whose source is a
    /// [`SqliteError`] ([`SqliteError::from_store_error`] gets it back).
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, &SqliteOptions::default())
    }

    /// [`open`](Self::open) with options (busy timeout, read-only, sync mode).
    pub fn open_with(
        path: impl AsRef<Path>,
        options: &SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let db = Db::open(path.as_ref(), options, SyncMode::Normal)
            .map_err(SqliteError::into_store_error)?;
        Ok(SqliteStore {
            db: Arc::new(db),
            fence: None,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// Whether a blob is stored under `hash` (without reading or verifying it).
    pub fn contains(&self, hash: &ContentHash) -> Result<bool, StoreError> {
        let conn = self.db.lock();
        conn.prepare_cached("SELECT 1 FROM blobs WHERE hash = ?1")
            .and_then(|mut held| held.exists([hash.to_hex()]))
            .map_err(|e| self.store_error(format!("looking up blob {hash}"), e))
    }

    /// Number of stored blobs.
    pub fn blob_count(&self) -> Result<usize, StoreError> {
        let conn = self.db.lock();
        conn.query_row("SELECT count(*) FROM blobs", [], |row| row.get::<_, i64>(0))
            .map(|n| n as usize)
            .map_err(|e| self.store_error("counting blobs", e))
    }

    pub(super) fn store_error(&self, context: impl Into<String>, e: rusqlite::Error) -> StoreError {
        self.db.error(context, e).into_store_error()
    }

    /// One write transaction (`BEGIN IMMEDIATE`) on the file: this handle's fence checked
    /// first (refused with [`StoreError::Superseded`] once a newer session of its agent
    /// opened; an unfenced handle writes freely), then `write`, then the commit. An error
    /// anywhere drops the transaction, which rolls it back: nothing is written. `context` names
    /// the operation in a database error.
    pub(super) fn write<T, E: From<StoreError>>(
        &self,
        context: &dyn Fn() -> String,
        write: impl FnOnce(&rusqlite::Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        let sql = |e| self.store_error(context(), e);
        let mut conn = self.db.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        if let Some(fence) = &self.fence {
            super::fence::check(&tx, fence)
                .map_err(sql)?
                .map_err(StoreError::Superseded)?;
        }
        let value = write(&tx)?;
        tx.commit().map_err(sql)?;
        Ok(value)
    }

    fn put_sync(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        if !hash.matches(bytes) {
            return Err(StoreError::Integrity { hash: *hash });
        }
        let context = || format!("storing blob {hash}");
        self.write(&context, |tx| {
            // Same content: nothing to write. A stored blob that no longer matches its hash
            // (corrupted on disk) is replaced by the good bytes. Storing content again
            // refreshes its time (at most once a minute, to keep repeated puts read-only),
            // which is what keeps it from garbage collection until the caller's checkpoint
            // refers to it.
            tx.prepare_cached(
                "INSERT INTO blobs (hash, bytes, size, created_at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (hash) DO UPDATE SET bytes = excluded.bytes, size = excluded.size,
                     created_at_ms = excluded.created_at_ms
                 WHERE blobs.bytes IS NOT excluded.bytes
                    OR blobs.created_at_ms < excluded.created_at_ms - 60000",
            )
            .and_then(|mut put| {
                put.execute(rusqlite::params![
                    hash.to_hex(),
                    bytes,
                    bytes.len() as i64,
                    now_ms()
                ])
            })
            .map_err(|e| self.store_error(context(), e))?;
            Ok::<_, StoreError>(())
        })
    }

    fn get_sync(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        let conn = self.db.lock();
        let bytes: Option<Vec<u8>> = conn
            .prepare_cached("SELECT bytes FROM blobs WHERE hash = ?1")
            .and_then(|mut read| {
                read.query_row([hash.to_hex()], |row| {
                    // Accept text too: a hand-edited row must read as tampered, not as an error.
                    Ok(raw_bytes(row.get_ref(0)?))
                })
                .optional()
            })
            .map_err(|e| self.store_error(format!("reading blob {hash}"), e))?
            .flatten();
        drop(conn);
        let bytes = bytes.ok_or(StoreError::NotFound { hash: *hash })?;
        if !hash.matches(&bytes) {
            return Err(StoreError::Integrity { hash: *hash });
        }
        Ok(bytes)
    }
}

impl Store for SqliteStore {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        self.put_sync(hash, bytes)
    }

    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        self.get_sync(hash)
    }

    /// `get` hashes what it read: `Integrity` for a row altered on disk.
    fn verifies_reads(&self) -> bool {
        true
    }

    async fn put_entry(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let context = || format!("storing entry `{}`", entry_name_shown(name));
        self.write(&context, |tx| {
            tx.execute(
                "INSERT INTO entries (name, bytes, updated_at_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE
                     SET bytes = excluded.bytes, updated_at_ms = excluded.updated_at_ms",
                rusqlite::params![name, bytes, now_ms()],
            )
            .map_err(|e| self.store_error(context(), e))?;
            Ok::<_, StoreError>(())
        })
    }

    async fn get_entry(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let conn = self.db.lock();
        conn.prepare_cached("SELECT bytes FROM entries WHERE name = ?1")
            .and_then(|mut read| {
                read.query_row([name], |row| Ok(raw_bytes(row.get_ref(0)?)))
                    .optional()
            })
            .map(Option::flatten)
            .map_err(|e| self.store_error(format!("reading entry `{}`", entry_name_shown(name)), e))
    }
}

/// The bytes of a BLOB or TEXT value; `None` for NULL or a number.
pub(super) fn raw_bytes(value: rusqlite::types::ValueRef<'_>) -> Option<Vec<u8>> {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Blob(b) | ValueRef::Text(b) => Some(b.to_vec()),
        _ => None,
    }
}
