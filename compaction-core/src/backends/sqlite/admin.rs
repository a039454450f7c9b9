//! Operator access to a [`SqliteStore`]: list its blobs and remove the ones no checkpoint needs
//! (the `compaction verify` and `compaction gc` commands are built on these).

use super::now_ms;
use super::store::{raw_bytes, SqliteStore};
use crate::checkpoint::Compacted;
use crate::store::{ContentHash, StoreError};
use rusqlite::TransactionBehavior;
use std::collections::{HashMap, HashSet};
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
    /// Every checkpoint is parsed in a read transaction (agents keep writing meanwhile); the
    /// removals run in write transactions of at most 1,000 blobs, each of which first re-reads
    /// every checkpoint saved or changed since (by its checksum) and removes a blob only if
    /// its stored time is still past the grace period. With
    /// [`save_checkpoint`](Self::save_checkpoint) checking its blobs in its own write
    /// transaction, a blob a saved checkpoint needs is never removed, whatever other processes
    /// do meanwhile, and the write lock is held only briefly. Blobs a
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
        let scan_error = |e| match e {
            ScanError::Sql(e) => GcError::Store(map(e)),
            ScanError::Unreadable(agent_id) => GcError::UnreadableCheckpoint { agent_id },
        };
        let cutoff =
            now_ms().saturating_sub(options.min_age.as_millis().min(i64::MAX as u128) as i64);
        let mut conn = self.db.lock();
        // Phase 1, in a read transaction that blocks no writer: parsing every checkpoint is
        // the slow part, and agents keep saving meanwhile.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(map)?;
        let mut referenced = referenced_hashes(&tx, progress).map_err(scan_error)?;
        let blobs: Vec<BlobInfo> = {
            let mut stmt = tx
                .prepare(&format!("SELECT {BLOB_COLUMNS} FROM blobs ORDER BY hash"))
                .map_err(map)?;
            let rows = stmt.query_map([], blob_info).map_err(map)?;
            rows.collect::<Result<_, _>>().map_err(map)?
        };
        drop(tx); // read-only: nothing to commit
        let mut report = GcReport {
            checkpoints: referenced.seen.len(),
            dry_run: options.dry_run,
            ..GcReport::default()
        };
        let mut candidates = Vec::new();
        for blob in blobs {
            if blob.hash().is_some_and(|h| referenced.hashes.contains(&h)) {
                report.kept_referenced += 1;
            } else if millis(blob.stored_at) > cutoff {
                report.kept_recent += 1;
            } else {
                candidates.push(blob);
            }
        }
        if options.dry_run {
            report.freed_bytes = candidates.iter().map(|b| b.size).sum();
            report.removed = candidates;
            return Ok(report);
        }
        // Phase 2, write transactions of at most `DELETE_BATCH` removals each: each first
        // re-reads what changed since the scan (checkpoints saved meanwhile; a blob stored
        // again has a new time), so it is short and an agent waiting to write waits little.
        let total = candidates.len();
        let mut done = 0;
        for batch in candidates.chunks(DELETE_BATCH) {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(map)?;
            report.checkpoints =
                add_changed_checkpoints(&tx, &mut referenced).map_err(scan_error)?;
            {
                let mut delete = tx
                    .prepare_cached("DELETE FROM blobs WHERE hash = ?1 AND created_at_ms <= ?2")
                    .map_err(map)?;
                for blob in batch {
                    progress(done, total);
                    done += 1;
                    if blob.hash().is_some_and(|h| referenced.hashes.contains(&h)) {
                        report.kept_referenced += 1;
                        continue;
                    }
                    if delete
                        .execute(rusqlite::params![blob.address, cutoff])
                        .map_err(map)?
                        == 0
                    {
                        // Stored again since the scan (or removed by another gc).
                        report.kept_recent += 1;
                        continue;
                    }
                    report.freed_bytes += blob.size;
                    report.removed.push(blob.clone());
                }
            }
            tx.commit().map_err(map)?;
        }
        progress(total, total);
        Ok(report)
    }
}

/// Removals per write transaction of [`SqliteStore::collect_garbage`].
const DELETE_BATCH: usize = 1000;

fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The hashes checkpoints refer to, and the checksum of each checkpoint they were read from.
struct Referenced {
    hashes: HashSet<ContentHash>,
    seen: HashMap<String, Option<Vec<u8>>>,
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

/// The pointers of one checkpoint row's JSON; `None` when it does not parse.
fn pointers_of(json: Option<Vec<u8>>) -> Option<impl Iterator<Item = ContentHash>> {
    // The state type is only a marker: any `Compacted<_>` reads every checkpoint.
    let compacted = serde_json::from_slice::<Compacted<()>>(&json?).ok()?;
    Some(compacted.pointers().into_iter().map(|p| p.hash()))
}

/// Adds the pointers of every checkpoint saved (or changed) since `referenced` was read;
/// returns the number of checkpoints now.
fn add_changed_checkpoints(
    conn: &rusqlite::Connection,
    referenced: &mut Referenced,
) -> Result<usize, ScanError> {
    let mut stmt = conn.prepare("SELECT agent_id, sha256 FROM checkpoints")?;
    let rows: Vec<(String, Option<Vec<u8>>)> = stmt
        .query_map([], |row| Ok((row.get(0)?, raw_bytes(row.get_ref(1)?))))?
        .collect::<Result<_, _>>()?;
    let count = rows.len();
    for (agent_id, sha256) in rows {
        if referenced.seen.get(&agent_id) == Some(&sha256) {
            continue;
        }
        let json = conn.query_row(
            "SELECT json FROM checkpoints WHERE agent_id = ?1",
            [&agent_id],
            |row| Ok(raw_bytes(row.get_ref(0)?)),
        )?;
        let hashes = pointers_of(json).ok_or_else(|| ScanError::Unreadable(agent_id.clone()))?;
        referenced.hashes.extend(hashes);
        referenced.seen.insert(agent_id, sha256);
    }
    Ok(count)
}

/// The blobs every checkpoint refers to, read in the caller's transaction.
fn referenced_hashes(
    conn: &rusqlite::Connection,
    progress: Progress<'_>,
) -> Result<Referenced, ScanError> {
    let total: i64 = conn.query_row("SELECT count(*) FROM checkpoints", [], |row| row.get(0))?;
    let total = total.max(0) as usize;
    let mut stmt =
        conn.prepare("SELECT agent_id, sha256, json FROM checkpoints ORDER BY agent_id")?;
    let mut rows = stmt.query([])?;
    let mut referenced = Referenced {
        hashes: HashSet::new(),
        seen: HashMap::new(),
    };
    while let Some(row) = rows.next()? {
        progress(referenced.seen.len(), total);
        let agent_id: String = row.get(0)?;
        let hashes = pointers_of(raw_bytes(row.get_ref(2)?))
            .ok_or_else(|| ScanError::Unreadable(agent_id.clone()))?;
        referenced.hashes.extend(hashes);
        referenced.seen.insert(agent_id, raw_bytes(row.get_ref(1)?));
    }
    Ok(referenced)
}
