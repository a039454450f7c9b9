//! Compaction benchmarks (issue 5): floor ratio, scaling, rehydrate, peak memory.
//!
//! ```text
//! cargo bench -p compaction-benches --bench compaction
//! COMPACTION_BENCH_TINY=1 cargo bench -p compaction-benches --bench compaction -- --sample-count 1   # smoke run
//! ```
//!
//! The peak-memory measurement runs once, before the timings, and prints its own lines.

use compaction::{
    Compacted, Compactor, ContentHash, Extractive, FnReacquire, MemoryStore, Store, StoreError,
    Tokenizer,
};
use compaction_fixtures::realistic::{self, AgentState, Sizes};
use divan::Bencher;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

/// Counts live heap bytes and their high-water mark.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to `System` unchanged; only counters are updated.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const BUDGET: usize = 32_000;

fn compactor_with(store: impl Store + 'static) -> Compactor {
    Compactor::builder()
        .budget(BUDGET)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .store(store)
        .refuse_on_unknown_effects(false)
        .build()
        .expect("valid configuration")
}

fn compactor() -> Compactor {
    compactor_with(MemoryStore::new())
}

static STATE: LazyLock<AgentState> = LazyLock::new(|| realistic::state(Sizes::from_env()));

fn main() {
    let state = &*STATE;
    println!("state: {}", realistic::describe(state));
    let compacted = compactor().compact_blocking(state).expect("compacts");
    println!(
        "compacted: {} tokens (budget {BUDGET}), window {} B",
        compacted.tokens(),
        compacted.render().len()
    );
    println!("{}", compacted.report());
    memory(state);
    divan::main();
}

// ---------------------------------------------------------------------------------------------
// (1) Floor ratio: compact vs serializing the whole state.

/// `compact` of the realistic state (MemoryStore, o200k, Extractive, 32k budget).
#[divan::bench(sample_count = 20, sample_size = 1)]
fn floor_compact(bencher: Bencher) {
    let state = &*STATE;
    let compactor = compactor();
    bencher.bench_local(|| compactor.compact_blocking(state).expect("compacts"));
}

/// `serde_json::to_string` of the same whole state: the floor `compact` is compared to.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn floor_serialize_whole(bencher: Bencher) {
    let state = &*STATE;
    bencher.bench_local(|| serde_json::to_string(state).expect("serializes"));
}

/// `compact` of the same state with no summarizer: the documents leave behind their pointer
/// instead of a summary (what the summary path costs is the difference).
#[divan::bench(sample_count = 20, sample_size = 1)]
fn floor_compact_no_summarizer(bencher: Bencher) {
    let state = &*STATE;
    let compactor = Compactor::builder()
        .budget(BUDGET)
        .token_counter(Tokenizer::O200kBase)
        .store(MemoryStore::new())
        .build()
        .expect("valid configuration");
    bencher.bench_local(|| compactor.compact_blocking(state).expect("compacts"));
}

/// Parts of `compact` that any content-addressed summary of the documents needs: their JSON
/// (the summary source, stored verbatim)...
#[divan::bench(sample_count = 20, sample_size = 1)]
fn part_serialize_documents(bencher: Bencher) {
    let documents = &STATE.documents;
    bencher.bench_local(|| serde_json::to_string(documents).expect("serializes"));
}

/// ...and its SHA-256 address (computed by the engine, verified again by `MemoryStore::put`).
#[divan::bench(sample_count = 20, sample_size = 1)]
fn part_sha256_documents(bencher: Bencher) {
    let json = serde_json::to_string(&STATE.documents).expect("serializes");
    bencher.bench_local(|| ContentHash::of(json.as_bytes()));
}

// ---------------------------------------------------------------------------------------------
// (2) Scaling.

fn scaled(outputs: usize, protected_scale: usize) -> AgentState {
    let base = Sizes::from_env();
    realistic::state(Sizes {
        outputs: base.outputs * outputs / Sizes::REALISTIC.outputs,
        protected_scale,
        ..base
    })
}

/// `compact` as the redundant tool outputs grow 10x (2,000 -> 20,000), retained state fixed.
#[divan::bench(args = [2_000, 20_000], sample_count = 10, sample_size = 1)]
fn scale_redundant(bencher: Bencher, outputs: usize) {
    let state = scaled(outputs, 1);
    let compactor = compactor();
    bencher.bench_local(|| compactor.compact_blocking(&state).expect("compacts"));
}

/// `compact` as the protected state grows 10x (about 10 KB -> 100 KB).
#[divan::bench(args = [1, 5, 10], sample_count = 10, sample_size = 1)]
fn scale_protected(bencher: Bencher, protected_scale: usize) {
    let state = scaled(Sizes::REALISTIC.outputs, protected_scale);
    let compactor = compactor();
    bencher.bench_local(|| compactor.compact_blocking(&state).expect("compacts"));
}

