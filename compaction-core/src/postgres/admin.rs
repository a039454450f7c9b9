//! Operator access to a [`PgStore`] namespace: list its blobs and entries, and remove the blobs
//! no checkpoint needs and the summary cache entries no longer worth keeping (the rules are in
//! [`GcOptions`](crate::postgres::GcOptions#the-rules)), as SQLite does.
//!
//! Concurrency rests on row locks. `save_checkpoint` takes `FOR KEY SHARE` on every blob its
//! checkpoint names, and on every checkpoint part it names that its parent checkpoint (locked
//! in the same transaction) does not, in its own transaction; a removal batch first takes `FOR UPDATE` on its
//! candidates (waiting for any save holding them), then (a new statement, so a new snapshot
//! in `READ COMMITTED`) reads the checkpoints saved since, and removes only what none of them
//! names. A save that comes later waits for the batch and then finds the blob gone, so it is
//! refused (`Store(NotFound)`) rather than saved pointing at nothing.

use super::checkpoint::read_parts;
use super::db::Db;
use super::error::Cause;
use super::hidden::hidden;
use super::store::PgStore;
use crate::checkpoint::gc_parts;
use crate::future::BoxFuture;
use crate::gc::{candidates, entry_is_garbage, time_of, Referenced};
use crate::gc::{BlobInfo, EntryInfo, GcError, GcOptions, GcReport, Progress, StoreAdmin};
use crate::store::{ContentHash, StoreError};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio_postgres::IsolationLevel;

/// Removals per transaction of [`PgStore::collect_garbage`].
const DELETE_BATCH: usize = 1000;

/// One checkpoint row: agent id, checksum, JSON, and (for a manifest) the bytes of the parts
/// that name blobs ([`gc_parts`]).
type CheckpointRow = (
    String,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    HashMap<ContentHash, Vec<u8>>,
);

impl PgStore {
    /// Every blob of this namespace: address, size and time, by address. Verify one with
    /// [`Store::get`](crate::Store::get), which re-hashes what it reads.
    pub async fn blobs(&self) -> Result<Vec<BlobInfo>, StoreError> {
        self.run("listing blobs".into(), |db| async move {
            let client = db.client().await?;
            list_blobs(&client, &db).await
        })
        .await
    }

