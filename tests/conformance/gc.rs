//! The garbage collection suite every durable store runs (`StoreAdmin`): which blobs and which
//! summary cache entries go ([the rules](compaction::sqlite::GcOptions)), what a dry run
//! reports, and that a checkpoint saved while gc runs never loses a blob.
//!
//! A backend joins with one line in `tests/backends/conformance_gc.rs`, giving its store and a hook that
//! moves every blob's and entry's stored time into the past (its own SQL).

use crate::common::{spilling_compactor, spilling_state};
use compaction::sqlite::GcOptions;
use compaction::{
    block_on, CheckpointStore, Compacted, ContentHash, Store, StoreAdmin, StoreError,
};
use std::any::Any;
use std::time::Duration;

/// A store under test: the store, and `age(seconds)` moving every blob's and entry's stored
/// time `seconds` into the past.
pub struct Fixture<T> {
    pub store: T,
    pub age: Box<dyn Fn(i64)>,
    pub keep: Box<dyn Any>,
}

/// The suite: [`rules`] and [`concurrent_saves`], each on a fresh store.
pub fn check<T, F>(make: F)
where
    T: CheckpointStore + Store + StoreAdmin + Clone + 'static,
    F: Fn() -> Fixture<T>,
{
    rules(make());
    concurrent_saves(make());
}

const HOUR: i64 = 3600;

fn gc<T: StoreAdmin>(store: &T, options: &GcOptions) -> compaction::sqlite::GcReport {
    block_on(StoreAdmin::collect_garbage(store, options, &mut |_, _| {})).unwrap()
}

fn entry_names<T: StoreAdmin>(store: &T) -> Vec<String> {
    block_on(StoreAdmin::entries(store))
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect()
}

fn holds<T: Store>(store: &T, hash: &ContentHash) -> bool {
    match block_on(store.get(hash)) {
        Ok(_) => true,
        Err(StoreError::NotFound { .. }) => false,
        Err(e) => panic!("{e}"),
    }
}

/// A summary cache entry as entries were written before they named their source: valid for
/// its name, but not tied to any blob.
fn legacy_entry(seed: &str) -> (String, Vec<u8>) {
    let key = ContentHash::of(seed.as_bytes());
    let summary = "an old summary";
    let json = serde_json::json!({
        "format": "compaction/summary-cache/1",
        "key": key.to_hex(),
        "summary_sha256": ContentHash::of(summary.as_bytes()).to_hex(),
        "summary": summary,
    });
    (
        format!("summary-cache/{}", key.to_hex()),
        serde_json::to_vec(&json).unwrap(),
    )
}

/// Blobs: unreferenced and old goes, referenced or recent stays. Entries: a summary cache entry
/// stays while its source's blob is in the store and goes with it; one that names no source,
/// or is not a valid entry, goes once old; other entries stay. A dry run reports the same and
/// changes nothing.
pub fn rules<T: CheckpointStore + Store + StoreAdmin + Clone + 'static>(fixture: Fixture<T>) {
    let store = &fixture.store;
    let checkpoints: &dyn CheckpointStore = store;
    let compacted = spilling_compactor(store)
        .compact_blocking(&spilling_state())
        .unwrap();
    block_on(checkpoints.save("agent", &compacted)).unwrap();
    let live: Vec<String> = entry_names(store)
        .into_iter()
        .filter(|n| n.starts_with("summary-cache/"))
        .collect();
    assert!(!live.is_empty(), "the compaction summarized a field");
    for name in &live {
        let bytes = block_on(store.get_entry(name)).unwrap().unwrap();
        assert_eq!(compaction::summary_cache_problem(name, &bytes), None);
    }

    let orphan = br#"{"left over":"by a checkpoint that was replaced"}"#;
    let orphan_hash = ContentHash::of(orphan);
    block_on(store.put(&orphan_hash, orphan)).unwrap();
    let (legacy, legacy_bytes) = legacy_entry("legacy");
    block_on(store.put_entry(&legacy, &legacy_bytes)).unwrap();
    let junk = format!("summary-cache/{}", "ab".repeat(32));
    block_on(store.put_entry(&junk, b"\x00\xffnot an entry")).unwrap();
    assert!(compaction::summary_cache_problem(&junk, b"\x00\xffnot an entry").is_some());
    block_on(store.put_entry("my-own-entry", b"kept whatever it holds")).unwrap();

    // Everything is recent: nothing goes.
    let report = gc(store, &GcOptions::new());
    assert!(report.removed.is_empty(), "{report:?}");
    assert!(report.removed_entries.is_empty(), "{report:?}");
    assert_eq!(report.kept_recent, 1, "{report:?}");
    assert_eq!(report.kept_entries, live.len() + 2, "{report:?}");

    (fixture.age)(2 * HOUR);
    let dry = gc(store, &GcOptions::new().dry_run(true));
    assert!(dry.dry_run);
    let removed: Vec<&str> = dry.removed.iter().map(|b| b.address.as_str()).collect();
    assert_eq!(removed, [orphan_hash.to_hex().as_str()], "{dry:?}");
    // The blobs the checkpoint points at, and its row's parts (kept beside the blobs).
    let row = block_on(checkpoints.load_row("agent")).unwrap().unwrap();
    let parts = block_on(checkpoints.read_parts(row)).unwrap().parts().len();
    assert!(parts > 0, "every built-in store keeps parts");
    assert_eq!(
        dry.kept_referenced,
        compacted.pointers().len() + parts,
        "{dry:?}"
    );
    let mut gone: Vec<&str> = dry
        .removed_entries
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    gone.sort();
    let mut expected = vec![legacy.as_str(), junk.as_str()];
    expected.sort();
    assert_eq!(gone, expected, "{dry:?}");
    assert_eq!(dry.kept_entries, live.len(), "{dry:?}");
    assert!(holds(store, &orphan_hash), "a dry run removed a blob");
    assert_eq!(
        entry_names(store).len(),
        live.len() + 3,
        "a dry run removed an entry"
    );

    let report = gc(store, &GcOptions::new());
    assert!(!report.dry_run);
    assert_eq!(report.removed, dry.removed);
    assert_eq!(report.freed_bytes, orphan.len() as u64);
    assert_eq!(report.removed_entries.len(), 2, "{report:?}");
    assert!(!holds(store, &orphan_hash));
    let mut left = entry_names(store);
    left.sort();
    let mut expected: Vec<String> = live.clone();
    expected.push("my-own-entry".into());
    expected.sort();
    assert_eq!(left, expected);
    for pointer in compacted.pointers() {
        assert!(holds(store, &pointer.hash()), "{pointer} was removed");
    }

    // The checkpoint goes: its blobs and parts, once old, go, and the summaries of its
    // sources with them.
    assert!(block_on(checkpoints.delete("agent")).unwrap());
    (fixture.age)(2 * HOUR);
    let report = gc(store, &GcOptions::new());
    assert_eq!(report.removed.len(), {
        let mut hashes: Vec<ContentHash> = compacted.pointers().iter().map(|p| p.hash()).collect();
        hashes.sort();
        hashes.dedup();
        hashes.len() + parts
    });
    assert_eq!(report.removed_entries.len(), live.len(), "{report:?}");
    assert_eq!(entry_names(store), ["my-own-entry"]);
}

