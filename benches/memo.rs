//! The cache benches' token counter (`price.rs`, `agents_cache.rs`): o200k counts, each
//! distinct text counted once, since a session's requests repeat the same blocks thousands of
//! times.

use compaction::{TokenCounter, Tokenizer};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

/// o200k counts, memoized by a hash of the text.
#[derive(Clone, Default)]
pub struct Memo(Arc<Mutex<HashMap<u64, usize>>>);

impl TokenCounter for Memo {
    fn count(&self, text: &str) -> usize {
        let key = digest(text.as_bytes());
        let mut memo = self.0.lock().expect("not poisoned");
        *memo
            .entry(key)
            .or_insert_with(|| Tokenizer::O200kBase.count(text))
    }
    fn name(&self) -> &str {
        "o200k_base (memoized)"
    }
}

/// A fixed-key hash of `bytes` (the same in every run).
pub fn digest(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}
