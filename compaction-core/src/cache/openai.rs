//! OpenAI's prompt cache, from its documentation ("Prompt caching", OpenAI API docs,
//! guides/prompt-caching): automatic for prompts of 1,024 tokens or more; a hit covers the
//! longest previously seen prefix, counted in 128-token steps from 1,024 (1,024, 1,152, ...);
//! requests are routed to a cache by a hash of their first ~256 tokens together with the
//! `prompt_cache_key`, so two requests share a cache only when both agree; entries are kept
//! while in use, for the retention the request asks (`in_memory`: minutes, up to an hour;
//! `24h` extended). There is no write surcharge; cached tokens cost a model-dependent share of
//! the base input price.

use crate::cache::blocks::{CacheUse, PromptBlock};
use std::collections::HashMap;

/// The rules of one model's automatic cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpenAiCacheRules {
    /// The shortest prompt, in tokens, that is cached (1,024).
    pub min_tokens: usize,
    /// Hits grow in steps of this many tokens past the minimum (128).
    pub step_tokens: usize,
    /// How many leading tokens route a request (about 256).
    pub routing_tokens: usize,
    /// How long an entry lives after its last use, in milliseconds.
    pub retention_ms: u64,
    /// What a cached token costs, in base input tokens (0.1 for the GPT-5 family; 0.25 for
    /// GPT-4.1, 0.5 for GPT-4o: set it for the model you price).
    pub cached_multiplier: f64,
}

impl Default for OpenAiCacheRules {
    /// 1,024 tokens in 128-token steps, routed by the first 256, kept 10 minutes, cached tokens
    /// at 0.1.
    fn default() -> Self {
        OpenAiCacheRules {
            min_tokens: 1024,
            step_tokens: 128,
            routing_tokens: 256,
            retention_ms: 10 * 60 * 1000,
            cached_multiplier: 0.1,
        }
    }
}

/// A simulated OpenAI cache: send requests in time order and read what each one read and cost.
#[derive(Debug, Clone)]
pub struct OpenAiCacheModel {
    rules: OpenAiCacheRules,
    // (routing key, prefix hash) -> when it expires.
    entries: HashMap<(Option<String>, u64, u64), u64>,
}

impl OpenAiCacheModel {
    /// An empty cache with `rules`.
    pub fn new(rules: OpenAiCacheRules) -> Self {
        OpenAiCacheModel {
            rules,
            entries: HashMap::new(),
        }
    }

    /// Sends a request at `now_ms` with its `prompt_cache_key`: it reads the longest prefix (at
    /// a block boundary) an earlier request on the same route left, rounded down to the
    /// minimum plus whole steps; every prefix of this request is then cached. A prefix is only
    /// matched at block boundaries, so the model never claims a hit inside a block.
    pub fn send(
        &mut self,
        now_ms: u64,
        cache_key: Option<&str>,
        blocks: &[PromptBlock],
    ) -> CacheUse {
        self.entries.retain(|_, expires| *expires > now_ms);
        let total: usize = blocks.iter().map(|b| b.tokens).sum();
        let route = self.route(blocks);
        let key = cache_key.map(str::to_owned);
        let mut end = 0;
        let mut longest = 0;
        for block in blocks {
            end += block.tokens;
            let id = (key.clone(), route, block.prefix_hash);
            if let Some(expires) = self.entries.get_mut(&id) {
                *expires = now_ms + self.rules.retention_ms;
                longest = end;
            }
        }
        let read = if longest >= self.rules.min_tokens && total >= self.rules.min_tokens {
            let steps = (longest - self.rules.min_tokens) / self.rules.step_tokens.max(1);
            self.rules.min_tokens + steps * self.rules.step_tokens
        } else {
            0
        };
        if total >= self.rules.min_tokens {
            for block in blocks {
                let id = (key.clone(), route, block.prefix_hash);
                self.entries.insert(id, now_ms + self.rules.retention_ms);
            }
        }
        CacheUse {
            read,
            uncached: total - read,
            read_multiplier: self.rules.cached_multiplier,
            ..CacheUse::default()
        }
    }

    /// The route: the prefix hash at the first block boundary covering the routing tokens
    /// (the whole request's when it is shorter).
    fn route(&self, blocks: &[PromptBlock]) -> u64 {
        let mut end = 0;
        for block in blocks {
            end += block.tokens;
            if end >= self.rules.routing_tokens {
                return block.prefix_hash;
            }
        }
        blocks.last().map_or(0, |b| b.prefix_hash)
    }
}