// ---------------------------------------------------------------------------------------------
// (4) Rehydrate.

/// The author's re-acquisition of the evicted documents: a clone of a prepared value (the cost
/// of re-reading them is the author's, not the engine's).
fn reacquirer(
    state: &AgentState,
) -> FnReacquire<impl Fn(&str, &str) -> Result<serde_json::Value, compaction::ReacquireError>> {
    let documents = serde_json::to_value(&state.documents).expect("serializes");
    let config = serde_json::to_value(&state.config_contents).expect("serializes");
    FnReacquire::new(move |field: &str, _pointer: &str| match field {
        "documents" => Ok(documents.clone()),
        "config_contents" => Ok(config.clone()),
        other => Err(format!("unexpected field {other}").into()),
    })
}

fn check_rehydrated(restored: &AgentState, state: &AgentState) {
    assert_eq!(restored.constraints, state.constraints);
    assert_eq!(restored.identifiers, state.identifiers);
    assert_eq!(restored.effects, state.effects);
    assert!(restored.tool_outputs.is_empty());
}

/// `rehydrate` of the compacted realistic state from a MemoryStore.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn rehydrate_memory(bencher: Bencher) {
    bench_rehydrate(bencher, compactor());
}

/// Compacts the realistic state once with `compactor`, checks one rehydration, then times it.
fn bench_rehydrate(bencher: Bencher, compactor: Compactor) {
    let state = &*STATE;
    let compacted: Compacted<AgentState> = compactor.compact_blocking(state).expect("compacts");
    let reacquire = reacquirer(state);
    check_rehydrated(
        &compactor
            .rehydrate_blocking(&compacted, &reacquire)
            .expect("rehydrates"),
        state,
    );
    bencher.bench_local(|| {
        compactor
            .rehydrate_blocking(&compacted, &reacquire)
            .expect("rehydrates")
    });
}

/// `rehydrate` of the compacted realistic state from a SqliteStore (a file under `target/`).
#[cfg(feature = "sqlite")]
#[divan::bench(sample_count = 20, sample_size = 1)]
fn rehydrate_sqlite(bencher: Bencher) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-sqlite");
    std::fs::create_dir_all(&dir).expect("creates the directory");
    let path = dir.join("rehydrate.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let store = compaction::SqliteStore::open(&path).expect("opens the database");
    bench_rehydrate(bencher, compactor_with(store));
}

// ---------------------------------------------------------------------------------------------
// (5) Peak heap during `compact`.

/// A store that verifies and drops what it is given: the engine's own memory, without the
/// store's copies of the spilled blobs.
#[derive(Clone, Default)]
struct DiscardStore {
    largest: Arc<AtomicUsize>,
}

impl Store for DiscardStore {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        if !hash.matches(bytes) {
            return Err(StoreError::Integrity { hash: *hash });
        }
        self.largest.fetch_max(bytes.len(), Ordering::Relaxed);
        Ok(())
    }
    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        Err(StoreError::NotFound { hash: *hash })
    }
}

/// Peak heap above what was live before `compact` (the returned `Compacted`, which holds the
/// window, is included).
fn peak_of(compactor: &Compactor, state: &AgentState) -> (usize, Compacted<AgentState>) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let compacted = compactor.compact_blocking(state).expect("compacts");
    (PEAK.load(Ordering::Relaxed) - before, compacted)
}

fn memory(state: &AgentState) {
    let whole = serde_json::to_vec(state).map(|v| v.len()).unwrap_or(0);
    // Engine only: the store keeps nothing.
    let discard = DiscardStore::default();
    let compactor = compactor_with(discard.clone());
    let _warm = compactor.compact_blocking(state).expect("compacts");
    let (engine_peak, compacted) = peak_of(&compactor, state);
    let window = compacted.render().len();
    let largest = discard.largest.load(Ordering::Relaxed);
    let bound = 2 * window + largest;
    println!(
        "memory: peak heap during compact beyond the input (engine, store keeps nothing): {engine_peak} B; \
         bound 2 x window ({window} B) + largest spilled value ({largest} B) = {bound} B: {}; \
         whole state serialized: {whole} B (peak is {:.3} of it)",
        if engine_peak <= bound { "MET" } else { "MISSED" },
        engine_peak as f64 / whole.max(1) as f64
    );
    // With a fresh MemoryStore, whose copies of the spilled blobs stay on the heap.
    let store = MemoryStore::new();
    let compactor = compactor_with(store.clone());
    let (store_peak, _) = peak_of(&compactor, state);
    let stored: usize = store
        .hashes()
        .iter()
        .filter_map(|h| store.raw(h))
        .map(|b| b.len())
        .sum();
    println!(
        "memory: peak heap during compact beyond the input (fresh MemoryStore, {} blobs, {stored} B retained): {store_peak} B; \
         minus the store's retained copies: {} B",
        store.len(),
        store_peak.saturating_sub(stored)
    );
}
