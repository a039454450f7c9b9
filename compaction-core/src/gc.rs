//! Garbage collection, written once for every durable backend: what `gc` reports and is told
//! ([`GcOptions`], [`GcReport`], [`GcError`]), what it lists ([`BlobInfo`], [`EntryInfo`]),
//! which blobs a checkpoint keeps, and which summary cache entries are worth keeping (the
//! rules are on [`GcOptions`]).
use crate::checkpoint::{is_manifest, referenced_by_manifest, Compacted};
use crate::future::BoxFuture;
use crate::store::{ContentHash, StoreError};
use crate::summaries::cache::{inspect_entry, Inspected};
use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One stored blob, as a backend lists it (its bytes are not read).
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

/// One named entry (the summary cache), as a backend lists it (its bytes are not read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// The entry's name (`summary-cache/<64 hex digits>` for the summary cache).
    pub name: String,
    /// Size of the stored bytes.
    pub size: u64,
    /// When it was last written.
    pub updated_at: SystemTime,
}

/// Options of a backend's `collect_garbage` (`SqliteStore::collect_garbage`,
/// `PgStore::collect_garbage`), which apply these rules.
///
/// # The rules
///
/// - **Blobs.** A blob is removed when no saved checkpoint refers to it and it was stored more
///   than the grace period ago ([`GcOptions::min_age`], one hour by default). A compaction
///   stores its blobs before its checkpoint is saved; the grace period keeps them meanwhile
///   (storing the same content again restarts it). Each backend makes the last check and the
///   removal atomic with respect to `save_checkpoint`, so a blob a saved checkpoint needs is
///   never removed, whatever runs concurrently. A checkpoint that does not parse stops the run
///   before anything is removed.
/// - **Summary cache entries** (`summary-cache/...`, see the summary cache). A cached summary is
///   useful while its source may be summarized again, that is while the source's blob is in
///   the store: every compaction that summarizes a source stores it (and so refreshes its
///   time), and a checkpoint that shows the summary keeps it. So an entry is removed when it
///   was written more than the grace period ago and
///   - its source's blob is not in the store once this run's blobs are removed, or
///   - it does not name its source (written before entries did; the next compaction that
///     summarizes that source writes it again), or
///   - it is not a valid entry for its name (it could never be a cache hit).
///
///   An entry is never needed for correctness (a miss costs one summarizer call, and every hit
///   is verified), so a race with a compaction costs at most that call. Other named entries
///   are left alone.
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
    /// How recently stored a blob (or written a cache entry) may be and still be removed, by
    /// default: one hour.
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

    /// Keep every blob stored (and every cache entry written) less than `min_age` ago,
    /// referenced or not. A compaction stores its blobs before its checkpoint is saved; this
    /// grace period is what keeps them while the agent gets to `save_checkpoint`. Zero removes
    /// every unreferenced blob: safe only when no agent is compacting into the database.
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

    /// The newest time (ms since the epoch, on the clock that stamps the rows) a blob or entry
    /// may carry and be removed, given the time `now_ms`.
    pub(crate) fn cutoff_ms(&self, now_ms: i64) -> i64 {
        now_ms.saturating_sub(self.min_age.as_millis().min(i64::MAX as u128) as i64)
    }
}

/// What a backend's `collect_garbage` did (or, on a dry run, would do).
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
    /// The summary cache entries removed (on a dry run: that would be removed).
    pub removed_entries: Vec<EntryInfo>,
    /// Bytes of the removed entries.
    pub freed_entry_bytes: u64,
    /// Summary cache entries kept (written less than the grace period ago, or whose source is
    /// still in the store).
    pub kept_entries: usize,
    /// Whether nothing was changed.
    pub dry_run: bool,
}

/// Why a backend's `collect_garbage` removed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GcError {
    /// A checkpoint's bytes do not parse, so which blobs it needs is unknown: nothing was
    /// removed. Inspect it (`compaction verify`), then delete or re-save that checkpoint.
    #[error(
        "checkpoint of agent `{}` cannot be read, so the blobs it needs are unknown; \
         removed nothing (run `compaction verify`, then delete or re-save that checkpoint)",
        agent_id.escape_debug()
    )]
    UnreadableCheckpoint {
        /// The agent whose checkpoint is unreadable.
        agent_id: String,
    },
    /// The database failed; nothing was removed (or, past the first batch, what the report
    /// of an earlier run would show: each batch is its own transaction).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Progress of a long operation: `(done, total)` items of the current phase.
pub type Progress<'a> = &'a mut (dyn FnMut(usize, usize) + Send);

/// Operator access to a durable store: what it holds, and its garbage collection under
/// [the rules](GcOptions#the-rules). `SqliteStore` and `PgStore` implement it (their inherent
/// methods of the same names are the same operations), so an operator's tool (`compaction
/// verify`, `compaction gc`) works on either through `&dyn StoreAdmin`. Object-safe, with boxed
/// `Send` futures, like [`EffectLedger`](crate::effects::EffectLedger).
pub trait StoreAdmin: Send + Sync {
    /// Every stored blob: address, size and time, by address.
    fn blobs(&self) -> BoxFuture<'_, Result<Vec<BlobInfo>, StoreError>>;

