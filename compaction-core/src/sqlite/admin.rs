//! Operator access to a [`SqliteStore`]: list its blobs and remove the ones no checkpoint needs
//! (the `compaction verify` and `compaction gc` commands are built on these).

use super::now_ms;
use super::store::{raw_bytes, SqliteStore};
use crate::{Compacted, ContentHash, StoreError};
use rusqlite::TransactionBehavior;
use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One stored blob, as listed by [`SqliteStore::blobs`] (its bytes are not read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobInfo {
    /// The address column as stored: 64 lowercase hex digits of the SHA-256 of the bytes,
    /// unless the row was altered.
    pub address: String,
    /// Size of the stored bytes.
    pub size: u64,
    /// When these bytes were last stored (a `put` of the same content refreshes it, at most
    /// once a minute).
    pub stored_at: SystemTime,
}

impl BlobInfo {
    /// The address as a hash; `None` when the row's address is not a canonical SHA-256 hex
    /// digest (no pointer can name such a row).
    pub fn hash(&self) -> Option<ContentHash> {
        ContentHash::from_hex(&self.address).filter(|hash| hash.to_hex() == self.address)
    }
}

/// Options of [`SqliteStore::collect_garbage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcOptions {
    dry_run: bool,
    min_age: Duration,
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            dry_run: false,
            min_age: GcOptions::DEFAULT_MIN_AGE,
        }
    }
}

impl GcOptions {
    /// How recently stored a blob may be and still be removed, by default: one hour.
    pub const DEFAULT_MIN_AGE: Duration = Duration::from_secs(3600);

    /// Remove unreferenced blobs stored more than [`DEFAULT_MIN_AGE`](Self::DEFAULT_MIN_AGE) ago.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only report what would be removed; change nothing.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Keep every blob stored less than `min_age` ago, referenced or not. A compaction stores
    /// its blobs before its checkpoint is saved; this grace period is what keeps them while
    /// the agent gets to `save_checkpoint`. Zero removes every unreferenced blob: safe only when
    /// no agent is compacting into the database.
    pub fn min_age(mut self, min_age: Duration) -> Self {
        self.min_age = min_age;
        self
    }

    /// Whether this is a dry run.
    pub fn is_dry_run(&self) -> bool {
        self.dry_run
    }

    /// The grace period.
    pub fn get_min_age(&self) -> Duration {
        self.min_age
    }
}

/// What [`SqliteStore::collect_garbage`] did (or, on a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// The blobs removed (on a dry run: that would be removed), by address.
    pub removed: Vec<BlobInfo>,
    /// Bytes of the removed blobs.
    pub freed_bytes: u64,
    /// Blobs kept because a checkpoint refers to them.
    pub kept_referenced: usize,
    /// Unreferenced blobs kept because they were stored less than the grace period ago.
    pub kept_recent: usize,
    /// Checkpoints whose references were read.
    pub checkpoints: usize,
    /// Whether nothing was changed.
    pub dry_run: bool,
}

/// Why [`SqliteStore::collect_garbage`] removed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GcError {
    /// A checkpoint's bytes do not parse, so which blobs it needs is unknown: nothing was
    /// removed. Inspect it (`compaction verify`), then delete or re-save that checkpoint.
    #[error(
        "checkpoint of agent `{agent_id}` cannot be read, so the blobs it needs are unknown; \
         removed nothing (run `compaction verify`, then delete or re-save that checkpoint)"
    )]
    UnreadableCheckpoint {
        /// The agent whose checkpoint is unreadable.
        agent_id: String,
    },
    /// The database failed; nothing was removed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Progress of a long operation: `(done, total)` items of the current phase.
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize);

fn blob_info(row: &rusqlite::Row<'_>) -> rusqlite::Result<BlobInfo> {
    Ok(BlobInfo {
        address: row.get(0)?,
        size: row.get::<_, i64>(1)?.max(0) as u64,
        stored_at: UNIX_EPOCH + Duration::from_millis(row.get::<_, i64>(2)?.max(0) as u64),
    })
}

const BLOB_COLUMNS: &str = "hash, length(CAST(bytes AS BLOB)), created_at_ms";

impl SqliteStore {
    /// Every stored blob's address, size and time, by address. Verify one with
    /// [`Store::get`](crate::Store::get), which re-hashes what it reads.
    pub fn blobs(&self) -> Result<Vec<BlobInfo>, StoreError> {
        let conn = self.db.lock();
        let map = |e| self.store_error("listing blobs", e);
        let mut stmt = conn
            .prepare(&format!("SELECT {BLOB_COLUMNS} FROM blobs ORDER BY hash"))
            .map_err(map)?;
        let rows = stmt.query_map([], blob_info).map_err(map)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(map)
    }

