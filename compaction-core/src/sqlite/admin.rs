//! Operator access to a [`SqliteStore`]: list its blobs and entries, and remove the blobs no
//! checkpoint needs and the summary cache entries no longer worth keeping (the rules are in
//! [`GcOptions`](crate::sqlite::GcOptions#the-rules); `compaction verify` and `compaction gc` are built on these).

use super::now_ms;
use super::store::{raw_bytes, SqliteStore};
use crate::future::BoxFuture;
use crate::gc::{candidates, entry_is_garbage, time_of, Referenced};
use crate::gc::{BlobInfo, EntryInfo, GcError, GcOptions, GcReport, Progress, StoreAdmin};
use crate::store::{ContentHash, StoreError};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

fn blob_info(row: &rusqlite::Row<'_>) -> rusqlite::Result<BlobInfo> {
    Ok(BlobInfo {
        address: row.get(0)?,
        size: row.get::<_, i64>(1)?.max(0) as u64,
        stored_at: time_of(row.get(2)?),
    })
}

const BLOB_COLUMNS: &str = "hash, length(CAST(bytes AS BLOB)), created_at_ms";

fn list_blobs(conn: &Connection) -> rusqlite::Result<Vec<BlobInfo>> {
    let mut stmt = conn.prepare(&format!("SELECT {BLOB_COLUMNS} FROM blobs ORDER BY hash"))?;
    let rows = stmt.query_map([], blob_info)?;
    rows.collect()
}

/// Removals per write transaction of [`SqliteStore::collect_garbage`].
const DELETE_BATCH: usize = 1000;

impl SqliteStore {
    /// Every stored blob's address, size and time, by address. Verify one with
    /// [`Store::get`](crate::Store::get), which re-hashes what it reads.
    pub fn blobs(&self) -> Result<Vec<BlobInfo>, StoreError> {
        list_blobs(&self.db.lock()).map_err(|e| self.store_error("listing blobs", e))
    }

    /// Every named entry's name, size and time, by name (the summary cache's entries among
    /// them). Read one with [`Store::get_entry`](crate::Store::get_entry);
    /// [`summary_cache_problem`](crate::summaries::summary_cache_problem) says whether a summary cache
    /// entry could ever be a hit.
    pub fn entries(&self) -> Result<Vec<EntryInfo>, StoreError> {
        let conn = self.db.lock();
        let map = |e| self.store_error("listing entries", e);
        let mut stmt = conn
            .prepare(
                "SELECT name, length(CAST(bytes AS BLOB)), updated_at_ms FROM entries
                 ORDER BY name",
            )
            .map_err(map)?;
        let rows = stmt
            .query_map([], |row| {
                Ok(EntryInfo {
                    name: row.get(0)?,
                    size: row.get::<_, i64>(1)?.max(0) as u64,
                    updated_at: time_of(row.get(2)?),
                })
            })
            .map_err(map)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(map)
    }

    /// Removes the blobs no checkpoint refers to and that were stored more than the grace
    /// period ago ([`GcOptions::min_age`]), then the summary cache entries no longer worth
    /// keeping ([the rules](crate::sqlite::GcOptions#the-rules)).
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
        let map = |e| self.store_error("collecting garbage", e);
        let scan_error = |e| match e {
            ScanError::Sql(e) => GcError::Store(map(e)),
            ScanError::Unreadable(agent_id) => GcError::UnreadableCheckpoint { agent_id },
        };
        let cutoff = options.cutoff_ms(now_ms());
        let mut conn = self.db.lock();
        // Phase 1, in a read transaction that blocks no writer: parsing every checkpoint is
        // the slow part, and agents keep saving meanwhile.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(map)?;
        let mut referenced = referenced_hashes(&tx, progress).map_err(scan_error)?;
        let blobs = list_blobs(&tx).map_err(map)?;
        drop(tx); // read-only: nothing to commit
        let mut report = GcReport {
            checkpoints: referenced.seen.len(),
            dry_run: options.is_dry_run(),
            ..GcReport::default()
        };
        let candidates = candidates(blobs, &referenced, cutoff, &mut report);
        if options.is_dry_run() {
            report.freed_bytes = candidates.iter().map(|b| b.size).sum();
            report.removed = candidates;
            let removed: std::collections::HashSet<String> =
                report.removed.iter().map(|b| b.address.clone()).collect();
            let present = |conn: &Connection, h: &ContentHash| -> rusqlite::Result<bool> {
                Ok(!removed.contains(&h.to_hex()) && blob_present(conn, h)?)
            };
            prune_entries(&conn, cutoff, true, &mut report, present).map_err(map)?;
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
                    if referenced.keeps(blob) {
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
        // Phase 3: the summary cache entries whose source is gone (one write transaction).
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(map)?;
        prune_entries(&tx, cutoff, false, &mut report, blob_present).map_err(map)?;
        tx.commit().map_err(map)?;
        Ok(report)
    }
}

/// The trait form, for an operator's tool on any backend: the operations above, each a ready
/// future (one local transaction at a time).
impl StoreAdmin for SqliteStore {
    fn blobs(&self) -> BoxFuture<'_, Result<Vec<BlobInfo>, StoreError>> {
        Box::pin(std::future::ready(SqliteStore::blobs(self)))
    }