/// A writer compacts and saves in a loop while gc runs, with every blob and checkpoint part the
/// writer needs in the store already as old, unreferenced garbage (left over from an earlier
/// run): exactly what gc may remove until the writer's `put` refreshes a blob, or its save
/// holds (or writes again) a part, and its checkpoint refers to them. Every save succeeds and
/// every saved checkpoint loads (each of its parts there) with its blobs, during and after.
pub fn concurrent_saves<T: CheckpointStore + Store + StoreAdmin + Clone + 'static>(
    fixture: Fixture<T>,
) {
    const ROUNDS: u32 = 8;
    let states: Vec<_> = (0..ROUNDS)
        .map(|i| {
            let mut state = spilling_state();
            state.plan_step = 100 + i;
            state
        })
        .collect();
    {
        let store = fixture.store.clone();
        let compactor = spilling_compactor(&store);
        let checkpoints: &dyn CheckpointStore = &store;
        for state in &states {
            let compacted = compactor.compact_blocking(state).unwrap();
            // Its checkpoint's parts too: saved once, then left unreferenced, they are old
            // garbage the writer's saves name again without writing them (they are held).
            block_on(checkpoints.save("warmup", &compacted)).unwrap();
        }
        assert!(block_on(checkpoints.delete("warmup")).unwrap());
        (fixture.age)(2 * HOUR);
    }
    let writer = {
        let store = fixture.store.clone();
        let states = states.clone();
        std::thread::spawn(move || {
            let compactor = spilling_compactor(&store);
            let checkpoints: &dyn CheckpointStore = &store;
            for (i, state) in states.iter().enumerate() {
                let compacted = compactor.compact_blocking(state).unwrap();
                let agent = format!("writer-{}", i % 3);
                block_on(checkpoints.save(&agent, &compacted))
                    .unwrap_or_else(|e| panic!("save {i} refused: {e}"));
                let loaded: Compacted<crate::common::MigrationState> =
                    block_on(checkpoints.load(&agent)).unwrap().unwrap();
                for pointer in loaded.pointers() {
                    assert!(
                        holds(&store, &pointer.hash()),
                        "round {i}: {pointer} is gone"
                    );
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let mut runs = 0;
    while !writer.is_finished() {
        gc(&fixture.store, &GcOptions::new());
        runs += 1;
    }
    writer.join().expect("the writer lost nothing");
    gc(&fixture.store, &GcOptions::new());
    assert!(runs > 0);
    let checkpoints: &dyn CheckpointStore = &fixture.store;
    for info in block_on(checkpoints.list()).unwrap() {
        let loaded: Compacted<crate::common::MigrationState> =
            block_on(checkpoints.load(&info.agent_id)).unwrap().unwrap();
        for pointer in loaded.pointers() {
            assert!(holds(&fixture.store, &pointer.hash()), "{pointer} is gone");
        }
    }
}
