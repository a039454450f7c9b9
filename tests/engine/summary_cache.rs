//! The summary cache: an unchanged field is not summarized again (across restarts with
//! SQLite), a changed source, target or summarizer is, the window is the one a fresh summary
//! gives, and a damaged or forged entry is a miss, never a wrong summary.

use crate::common;

use common::TempDir;
use compaction::sqlite::rusqlite::Connection;
use compaction::{
    Compactable, Compacted, Compactor, ContentHash, Extractive, FieldOutcome, MemoryStore,
    SqliteStore, Store, StoreError, Summarizer, SummarizerError, SummaryRequest,
};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Compactable, Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
struct Agent {
    #[protected(pin)]
    goal: String,
    #[protected]
    step: u32,
    #[redundant(summarize)]
    build_log: String,
}

/// `Extractive`'s output, counting its calls, with an identity (or none).
#[derive(Clone)]
struct Counting {
    calls: Arc<AtomicUsize>,
    identity: Option<&'static str>,
}

impl Counting {
    fn new(identity: Option<&'static str>) -> Self {
        Counting {
            calls: Arc::new(AtomicUsize::new(0)),
            identity,
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Summarizer for Counting {
    async fn summarize(&self, request: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Extractive.summarize(request).await
    }

    fn identity(&self) -> Option<String> {
        self.identity.map(str::to_owned)
    }
}

/// The agent at `turn`: its step changes every turn, its build log every 10 turns.
fn agent_at(turn: usize) -> Agent {
    Agent {
        goal: "ship the release without touching /etc/prod".into(),
        step: turn as u32,
        build_log: format!("epoch {}: ", turn / 10) + &"compiling crate ok\n".repeat(300),
    }
}

/// Summary targets are capped at 100 tokens, so the log's target does not move with the
/// other fields' sizes: what a real budget does for a field whose summary is at its cap.
fn compactor(store: impl Store + 'static, summarizer: Counting) -> Compactor {
    Compactor::builder()
        .budget(600)
        .max_summary_tokens(100)
        .summarizer(summarizer)
        .store(store)
        .build()
        .unwrap()
}

fn summarized(compacted: &Compacted<Agent>) -> bool {
    matches!(
        compacted.report().outcome("build_log"),
        Some(FieldOutcome::Summarized { .. })
    )
}

#[test]
fn an_unchanged_field_is_summarized_once_per_change() {
    let cached = Counting::new(Some("counting-extractive/1"));
    let uncached = Counting::new(None);
    let with_cache = compactor(MemoryStore::new(), cached.clone());
    let without = compactor(MemoryStore::new(), uncached.clone());
    for turn in 0..100 {
        let agent = agent_at(turn);
        let hit = with_cache.compact_blocking(&agent).unwrap();
        let fresh = without.compact_blocking(&agent).unwrap();
        assert!(summarized(&hit), "turn {turn}: {}", hit.report());
        // A cached summary gives the window a fresh one gives.
        assert_eq!(hit.render(), fresh.render(), "turn {turn}");
        let expected: Vec<&str> = if turn % 10 == 0 {
            vec![]
        } else {
            vec!["build_log"]
        };
        assert_eq!(hit.report().cached_summaries(), expected, "turn {turn}");
        assert!(fresh.report().cached_summaries().is_empty());
        assert!(hit.verify_seal());
    }
    assert_eq!(cached.calls(), 10, "one call per change of the log");
    // Without an identity nothing is cached: every compaction calls the summarizer.
    assert_eq!(uncached.calls(), 100);
}

#[test]
fn a_new_target_or_summarizer_is_a_miss() {
    let store = MemoryStore::new();
    let agent = agent_at(0);
    let first = Counting::new(Some("counting-extractive/1"));
    compactor(store.clone(), first.clone())
        .compact_blocking(&agent)
        .unwrap();
    compactor(store.clone(), first.clone())
        .compact_blocking(&agent)
        .unwrap();
    assert_eq!(first.calls(), 1, "another compactor on the same store hits");

    let smaller = Compactor::builder()
        .budget(600)
        .max_summary_tokens(90)
        .summarizer(first.clone())
        .store(store.clone())
        .build()
        .unwrap();
    let compacted = smaller.compact_blocking(&agent).unwrap();
    assert_eq!(first.calls(), 2, "a new target is summarized again");
    assert!(compacted.report().cached_summaries().is_empty());

    let other = Counting::new(Some("counting-extractive/2"));
    compactor(store.clone(), other.clone())
        .compact_blocking(&agent)
        .unwrap();
    assert_eq!(other.calls(), 1, "another summarizer identity is a miss");
    assert_eq!(store.entry_names().len(), 3);
}

#[test]
fn hits_survive_a_restart_with_sqlite() {
    let dir = TempDir::new("summary-cache");
    let path = dir.db("agent.db");
    let agent = agent_at(7);
    let summarizer = Counting::new(Some("counting-extractive/1"));
    let before = {
        let store = SqliteStore::open(&path).unwrap();
        let compacted = compactor(store.clone(), summarizer.clone())
            .compact_blocking(&agent)
            .unwrap();
        store.save_checkpoint("agent", &compacted).unwrap();
        compacted
    };
    assert_eq!(summarizer.calls(), 1);
    // A new process: a new store handle and a new compactor on the same file.
    let store = SqliteStore::open(&path).unwrap();
    let after = compactor(store.clone(), summarizer.clone())
        .compact_blocking(&agent)
        .unwrap();
    assert_eq!(
        summarizer.calls(),
        1,
        "the restarted agent's summary is a hit"
    );
    assert_eq!(after.report().cached_summaries(), ["build_log"]);
    assert_eq!(after.render(), before.render());
    // A report with a cached summary is sealed and checkpointed like any other.
    store.save_checkpoint("agent", &after).unwrap();
    let loaded: Compacted<Agent> = store.load_checkpoint("agent").unwrap().unwrap();
    assert_eq!(loaded.report().cached_summaries(), ["build_log"]);

    // An entry changed in the file behind the store's back: a miss, summarized again, and
    // the good entry is written back.
    let conn = Connection::open(&path).unwrap();
    let changed = conn
        .execute(
            "UPDATE entries SET bytes = replace(bytes, 'compiling', 'COMPILING')",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let again = compactor(store.clone(), summarizer.clone())
        .compact_blocking(&agent)
        .unwrap();
    assert_eq!(summarizer.calls(), 2);
    assert_eq!(again.render(), before.render());
    compactor(store, summarizer.clone())
        .compact_blocking(&agent)
        .unwrap();
    assert_eq!(summarizer.calls(), 2, "the rewritten entry hits again");
}

/// The only entry of a store.
fn the_entry(store: &MemoryStore) -> (String, serde_json::Value) {
    let names = store.entry_names();
    assert_eq!(names.len(), 1, "{names:?}");
    let bytes = compaction::block_on(store.get_entry(&names[0]))
        .unwrap()
        .unwrap();
    (names[0].clone(), serde_json::from_slice(&bytes).unwrap())
}

#[test]
fn a_damaged_or_forged_entry_is_a_miss_never_a_wrong_summary() {
    let store = MemoryStore::new();
    let agent = agent_at(3);
    let summarizer = Counting::new(Some("counting-extractive/1"));
    let good = compactor(store.clone(), summarizer.clone())
        .compact_blocking(&agent)
        .unwrap();
    let (name, entry) = the_entry(&store);
    let summary = entry["summary"].as_str().unwrap().to_owned();
    let sha = |text: &str| serde_json::json!(ContentHash::of(text.as_bytes()).to_hex());

    // A forged summary with its own hash recomputed passes the hash, so each forgery below
    // also breaks another check; the one with the old hash breaks the hash.
    let over_target = "word ".repeat(400);
    let mut forgeries = Vec::new();
    let mut wrong_hash = entry.clone();
    wrong_hash["summary"] = serde_json::json!(summary.replace("epoch", "EPOCH"));
    forgeries.push(serde_json::to_vec(&wrong_hash).unwrap());
    let mut too_long = entry.clone();
    too_long["summary"] = serde_json::json!(over_target);
    too_long["summary_sha256"] = sha(&over_target);
    forgeries.push(serde_json::to_vec(&too_long).unwrap());
    let mut empty = entry.clone();
    empty["summary"] = serde_json::json!(" \n");
    empty["summary_sha256"] = sha(" \n");
    forgeries.push(serde_json::to_vec(&empty).unwrap());
    let mut other_key = entry.clone();
    other_key["key"] = serde_json::json!(ContentHash::of(b"another key").to_hex());
    forgeries.push(serde_json::to_vec(&other_key).unwrap());
    forgeries.push(b"{\"summary\": \"imitates an entry\"}".to_vec());
    forgeries.push(vec![0xff, 0x00, 0x7b]);
    forgeries.push(Vec::new());

    for (i, forged) in forgeries.into_iter().enumerate() {
        store.overwrite_entry(&name, forged);
        let calls = summarizer.calls();
        let compacted = compactor(store.clone(), summarizer.clone())
            .compact_blocking(&agent)
            .unwrap();
        assert_eq!(summarizer.calls(), calls + 1, "forgery {i} was not a miss");
        assert!(compacted.report().cached_summaries().is_empty());
        assert_eq!(compacted.render(), good.render(), "forgery {i}");
        assert_eq!(the_entry(&store).1, entry, "forgery {i} was not repaired");
    }
}

/// A store of its own that implements only `put` and `get`: the default entries keep
/// nothing, so it works and nothing is cached.
#[derive(Clone, Default)]
struct BlobsOnly(MemoryStore);

impl Store for BlobsOnly {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        self.0.put(hash, bytes).await
    }
    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        self.0.get(hash).await
    }
}

#[test]
fn a_store_without_entries_works_and_caches_nothing() {
    let store = BlobsOnly::default();
    let summarizer = Counting::new(Some("counting-extractive/1"));
    let compactor = compactor(store.clone(), summarizer.clone());
    for _ in 0..3 {
        let compacted = compactor.compact_blocking(&agent_at(1)).unwrap();
        assert!(summarized(&compacted));
        assert!(compacted.report().cached_summaries().is_empty());
    }
    assert_eq!(summarizer.calls(), 3);
    assert!(store.0.entry_names().is_empty());
}