    /// Removes the blobs no checkpoint refers to and that were stored more than the grace
    /// period ago ([`GcOptions::min_age`]).
    ///
    /// The reference scan and the removal are one write transaction, and
    /// [`save_checkpoint`](Self::save_checkpoint) checks its blobs in its own, so a blob a
    /// saved checkpoint needs is never removed, whatever other processes do meanwhile. Blobs a
    /// compaction stored for a checkpoint not yet saved are kept by the grace period (storing
    /// the same content again refreshes it). A checkpoint that does not parse stops the run
    /// before anything is removed ([`GcError::UnreadableCheckpoint`]); one whose checksum no
    /// longer matches still protects every blob it names.
    pub fn collect_garbage(&self, options: &GcOptions) -> Result<GcReport, GcError> {
        self.collect_garbage_with_progress(options, &mut |_, _| {})
    }

    /// [`collect_garbage`](Self::collect_garbage), calling `progress(done, total)` while it
    /// reads the checkpoints and while it goes through the blobs.
    pub fn collect_garbage_with_progress(
        &self,
        options: &GcOptions,
        progress: Progress<'_>,
    ) -> Result<GcReport, GcError> {
        let context = "collecting garbage blobs";
        let map = |e| self.store_error(context, e);
        let mut conn = self.db.lock();
        // A dry run takes no write lock, so it also works on a read-only handle.
        let behavior = if options.dry_run {
            TransactionBehavior::Deferred
        } else {
            TransactionBehavior::Immediate
        };
        let tx = conn.transaction_with_behavior(behavior).map_err(map)?;
        let referenced = referenced_hashes(&tx, progress).map_err(|e| match e {
            ScanError::Sql(e) => GcError::Store(map(e)),
            ScanError::Unreadable(agent_id) => GcError::UnreadableCheckpoint { agent_id },
        })?;
        let cutoff =
            now_ms().saturating_sub(options.min_age.as_millis().min(i64::MAX as u128) as i64);
        let blobs: Vec<BlobInfo> = {
            let mut stmt = tx
                .prepare(&format!("SELECT {BLOB_COLUMNS} FROM blobs ORDER BY hash"))
                .map_err(map)?;
            let rows = stmt.query_map([], blob_info).map_err(map)?;
            rows.collect::<Result<_, _>>().map_err(map)?
        };
        let mut report = GcReport {
            checkpoints: referenced.checkpoints,
            dry_run: options.dry_run,
            ..GcReport::default()
        };
        let total = blobs.len();
        for (done, blob) in blobs.into_iter().enumerate() {
            progress(done, total);
            if blob
                .hash()
                .is_some_and(|hash| referenced.hashes.contains(&hash))
            {
                report.kept_referenced += 1;
                continue;
            }
            let stored_ms = blob
                .stored_at
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0);
            if stored_ms > cutoff {
                report.kept_recent += 1;
                continue;
            }
            if !options.dry_run {
                tx.execute("DELETE FROM blobs WHERE hash = ?1", [&blob.address])
                    .map_err(map)?;
            }
            report.freed_bytes += blob.size;
            report.removed.push(blob);
        }
        progress(total, total);
        if options.dry_run {
            tx.rollback().map_err(map)?;
        } else {
            tx.commit().map_err(map)?;
        }
        Ok(report)
    }
}

struct Referenced {
    hashes: HashSet<ContentHash>,
    checkpoints: usize,
}

enum ScanError {
    Sql(rusqlite::Error),
    Unreadable(String),
}

impl From<rusqlite::Error> for ScanError {
    fn from(e: rusqlite::Error) -> Self {
        ScanError::Sql(e)
    }
}

/// The blobs every checkpoint refers to, read in the caller's transaction.
fn referenced_hashes(
    conn: &rusqlite::Connection,
    progress: Progress<'_>,
) -> Result<Referenced, ScanError> {
    let total: i64 = conn.query_row("SELECT count(*) FROM checkpoints", [], |row| row.get(0))?;
    let total = total.max(0) as usize;
    let mut stmt = conn.prepare("SELECT agent_id, json FROM checkpoints ORDER BY agent_id")?;
    let mut rows = stmt.query([])?;
    let mut referenced = Referenced {
        hashes: HashSet::new(),
        checkpoints: 0,
    };
    while let Some(row) = rows.next()? {
        progress(referenced.checkpoints, total);
        let agent_id: String = row.get(0)?;
        // The state type is only a marker: any `Compacted<_>` reads every checkpoint.
        let parsed = raw_bytes(row.get_ref(1)?)
            .and_then(|json| serde_json::from_slice::<Compacted<()>>(&json).ok());
        let Some(compacted) = parsed else {
            return Err(ScanError::Unreadable(agent_id));
        };
        referenced
            .hashes
            .extend(compacted.pointers().iter().map(|p| p.hash()));
        referenced.checkpoints += 1;
    }
    Ok(referenced)
}
