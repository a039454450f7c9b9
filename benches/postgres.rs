//! PostgreSQL beside SQLite, same run, same machine (issue 12): ledger claims per second
//! (`begin` + `commit` of a new key) with 1 and 8 concurrent workers, checkpoint save and load
//! of the realistic bench state, and put/get of 4 KiB blobs.
//!
//! Settings: PostgreSQL is a throwaway cluster the bench starts itself (the tests' harness) on
//! 127.0.0.1 with the server's default durability (`fsync` on, `synchronous_commit` on); each
//! PostgreSQL handle pools up to 8 connections. SQLite is a file under the system temp dir with
//! the ledger's default `synchronous = FULL` and the store's `NORMAL`. The 8 workers are 8
//! threads sharing one handle (divan's `threads`): a claim per iteration per thread, so claims
//! per second are `threads / time`.
//!
//! ```text
//! cargo bench -p compaction-benches --features postgres --bench postgres
//! ```

#[path = "../tests/pg/harness.rs"]
mod harness;

use compaction::{
    block_on, Compacted, Compactor, ContentHash, Extractive, PgLedger, PgStore, SqliteLedger,
    SqliteStore, Store, Tokenizer,
};
use compaction_fixtures::realistic::{self as common, AgentState, Sizes};
use divan::counter::BytesCount;
use divan::Bencher;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

const BLOB: usize = 4096;
const THREADS: [usize; 2] = [1, 8];

/// One directory for this run's SQLite files, removed at exit.
static DIR: LazyLock<PathBuf> = LazyLock::new(|| {
    let dir = std::env::temp_dir().join(format!("compaction-bench-pg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
});

/// The PostgreSQL database of this run (the cluster goes when the process does).
static PG: LazyLock<harness::TestDb> = LazyLock::new(|| harness::TestDb::new("bench"));

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn fresh_key() -> String {
    format!("k{}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A fresh 4 KiB blob (never stored before) and its hash.
fn fresh_blob() -> (ContentHash, Vec<u8>) {
    let mut rng = common::Rng::new(COUNTER.fetch_add(1, Ordering::Relaxed) + 1);
    let bytes: Vec<u8> = (0..BLOB).map(|_| rng.next_u64() as u8).collect();
    (ContentHash::of(&bytes), bytes)
}

fn pg_store() -> PgStore {
    block_on(PgStore::connect(PG.url(), "bench")).expect("connects")
}

fn sqlite_store(name: &str) -> SqliteStore {
    SqliteStore::open(DIR.join(name)).expect("opens")
}

static PG_LEDGER: LazyLock<PgLedger> =
    LazyLock::new(|| block_on(PgLedger::connect(PG.url(), "bench")).expect("connects"));
static SQLITE_LEDGER: LazyLock<SqliteLedger> =
    LazyLock::new(|| SqliteLedger::open(DIR.join("ledger.db")).expect("opens"));

fn main() {
    // Measure with the server's default durability, like SQLite's FULL sync for the ledger.
    std::env::set_var("COMPACTION_PG_DURABLE", "1");
    println!("postgres: {}", harness::cluster().url("…"));
    divan::main();
    let _ = std::fs::remove_dir_all(&*DIR);
}

/// A claim: `begin` + `commit` of a new key, each one transaction.
#[divan::bench(threads = THREADS, sample_count = 20, sample_size = 5)]
fn claim_postgres(bencher: Bencher) {
    let ledger = &*PG_LEDGER;
    bencher.with_inputs(fresh_key).bench_refs(|key| {
        block_on(ledger.begin(key)).unwrap();
        block_on(ledger.commit(key)).unwrap();
    });
}

/// The same claim on SQLite (one file; writers take turns on its lock).
#[divan::bench(threads = THREADS, sample_count = 20, sample_size = 5)]
fn claim_sqlite(bencher: Bencher) {
    let ledger = &*SQLITE_LEDGER;
    bencher.with_inputs(fresh_key).bench_refs(|key| {
        ledger.begin(key).unwrap();
        ledger.commit(key).unwrap();
    });
}

#[divan::bench(sample_count = 20, sample_size = 20)]
fn put_4k_postgres(bencher: Bencher) {
    let store = pg_store();
    bencher
        .counter(BytesCount::new(BLOB))
        .with_inputs(fresh_blob)
        .bench_local_refs(|(hash, bytes)| block_on(store.put(hash, bytes)).unwrap());
}

#[divan::bench(sample_count = 20, sample_size = 20)]
fn put_4k_sqlite(bencher: Bencher) {
    let store = sqlite_store("put.db");
    bencher
        .counter(BytesCount::new(BLOB))
        .with_inputs(fresh_blob)
        .bench_local_refs(|(hash, bytes)| block_on(store.put(hash, bytes)).unwrap());
}

/// Read and verify one of 500 stored 4 KiB blobs.
fn bench_get(bencher: Bencher, store: impl Store) {
    let hashes: Vec<ContentHash> = (0..500)
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

#[divan::bench(sample_count = 20, sample_size = 50)]
fn get_4k_postgres(bencher: Bencher) {
    bench_get(bencher, pg_store());
}

#[divan::bench(sample_count = 20, sample_size = 50)]
fn get_4k_sqlite(bencher: Bencher) {
    bench_get(bencher, sqlite_store("get.db"));
}

static STATE: LazyLock<AgentState> = LazyLock::new(|| common::state(Sizes::from_env()));

/// The realistic state compacted with `store` (its spilled blobs land there).
fn compacted_into(store: impl Store + 'static) -> Compacted<AgentState> {
    Compactor::builder()
        .budget(32_000)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .store(store)
        .refuse_on_unknown_effects(false)
        .build()
        .expect("valid configuration")
        .compact_blocking(&*STATE)
        .expect("compacts")
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn checkpoint_save_postgres(bencher: Bencher) {
    let store = pg_store();
    let compacted = compacted_into(store.clone());
    bencher.bench_local(|| block_on(store.save_checkpoint("agent", &compacted)).unwrap());
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn checkpoint_save_sqlite(bencher: Bencher) {
    let store = sqlite_store("checkpoint_save.db");
    let compacted = compacted_into(store.clone());
    bencher.bench_local(|| store.save_checkpoint("agent", &compacted).unwrap());
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn checkpoint_load_postgres(bencher: Bencher) {
    let store = pg_store();
    block_on(store.save_checkpoint("agent", &compacted_into(store.clone()))).unwrap();
    bencher.bench_local(|| block_on(store.load_checkpoint::<AgentState>("agent")).unwrap());
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn checkpoint_load_sqlite(bencher: Bencher) {
    let store = sqlite_store("checkpoint_load.db");
    store
        .save_checkpoint("agent", &compacted_into(store.clone()))
        .unwrap();
    bencher.bench_local(|| store.load_checkpoint::<AgentState>("agent").unwrap());
}