    /// Every named entry of this namespace (the summary cache's among them): name, size and
    /// time, by name. Read one with [`Store::get_entry`](crate::Store::get_entry);
    /// [`summary_cache_problem`](crate::summaries::summary_cache_problem) says whether a summary
    /// cache entry could ever be a hit.
    pub async fn entries(&self) -> Result<Vec<EntryInfo>, StoreError> {
        self.run("listing entries".into(), |db| async move {
            let client = db.client().await?;
            let rows = client
                .query(
                    "SELECT name, octet_length(bytes)::bigint, updated_at_ms
                     FROM compaction.entries WHERE namespace = $1 ORDER BY name",
                    hidden![db.namespace()],
                )
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(EntryInfo {
                        name: row.try_get(0)?,
                        size: row.try_get::<_, i64>(1)?.max(0) as u64,
                        updated_at: time_of(row.try_get(2)?),
                    })
                })
                .collect::<Result<_, Cause>>()
        })
        .await
    }

    /// Removes this namespace's blobs that no checkpoint refers to and that were stored more
    /// than the grace period ago ([`GcOptions::min_age`], on the server's clock), then its
    /// summary cache entries no longer worth keeping, as
    /// [`SqliteStore::collect_garbage`](crate::sqlite::SqliteStore::collect_garbage) does: a
    /// blob a saved checkpoint needs is never removed, whatever other workers do meanwhile
    /// (see the module's notes on locks), and a checkpoint that does not parse stops the run
    /// before anything is removed ([`GcError::UnreadableCheckpoint`]).
    pub async fn collect_garbage(&self, options: &GcOptions) -> Result<GcReport, GcError> {
        self.collect_garbage_with_progress(options, &mut |_, _| {})
            .await
    }

    /// [`collect_garbage`](Self::collect_garbage), calling `progress(done, total)` while it
    /// goes through the blobs.
    pub async fn collect_garbage_with_progress(
        &self,
        options: &GcOptions,
        progress: Progress<'_>,
    ) -> Result<GcReport, GcError> {
        let min_age_ms = options.get_min_age().as_millis().min(i64::MAX as u128) as i64;
        // Phase 1, one consistent read of every checkpoint and blob, blocking no writer.
        let (cutoff, rows, blobs) = self
            .run("collecting garbage".into(), move |db| async move {
                let mut client = db.client().await?;
                let tx = client
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()
                    .await?;
                let now: i64 = tx
                    .query_one("SELECT compaction.now_ms()", &[])
                    .await?
                    .try_get(0)?;
                let rows = read_checkpoints(&tx, &db, None).await?;
                let blobs = list_blobs(&tx, &db).await?;
                tx.commit().await?;
                Ok((now.saturating_sub(min_age_ms), rows, blobs))
            })
            .await?;
        let mut referenced = Referenced::default();
        for (agent_id, checksum, json, parts) in rows {
            referenced
                .add(agent_id, checksum, json.as_deref(), &|h| {
                    parts.get(h).cloned()
                })
                .map_err(|agent_id| GcError::UnreadableCheckpoint { agent_id })?;
        }
        let mut report = GcReport {
            checkpoints: referenced.seen.len(),
            dry_run: options.is_dry_run(),
            ..GcReport::default()
        };
        let candidates = candidates(blobs, &referenced, cutoff, &mut report);
        if options.is_dry_run() {
            report.freed_bytes = candidates.iter().map(|b| b.size).sum();
            report.removed = candidates;
            let gone: HashSet<String> = report.removed.iter().map(|b| b.address.clone()).collect();
            self.prune_entries(cutoff, &gone, true, &mut report).await?;
            return Ok(report);
        }
        // Phase 2, a transaction per batch: lock the candidates, re-read what was saved since,
        // remove what no checkpoint names.
        let total = candidates.len();
        let mut done = 0;
        for batch in candidates.chunks(DELETE_BATCH) {
            progress(done, total);
            done += batch.len();
            let seen = referenced.seen.clone();
            // Blobs a checkpoint read in an earlier batch names are not sent again.
            let addresses: Vec<String> = batch
                .iter()
                .filter(|b| !referenced.keeps(b))
                .map(|b| b.address.clone())
                .collect();
            let (changed, count, removed) = self
                .run("collecting garbage".into(), move |db| async move {
                    remove_batch(&db, addresses, seen, cutoff).await
                })
                .await?;
            report.checkpoints = count;
            for (agent_id, checksum, json, parts) in changed {
                referenced
                    .add(agent_id, checksum, json.as_deref(), &|h| {
                        parts.get(h).cloned()
                    })
                    .map_err(|agent_id| GcError::UnreadableCheckpoint { agent_id })?;
            }
            let removed: HashSet<String> = removed.into_iter().collect();
            for blob in batch {
                if removed.contains(&blob.address) {
                    report.freed_bytes += blob.size;
                    report.removed.push(blob.clone());
                } else if referenced.keeps(blob) {
                    report.kept_referenced += 1;
                } else {
                    // Stored again since the scan (or removed by another gc).
                    report.kept_recent += 1;
                }
            }
        }
        progress(total, total);
        self.prune_entries(cutoff, &HashSet::new(), false, &mut report)
            .await?;
        Ok(report)
    }

    /// Phase 3: the summary cache entries whose source is gone (one transaction). `gone` are
    /// blobs a dry run would have removed.
    async fn prune_entries(
        &self,
        cutoff: i64,
        gone: &HashSet<String>,
        dry_run: bool,
        report: &mut GcReport,
    ) -> Result<(), GcError> {
        let gone = gone.clone();
        let (kept, removed) = self
            .run("pruning the summary cache".into(), move |db| async move {
                let mut client = db.client().await?;
                let tx = client
                    .build_transaction()
                    .isolation_level(IsolationLevel::ReadCommitted)
                    .start()
                    .await?;
                let rows = tx
                    .query(
                        "SELECT name, bytes, updated_at_ms FROM compaction.entries
                         WHERE namespace = $1 AND name LIKE 'summary-cache/%'
                         ORDER BY name",
                        hidden![db.namespace()],
                    )
                    .await?;
                let entries: Vec<(String, Vec<u8>, i64)> = rows
                    .iter()
                    .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
                    .collect::<Result<_, Cause>>()?;
                let present = present_blobs(&tx, &db, &entries).await?;
                let mut doomed = Vec::new();
                let mut kept = 0;
                for (name, bytes, at) in entries {
                    let stays = |h: &ContentHash| {
                        let hex = h.to_hex();
                        present.contains(&hex) && !gone.contains(&hex)
                    };
                    if entry_is_garbage(&name, &bytes, at, cutoff, stays) {
                        doomed.push(EntryInfo {
                            name,
                            size: bytes.len() as u64,
                            updated_at: time_of(at),
                        });
                    } else {
                        kept += 1;
                    }
                }
                if dry_run {
                    return Ok((kept, doomed));
                }
                let names: Vec<String> = doomed.iter().map(|e| e.name.clone()).collect();
                let deleted = tx
                    .query(
                        "DELETE FROM compaction.entries
                         WHERE namespace = $1 AND name = ANY($2) AND updated_at_ms <= $3
                         RETURNING name",
                        hidden![db.namespace(), names, cutoff],
                    )
                    .await?;
                tx.commit().await?;
                let deleted: HashSet<String> = deleted
                    .iter()
                    .map(|row| row.try_get(0))
                    .collect::<Result<_, _>>()?;
                // An entry written again since it was read stays.
                let (removed, rewritten): (Vec<_>, Vec<_>) =
                    doomed.into_iter().partition(|e| deleted.contains(&e.name));
                Ok((kept + rewritten.len(), removed))
            })
            .await?;
        report.kept_entries += kept;
        report.freed_entry_bytes += removed.iter().map(|e| e.size).sum::<u64>();
        report.removed_entries.extend(removed);
        Ok(())
    }
}