    /// Every named entry (the summary cache's among them): name, size and time, by name.
    fn entries(&self) -> BoxFuture<'_, Result<Vec<EntryInfo>, StoreError>>;

    /// Removes the blobs no saved checkpoint refers to and the summary cache entries no longer
    /// worth keeping ([the rules](GcOptions#the-rules)), calling `progress(done, total)` while
    /// it goes; on a dry run, only reports what it would remove.
    fn collect_garbage<'a>(
        &'a self,
        options: &'a GcOptions,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<GcReport, GcError>>;
}

/// Milliseconds since the Unix epoch of `time` (0 before it).
pub(crate) fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The time `ms` milliseconds after the Unix epoch (the epoch for a negative value).
pub(crate) fn time_of(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

/// The blobs a checkpoint row's JSON refers to (for a manifest, its parts too, reading the
/// parts that name blobs with `part_bytes`); `None` when it does not parse.
pub(crate) fn pointers_of(
    json: &[u8],
    part_bytes: &dyn Fn(&ContentHash) -> Option<Vec<u8>>,
) -> Option<Vec<ContentHash>> {
    if is_manifest(json) {
        return referenced_by_manifest(json, part_bytes);
    }
    // The state type is only a marker: any `Compacted<_>` reads every checkpoint.
    let compacted = serde_json::from_slice::<Compacted<()>>(json).ok()?;
    Some(compacted.pointers().into_iter().map(|p| p.hash()).collect())
}

/// The blobs every checkpoint read so far refers to, and the checksum each checkpoint had
/// when it was read (a checkpoint saved again since is read again).
#[derive(Default)]
pub(crate) struct Referenced {
    pub(crate) hashes: HashSet<ContentHash>,
    pub(crate) seen: std::collections::HashMap<String, Option<Vec<u8>>>,
}

impl Referenced {
    /// Adds one checkpoint row, reading a manifest's parts that name blobs with `part_bytes`
    /// ([`gc_parts`] lists them); `Err(agent_id)` when its JSON (or such a part) does not parse
    /// or is missing.
    pub(crate) fn add(
        &mut self,
        agent_id: String,
        checksum: Option<Vec<u8>>,
        json: Option<&[u8]>,
        part_bytes: &dyn Fn(&ContentHash) -> Option<Vec<u8>>,
    ) -> Result<(), String> {
        let Some(hashes) = json.and_then(|json| pointers_of(json, part_bytes)) else {
            return Err(agent_id);
        };
        self.hashes.extend(hashes);
        self.seen.insert(agent_id, checksum);
        Ok(())
    }

    /// Whether the checkpoint of `agent_id` was read with this checksum already.
    pub(crate) fn is_current(&self, agent_id: &str, checksum: &Option<Vec<u8>>) -> bool {
        self.seen.get(agent_id) == Some(checksum)
    }

    /// Whether a checkpoint refers to the blob `blob`.
    pub(crate) fn keeps(&self, blob: &BlobInfo) -> bool {
        blob.hash().is_some_and(|h| self.hashes.contains(&h))
    }
}

/// Sorts listed blobs into kept (referenced or recent, counted in `report`) and candidates.
pub(crate) fn candidates(
    blobs: Vec<BlobInfo>,
    referenced: &Referenced,
    cutoff_ms: i64,
    report: &mut GcReport,
) -> Vec<BlobInfo> {
    let mut out = Vec::new();
    for blob in blobs {
        if referenced.keeps(&blob) {
            report.kept_referenced += 1;
        } else if millis(blob.stored_at) > cutoff_ms {
            report.kept_recent += 1;
        } else {
            out.push(blob);
        }
    }
    out
}

/// Whether a summary cache entry written at `updated_at_ms` with `bytes` under `name` is to be
/// removed ([the rules](GcOptions#the-rules)), given which blobs the store holds after this run.
pub(crate) fn entry_is_garbage(
    name: &str,
    bytes: &[u8],
    updated_at_ms: i64,
    cutoff_ms: i64,
    mut blob_present: impl FnMut(&ContentHash) -> bool,
) -> bool {
    if updated_at_ms > cutoff_ms {
        return false;
    }
    match inspect_entry(name, bytes) {
        Inspected::NotCache => false,
        Inspected::Valid {
            source: Some(source),
        } => !blob_present(&source),
        Inspected::Valid { source: None } | Inspected::Invalid(_) => true,
    }
}

/// The blob a summary cache entry depends on, when it is a valid entry that records it.
#[cfg(feature = "postgres")]
pub(crate) fn recorded_source(name: &str, bytes: &[u8]) -> Option<ContentHash> {
    match inspect_entry(name, bytes) {
        Inspected::Valid { source } => source,
        Inspected::NotCache | Inspected::Invalid(_) => None,
    }
}
