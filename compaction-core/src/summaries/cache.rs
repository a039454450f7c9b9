//! The summary cache: a summary made for a source, a target and a summarizer is reused while
//! all three are unchanged, so an unchanged field is not summarized (nor paid for) again.
//!
//! Each summary is one named entry of the configured store ([`Store::put_entry`]), so it
//! lives as long as the store does (across restarts with SQLite, across a fleet's processes
//! with PostgreSQL, per namespace). An entry is not content-addressed, so its reader proves
//! it: the entry names its key and the SHA-256 of its summary, and a cached summary is held to
//! the same contract as a fresh one (not empty, within its target; the schema was checked
//! before the lookup). An entry that fails any check is a miss, logged at `warn` without its
//! content, and is overwritten by the fresh summary: never a wrong summary, never a failed
//! compaction. What the hash does not stop is a writer of the store forging a consistent
//! entry: whoever can write the store can write the state it holds.
//!
//! [`Store::put_entry`]: crate::store::Store::put_entry

use crate::report::{CompactionReport, FieldOutcome};
use crate::store::{ContentHash, DynStore};
use crate::summaries::contract::check_summary;
use crate::tokens::TokenCounter;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// The format tag of an entry, and part of every key: a new format never reads an old entry.
const FORMAT: &str = "compaction/summary-cache/1";

/// Every summary cache entry's name starts with this.
const ENTRY_PREFIX: &str = "summary-cache/";

/// What one summary is made of: the source, the target and the summarizer's identity (their
/// hash, the key); and the source's own hash, which the entry records so that garbage
/// collection knows which blob it depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheKey {
    key: ContentHash,
    source: ContentHash,
}

impl CacheKey {
    /// The key of a summary of the source whose SHA-256 is `source` (the planner hashes it
    /// once, for its store address too) in at most `target` tokens by the summarizer whose
    /// [`identity`](crate::summaries::Summarizer::identity) is `identity`.
    pub(crate) fn new(identity: &str, source: &ContentHash, target: usize) -> CacheKey {
        // The identity comes last and every part before it has a fixed form (a number, 64
        // hex digits), so no identity can make two different triples hash the same text.
        let text = format!("{FORMAT}\0{target}\0{}\0{identity}", source.to_hex());
        CacheKey {
            key: ContentHash::of(text.as_bytes()),
            source: *source,
        }
    }

    /// The name of the store entry that holds the summary.
    pub(crate) fn entry_name(&self) -> String {
        name_of(&self.key)
    }
}

fn name_of(key: &ContentHash) -> String {
    format!("{ENTRY_PREFIX}{}", key.to_hex())
}

/// One cached summary as the store holds it. `source` (the SHA-256 of what was summarized,
/// the address of its blob) is absent from entries written before it was recorded.
#[derive(Serialize, Deserialize)]
struct CachedSummary {
    format: String,
    key: ContentHash,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<ContentHash>,
    summary_sha256: ContentHash,
    summary: String,
}

/// What a named entry is, to garbage collection and `verify`.
pub(crate) enum Inspected {
    /// Not a summary cache entry (another name): not the cache's to judge.
    NotCache,
    /// A cache entry that can be a hit, with its source's blob address when it records it.
    Valid {
        /// Read by garbage collection, which exists with a durable backend only.
        #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
        source: Option<ContentHash>,
    },
    /// A cache entry that can never be a hit, and why.
    Invalid(&'static str),
}

/// Reads the entry `name` holding `bytes` without a key to look it up by: the checks
/// [`lookup`] makes that do not depend on the target (which only a compaction knows).
pub(crate) fn inspect_entry(name: &str, bytes: &[u8]) -> Inspected {
    if !name.starts_with(ENTRY_PREFIX) {
        return Inspected::NotCache;
    }
    let Ok(entry) = serde_json::from_slice::<CachedSummary>(bytes) else {
        return Inspected::Invalid("the summary cache entry does not parse");
    };
    if entry.format != FORMAT || name_of(&entry.key) != name {
        return Inspected::Invalid("the summary cache entry was written for another key");
    }
    if !entry.summary_sha256.matches(entry.summary.as_bytes()) {
        return Inspected::Invalid("the cached summary does not match its hash");
    }
    Inspected::Valid {
        source: entry.source,
    }
}

/// What a lookup found.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// A summary that passed every check.
    Hit(String),
    /// No entry.
    Miss,
    /// An entry that failed a check (or could not be read): why, without its content.
    Rejected(&'static str),
}

/// What is wrong with the named entry `name` holding `bytes`, if it is a summary cache entry
/// (its name starts with `summary-cache/`) that could never be a cache hit: it does not parse,
/// was written for another key than its name says, or its summary does not match its hash.
/// `None` for a valid cache entry and for any other entry.
///
/// This is the check `compaction verify` runs on every entry. (A forger who writes a valid
/// entry for a name is not caught: whoever can write the store can write the state.)
///
/// ```
/// use compaction::summary_cache_problem;
///
/// let name = format!("summary-cache/{}", "ab".repeat(32));
/// assert!(summary_cache_problem(&name, b"garbage").is_some());
/// assert_eq!(summary_cache_problem("my-own-entry", b"garbage"), None);
/// ```
pub fn summary_cache_problem(name: &str, bytes: &[u8]) -> Option<&'static str> {
    match inspect_entry(name, bytes) {
        Inspected::Invalid(problem) => Some(problem),
        Inspected::NotCache | Inspected::Valid { .. } => None,
    }
}

