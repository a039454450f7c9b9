//! Durable store and ledger costs (issue 4): `SqliteStore` put/get throughput on 4 KiB blobs,
//! `SqliteLedger` begin+commit latency, and checkpoint save/load; `MemoryStore` alongside as the
//! floor. The database is a real file under the system temp dir (ext4 on the reference machine),
//! so the ledger's numbers include its fsync per transaction.
//!
//! ```text
//! cargo bench -p compaction-benches --bench store
//! ```

use compaction::sqlite::{SqliteOptions, SyncMode};
use compaction::{block_on, ContentHash, MemoryStore, SqliteLedger, SqliteStore, Store};
use divan::counter::BytesCount;
use divan::Bencher;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

const BLOB: usize = 4096;

/// One directory for this run's databases, removed at exit.
static DIR: LazyLock<PathBuf> = LazyLock::new(|| {
    let dir = std::env::temp_dir().join(format!("compaction-bench-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
});

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh 4 KiB blob (never stored before) and its hash.
fn fresh_blob() -> (ContentHash, Vec<u8>) {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut bytes = vec![0u8; BLOB];
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for b in bytes.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    (ContentHash::of(&bytes), bytes)
}

fn db(name: &str) -> PathBuf {
    DIR.join(name)
}

fn main() {
    divan::main();
    let _ = std::fs::remove_dir_all(&*DIR);
}

/// Store a new 4 KiB blob (one transaction each).
#[divan::bench(sample_count = 30, sample_size = 20)]
fn sqlite_put_4k_new(bencher: Bencher) {
    let store = SqliteStore::open(db("put_new.db")).unwrap();
    bencher
        .counter(BytesCount::new(BLOB))
        .with_inputs(fresh_blob)
        .bench_local_refs(|(hash, bytes)| block_on(store.put(hash, bytes)).unwrap());
}

/// Store a blob that is already there (idempotent put).
#[divan::bench(sample_count = 30, sample_size = 20)]
fn sqlite_put_4k_existing(bencher: Bencher) {
    let store = SqliteStore::open(db("put_existing.db")).unwrap();
    let (hash, bytes) = fresh_blob();
    block_on(store.put(&hash, &bytes)).unwrap();
    bencher
        .counter(BytesCount::new(BLOB))
        .bench_local(|| block_on(store.put(&hash, &bytes)).unwrap());
}

/// Read and verify a 4 KiB blob, out of 1,000 stored.
#[divan::bench(sample_count = 30, sample_size = 50)]
fn sqlite_get_4k(bencher: Bencher) {
    let store = SqliteStore::open(db("get.db")).unwrap();
    let hashes: Vec<ContentHash> = (0..1000)
        .map(|_| {
            let (hash, bytes) = fresh_blob();
            block_on(store.put(&hash, &bytes)).unwrap();
            hash
        })
        .collect();
    let mut i = 0;
    bencher.counter(BytesCount::new(BLOB)).bench_local(|| {
        i = (i + 7) % hashes.len();
        block_on(store.get(&hashes[i])).unwrap()
    });
}

/// The floor: `MemoryStore` put of a new 4 KiB blob.
#[divan::bench(sample_count = 30, sample_size = 50)]
fn memory_put_4k_new(bencher: Bencher) {
    let store = MemoryStore::new();
    bencher
        .counter(BytesCount::new(BLOB))
        .with_inputs(fresh_blob)
        .bench_local_refs(|(hash, bytes)| block_on(store.put(hash, bytes)).unwrap());
}

/// The floor: `MemoryStore` get of a 4 KiB blob.
#[divan::bench(sample_count = 30, sample_size = 50)]
fn memory_get_4k(bencher: Bencher) {
    let store = MemoryStore::new();
    let (hash, bytes) = fresh_blob();
    block_on(store.put(&hash, &bytes)).unwrap();
    bencher
        .counter(BytesCount::new(BLOB))
        .bench_local(|| block_on(store.get(&hash)).unwrap());
}

/// `begin` + `commit` of a new key with the ledger's default (`synchronous = FULL`: both
/// transactions are on disk before they return).
#[divan::bench(sample_count = 30, sample_size = 10)]
fn ledger_begin_commit_full(bencher: Bencher) {
    let ledger = SqliteLedger::open(db("ledger_full.db")).unwrap();
    bencher
        .with_inputs(|| format!("k{}", COUNTER.fetch_add(1, Ordering::Relaxed)))
        .bench_local_refs(|key| {
            ledger.begin(key).unwrap();
            ledger.commit(key).unwrap();
        });
}

/// `begin` + `commit` with `SyncMode::Normal` (crash-safe, not power-loss-safe): the cost of
/// the fsync, by difference.
#[divan::bench(sample_count = 30, sample_size = 10)]
fn ledger_begin_commit_normal(bencher: Bencher) {
    let options = SqliteOptions::new().sync_mode(SyncMode::Normal);
    let ledger = SqliteLedger::open_with(db("ledger_normal.db"), &options).unwrap();
    bencher
        .with_inputs(|| format!("k{}", COUNTER.fetch_add(1, Ordering::Relaxed)))
        .bench_local_refs(|key| {
            ledger.begin(key).unwrap();
            ledger.commit(key).unwrap();
        });
}

/// `begin` refused on a committed key (the guard's fast path after a restart).
#[divan::bench(sample_count = 30, sample_size = 20)]
fn ledger_begin_refused(bencher: Bencher) {
    let ledger = SqliteLedger::open(db("ledger_refused.db")).unwrap();
    ledger.begin("done").unwrap();
    ledger.commit("done").unwrap();
    bencher.bench_local(|| ledger.begin("done").unwrap_err());
}

/// A 2,000-record log, the newest record just committed: what an agent syncs after each
/// effect of a long session.
fn long_log() -> (compaction::EffectLog, compaction::EffectLog) {
    let mut before = compaction::EffectLog::new();
    for i in 0..2_000 {
        let key = format!("deploy:{i}");
        before
            .record(compaction::Effect::new("deploy", "svc", &key))
            .unwrap();
    }
    let mut after = before.clone();
    after.begin("deploy:1999").unwrap();
    after.commit("deploy:1999").unwrap();
    (before, after)
}

/// `MemoryLedger::sync_log` of a 2,000-record log that changed in one record (linear: each
/// record is looked up at its own position first; it was a scan per record).
#[divan::bench(sample_count = 30, sample_size = 10)]
fn memory_ledger_sync_2000(bencher: Bencher) {
    let (before, after) = long_log();
    bencher
        .with_inputs(|| {
            let ledger = compaction::MemoryLedger::new();
            block_on(compaction::EffectLedger::sync_log(&ledger, "s", &before)).unwrap();
            ledger
        })
        .bench_local_refs(|ledger| {
            block_on(compaction::EffectLedger::sync_log(&*ledger, "s", &after)).unwrap()
        });
}

/// `EffectLog::sync` of the same logs, in memory.
#[divan::bench(sample_count = 30, sample_size = 10)]
fn effect_log_sync_2000(bencher: Bencher) {
    let (before, after) = long_log();
    bencher
        .with_inputs(|| before.clone())
        .bench_local_refs(|log| log.sync(&after));
}