/// The trait form, for an operator's tool on any backend: the operations above.
impl StoreAdmin for PgStore {
    fn blobs(&self) -> BoxFuture<'_, Result<Vec<BlobInfo>, StoreError>> {
        Box::pin(PgStore::blobs(self))
    }

    fn entries(&self) -> BoxFuture<'_, Result<Vec<EntryInfo>, StoreError>> {
        Box::pin(PgStore::entries(self))
    }

    fn collect_garbage<'a>(
        &'a self,
        options: &'a GcOptions,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<GcReport, GcError>> {
        Box::pin(self.collect_garbage_with_progress(options, progress))
    }
}

async fn list_blobs(
    client: &impl deadpool_postgres::GenericClient,
    db: &Db,
) -> Result<Vec<BlobInfo>, Cause> {
    let rows = client
        .query(
            "SELECT hash, octet_length(bytes)::bigint, created_at_ms FROM compaction.blobs
             WHERE namespace = $1 ORDER BY hash",
            hidden![db.namespace()],
        )
        .await?;
    rows.iter()
        .map(|row| {
            Ok(BlobInfo {
                address: row.try_get(0)?,
                size: row.try_get::<_, i64>(1)?.max(0) as u64,
                stored_at: time_of(row.try_get(2)?),
            })
        })
        .collect()
}