/// Reads the summary cached under `key` and proves it: its entry is for this key, its summary
/// matches its hash, is not empty and fits `target` with `counter`.
pub(crate) async fn lookup(
    store: &dyn DynStore,
    key: CacheKey,
    field: &str,
    target: usize,
    counter: &dyn TokenCounter,
) -> Lookup {
    let bytes = match store.get_entry_dyn(&key.entry_name()).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Lookup::Miss,
        Err(_) => return Lookup::Rejected("the store failed to read the entry"),
    };
    let Ok(entry) = serde_json::from_slice::<CachedSummary>(&bytes) else {
        return Lookup::Rejected("the entry does not parse");
    };
    if entry.format != FORMAT || entry.key != key.key {
        return Lookup::Rejected("the entry was written for another key");
    }
    if !entry.summary_sha256.matches(entry.summary.as_bytes()) {
        return Lookup::Rejected("the summary does not match its hash");
    }
    match check_summary(counter, field, entry.summary, target) {
        Ok(summary) => Lookup::Hit(summary),
        Err(_) => Lookup::Rejected("the summary is empty or over its target"),
    }
}

/// Stores `summary` under `key`, replacing any entry there.
pub(crate) async fn remember(
    store: &dyn DynStore,
    key: CacheKey,
    summary: &str,
) -> Result<(), crate::store::StoreError> {
    let entry = CachedSummary {
        format: FORMAT.to_owned(),
        key: key.key,
        source: Some(key.source),
        summary_sha256: ContentHash::of(summary.as_bytes()),
        summary: summary.to_owned(),
    };
    let bytes = serde_json::to_vec(&entry)
        .map_err(|e| crate::store::StoreError::backend("serializing a summary cache entry", e))?;
    store.put_entry_dyn(&key.entry_name(), &bytes).await
}

/// What one compaction did with the cache: the fields whose summary came from it, and the
/// summaries it made, to remember once the window fits.
#[derive(Default)]
pub(crate) struct CacheUse {
    pub(crate) hits: HashSet<String>,
    pub(crate) fresh: Vec<(CacheKey, String)>,
}

impl CacheUse {
    /// Marks the report's summaries that came from the cache.
    pub(crate) fn mark(&self, report: &mut CompactionReport) {
        for row in &mut report.fields {
            if let FieldOutcome::Summarized { cached, .. } = &mut row.outcome {
                *cached = self.hits.contains(&row.field);
            }
        }
    }

    /// Stores the summaries this compaction made. A failure only costs a later summarizer
    /// call, so it is logged (without the summary) and never fails the compaction.
    pub(crate) async fn remember_all(self, store: &dyn DynStore) {
        for (key, summary) in self.fresh {
            if let Err(error) = remember(store, key, &summary).await {
                // The kind only: a backend's message names the entry and the database.
                tracing::warn!(
                    error = error.kind(),
                    "summary cache: a summary could not be remembered"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::future::block_on;
    use crate::store::MemoryStore;
    use crate::tokens::Tokenizer;

    /// The key of `source` as the planner makes it (from the source's hash).
    fn key_of(identity: &str, source: &str, target: usize) -> CacheKey {
        CacheKey::new(identity, &ContentHash::of(source.as_bytes()), target)
    }

    fn hit(store: &MemoryStore, key: CacheKey, target: usize) -> Lookup {
        block_on(lookup(store, key, "notes", target, &Tokenizer::O200kBase))
    }

    #[test]
    fn keys_separate_source_target_and_identity() {
        let key = key_of("x/1", "source", 50);
        assert_eq!(key, key_of("x/1", "source", 50));
        assert_ne!(key, key_of("x/2", "source", 50));
        assert_ne!(key, key_of("x/1", "source!", 50));
        assert_ne!(key, key_of("x/1", "source", 51));
        // A separator inside the identity cannot stand for another target.
        assert_ne!(key_of("a\u{0}5", "s", 4), key_of("a", "s", 45));
    }

    #[test]
    fn a_remembered_summary_is_found_and_a_tampered_one_is_rejected() {
        let store = MemoryStore::new();
        let key = key_of("x/1", "a long source text", 40);
        assert!(matches!(hit(&store, key, 40), Lookup::Miss));
        block_on(remember(&store, key, "short summary")).unwrap();
        assert!(matches!(hit(&store, key, 40), Lookup::Hit(s) if s == "short summary"));
        // Too long for a smaller target under this counter: rejected, never cut.
        assert!(matches!(hit(&store, key, 1), Lookup::Rejected(_)));

        let name = key.entry_name();
        let good = store_entry(&store, &name);
        let tampered = String::from_utf8(good.clone())
            .unwrap()
            .replace("short summary", "short summarY");
        store.overwrite_entry(&name, tampered.into_bytes());
        assert!(matches!(hit(&store, key, 40), Lookup::Rejected(_)));
        store.overwrite_entry(&name, b"{not json".to_vec());
        assert!(matches!(hit(&store, key, 40), Lookup::Rejected(_)));
        // Another key's valid entry copied under this name.
        let other = key_of("x/1", "another source", 40);
        block_on(remember(&store, other, "other summary")).unwrap();
        store.overwrite_entry(&name, store_entry(&store, &other.entry_name()));
        assert!(matches!(hit(&store, key, 40), Lookup::Rejected(_)));
        store.overwrite_entry(&name, good);
        assert!(matches!(hit(&store, key, 40), Lookup::Hit(_)));
    }

    fn store_entry(store: &MemoryStore, name: &str) -> Vec<u8> {
        block_on(crate::store::Store::get_entry(store, name))
            .unwrap()
            .unwrap()
    }
}
