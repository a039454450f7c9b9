//! Gemini's implicit prompt cache, from Google's documentation ("Context caching", Gemini API
//! docs, ai.google.dev/gemini-api/docs/caching, and the announcement "Gemini 2.5 Models now
//! support implicit caching", Google Developers Blog, 2025-05-08): on by default for Gemini 2.5
//! models; a request that shares a prefix with an earlier one is a hit; the minimum request is
//! 1,024 tokens for 2.5 Flash and 2,048 for 2.5 Pro; cached tokens get a 75% discount (billed at
//! 0.25 of the input price); how long an entry lives is not documented ("a few minutes", said
//! Google DeepMind), and there is no write surcharge. Gemini's explicit caches (created and paid
//! per hour) are not modelled.

use crate::cache::blocks::{CacheUse, PromptBlock};
use std::collections::HashMap;

/// The rules of one model's implicit cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeminiCacheRules {
    /// The shortest request, in tokens, that is cached (1,024 for 2.5 Flash, 2,048 for 2.5 Pro).
    pub min_tokens: usize,
    /// How long an entry lives after its last use, in milliseconds (not documented: five
    /// minutes by default here).
    pub retention_ms: u64,
    /// What a cached token costs, in base input tokens (0.25: the documented 75% discount).
    pub cached_multiplier: f64,
}

impl GeminiCacheRules {
    /// The documented minimum of `model`: 1,024 tokens for a Flash model (`gemini-2.5-flash`,
    /// `-flash-lite`), 2,048 for any other (2.5 Pro, and models the documentation does not list,
    /// so the model never claims a hit the provider would not give).
    pub fn for_model(model: &str) -> Self {
        let flash = model.to_ascii_lowercase().contains("flash");
        GeminiCacheRules {
            min_tokens: if flash { 1024 } else { 2048 },
            ..GeminiCacheRules::default()
        }
    }
}

impl Default for GeminiCacheRules {
    /// 2,048 tokens (2.5 Pro's minimum), five minutes, cached tokens at 0.25.
    fn default() -> Self {
        GeminiCacheRules {
            min_tokens: 2048,
            retention_ms: 5 * 60 * 1000,
            cached_multiplier: 0.25,
        }
    }
}

/// A simulated Gemini implicit cache: send requests in time order and read what each one read
/// and cost.
#[derive(Debug, Clone)]
pub struct GeminiCacheModel {
    rules: GeminiCacheRules,
    /// Prefix hash -> when it expires.
    entries: HashMap<u64, u64>,
}

impl GeminiCacheModel {
    /// An empty cache with `rules`.
    pub fn new(rules: GeminiCacheRules) -> Self {
        GeminiCacheModel {
            rules,
            entries: HashMap::new(),
        }
    }

    /// Sends a request at `now_ms`: it reads the longest prefix (at a block boundary) an
    /// earlier request left, when the request reaches the minimum; every prefix of a request
    /// that reaches it is then cached.
    pub fn send(&mut self, now_ms: u64, blocks: &[PromptBlock]) -> CacheUse {
        self.entries.retain(|_, expires| *expires > now_ms);
        let total: usize = blocks.iter().map(|b| b.tokens).sum();
        let mut read = 0;
        if total >= self.rules.min_tokens {
            let mut end = 0;
            for block in blocks {
                end += block.tokens;
                if let Some(expires) = self.entries.get_mut(&block.prefix_hash) {
                    *expires = now_ms + self.rules.retention_ms;
                    read = end;
                }
            }
            for block in blocks {
                self.entries
                    .insert(block.prefix_hash, now_ms + self.rules.retention_ms);
            }
        }
        CacheUse {
            read,
            uncached: total - read,
            read_multiplier: self.rules.cached_multiplier,
            ..CacheUse::default()
        }
    }
}