    fn entries(&self) -> BoxFuture<'_, Result<Vec<EntryInfo>, StoreError>> {
        Box::pin(std::future::ready(SqliteStore::entries(self)))
    }

    fn collect_garbage<'a>(
        &'a self,
        options: &'a GcOptions,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<GcReport, GcError>> {
        Box::pin(std::future::ready(
            self.collect_garbage_with_progress(options, progress),
        ))
    }
}

/// The stored bytes of a checkpoint part (a blob), read for garbage collection; `None` when
/// missing or unreadable (the checkpoint is then unreadable, and nothing is removed).
fn part_bytes(conn: &Connection, hash: &ContentHash) -> Option<Vec<u8>> {
    conn.query_row(
        "SELECT bytes FROM blobs WHERE hash = ?1",
        [hash.to_hex()],
        |row| Ok(raw_bytes(row.get_ref(0)?)),
    )
    .ok()
    .flatten()
}

fn blob_present(conn: &Connection, hash: &ContentHash) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT 1 FROM blobs WHERE hash = ?1",
        [hash.to_hex()],
        |_| Ok(()),
    )
    .optional()
    .map(|found| found.is_some())
}

/// Removes (or, on a dry run, lists) the summary cache entries the rules of
/// [`GcOptions`](crate::sqlite::GcOptions#the-rules) give up; `present` says whether a source's blob stays.
fn prune_entries(
    conn: &Connection,
    cutoff: i64,
    dry_run: bool,
    report: &mut GcReport,
    present: impl Fn(&Connection, &ContentHash) -> rusqlite::Result<bool>,
) -> rusqlite::Result<()> {
    let rows: Vec<(String, Option<Vec<u8>>, i64)> = {
        let mut stmt = conn.prepare(
            "SELECT name, bytes, updated_at_ms FROM entries
             WHERE name LIKE 'summary-cache/%' ORDER BY name",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok((row.get(0)?, raw_bytes(row.get_ref(1)?), row.get(2)?))
        })?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (name, bytes, updated_at_ms) in rows {
        let bytes = bytes.unwrap_or_default();
        // A blob lookup can fail: the first error ends the pass (nothing is removed wrongly).
        let mut failed = None;
        let garbage = entry_is_garbage(&name, &bytes, updated_at_ms, cutoff, |hash| {
            present(conn, hash).unwrap_or_else(|e| {
                failed = Some(e);
                true
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        if !garbage {
            report.kept_entries += 1;
            continue;
        }
        let removed = dry_run
            || conn.execute(
                "DELETE FROM entries WHERE name = ?1 AND updated_at_ms <= ?2",
                rusqlite::params![name, cutoff],
            )? > 0;
        if !removed {
            // Written again since it was read.
            report.kept_entries += 1;
            continue;
        }
        report.freed_entry_bytes += bytes.len() as u64;
        report.removed_entries.push(EntryInfo {
            name,
            size: bytes.len() as u64,
            updated_at: time_of(updated_at_ms),
        });
    }
    Ok(())
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

/// Adds the pointers of every checkpoint saved (or changed) since `referenced` was read;
/// returns the number of checkpoints now.
fn add_changed_checkpoints(
    conn: &Connection,
    referenced: &mut Referenced,
) -> Result<usize, ScanError> {
    let mut stmt = conn.prepare("SELECT agent_id, sha256 FROM checkpoints")?;
    let rows: Vec<(String, Option<Vec<u8>>)> = stmt
        .query_map([], |row| Ok((row.get(0)?, raw_bytes(row.get_ref(1)?))))?
        .collect::<Result<_, _>>()?;
    let count = rows.len();
    for (agent_id, sha256) in rows {
        if referenced.is_current(&agent_id, &sha256) {
            continue;
        }
        let json = conn.query_row(
            "SELECT json FROM checkpoints WHERE agent_id = ?1",
            [&agent_id],
            |row| Ok(raw_bytes(row.get_ref(0)?)),
        )?;
        referenced
            .add(agent_id, sha256, json.as_deref(), &|hash| {
                part_bytes(conn, hash)
            })
            .map_err(ScanError::Unreadable)?;
    }
    Ok(count)
}

/// The blobs every checkpoint refers to, read in the caller's transaction.
fn referenced_hashes(conn: &Connection, progress: Progress<'_>) -> Result<Referenced, ScanError> {
    let total: i64 = conn.query_row("SELECT count(*) FROM checkpoints", [], |row| row.get(0))?;
    let total = total.max(0) as usize;
    let mut stmt =
        conn.prepare("SELECT agent_id, sha256, json FROM checkpoints ORDER BY agent_id")?;
    let mut rows = stmt.query([])?;
    let mut referenced = Referenced::default();
    while let Some(row) = rows.next()? {
        progress(referenced.seen.len(), total);
        let json = raw_bytes(row.get_ref(2)?);
        referenced
            .add(
                row.get(0)?,
                raw_bytes(row.get_ref(1)?),
                json.as_deref(),
                &|hash| part_bytes(conn, hash),
            )
            .map_err(ScanError::Unreadable)?;
    }
    Ok(referenced)
}