/// The namespace's checkpoint rows; with `seen`, only those saved (or changed) since they were
/// read with the checksums `seen` holds, and the number of checkpoints.
async fn read_checkpoints(
    client: &impl deadpool_postgres::GenericClient,
    db: &Db,
    seen: Option<&std::collections::HashMap<String, Option<Vec<u8>>>>,
) -> Result<Vec<CheckpointRow>, Cause> {
    let rows = client
        .query(
            "SELECT agent_id, sha256 FROM compaction.checkpoints WHERE namespace = $1
             ORDER BY agent_id",
            hidden![db.namespace()],
        )
        .await?;
    let mut out = Vec::new();
    for row in rows {
        let agent_id: String = row.try_get(0)?;
        let checksum: Option<Vec<u8>> =
            row.try_get::<_, Option<String>>(1)?.map(String::into_bytes);
        if seen.is_some_and(|seen| seen.get(&agent_id) == Some(&checksum)) {
            continue;
        }
        let json: Option<String> = client
            .query_opt(
                "SELECT json FROM compaction.checkpoints WHERE namespace = $1 AND agent_id = $2",
                hidden![db.namespace(), agent_id],
            )
            .await?
            .map(|row| row.try_get(0))
            .transpose()?;
        let json = json.map(String::into_bytes);
        let wanted: Vec<String> = json
            .as_deref()
            .map(gc_parts)
            .unwrap_or_default()
            .iter()
            .map(ContentHash::to_hex)
            .collect();
        let mut parts = HashMap::new();
        if !wanted.is_empty() {
            for part in read_parts(client, db.namespace(), &wanted).await? {
                parts.insert(*part.hash(), part.bytes().to_vec());
            }
        }
        out.push((agent_id, checksum, json, parts));
    }
    Ok(out)
}

/// One removal batch: the checkpoint rows saved since the scan, the number of checkpoints,
/// and the addresses removed.
async fn remove_batch(
    db: &Arc<Db>,
    addresses: Vec<String>,
    seen: std::collections::HashMap<String, Option<Vec<u8>>>,
    cutoff: i64,
) -> Result<(Vec<CheckpointRow>, usize, Vec<String>), Cause> {
    let mut client = db.client().await?;
    // READ COMMITTED whatever the server's default: each statement below must see what
    // committed before it started (a save the lock waited for).
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await?;
    let locked = tx
        .query(
            "SELECT hash FROM compaction.blobs
             WHERE namespace = $1 AND hash = ANY($2) AND created_at_ms <= $3
             ORDER BY hash FOR UPDATE",
            hidden![db.namespace(), addresses, cutoff],
        )
        .await?;
    let locked: Vec<String> = locked
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()?;
    let count: i64 = tx
        .query_one(
            "SELECT count(*) FROM compaction.checkpoints WHERE namespace = $1",
            hidden![db.namespace()],
        )
        .await?
        .try_get(0)?;
    let changed = read_checkpoints(&tx, db, Some(&seen)).await?;
    let mut referenced = Referenced::default();
    for (agent_id, checksum, json, parts) in &changed {
        if referenced
            .add(agent_id.clone(), checksum.clone(), json.as_deref(), &|h| {
                parts.get(h).cloned()
            })
            .is_err()
        {
            // Reported by the caller, which parses the same rows; remove nothing here.
            return Ok((changed, count.max(0) as usize, Vec::new()));
        }
    }
    let doomed: Vec<String> = locked
        .into_iter()
        .filter(|address| {
            ContentHash::from_hex(address).is_none_or(|h| !referenced.hashes.contains(&h))
        })
        .collect();
    let removed = tx
        .query(
            "DELETE FROM compaction.blobs WHERE namespace = $1 AND hash = ANY($2)
             RETURNING hash",
            hidden![db.namespace(), doomed],
        )
        .await?;
    let removed: Vec<String> = removed
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()?;
    tx.commit().await?;
    Ok((changed, count.max(0) as usize, removed))
}

/// The addresses among the entries' sources that this namespace holds as blobs.
async fn present_blobs(
    client: &impl deadpool_postgres::GenericClient,
    db: &Db,
    entries: &[(String, Vec<u8>, i64)],
) -> Result<HashSet<String>, Cause> {
    let sources: Vec<String> = entries
        .iter()
        .filter_map(|(name, bytes, _)| crate::gc::recorded_source(name, bytes))
        .map(|h| h.to_hex())
        .collect();
    let rows = client
        .query(
            "SELECT hash FROM compaction.blobs WHERE namespace = $1 AND hash = ANY($2)",
            hidden![db.namespace(), sources],
        )
        .await?;
    rows.iter()
        .map(|row| row.try_get(0).map_err(Cause::from))
        .collect()
}
