//! Anthropic's prompt cache, from its documentation ("Prompt caching", Claude API docs,
//! build-with-claude/prompt-caching): explicit `cache_control` breakpoints, at most four per
//! request; the prefix is hashed in the order tools, system, messages, up to and including the
//! breakpoint's block; at each breakpoint the cache is looked up at the block boundaries up to
//! 20 blocks back; a prefix shorter than the model's minimum cacheable length is processed
//! without a cache entry (and without a write charge); entries live 5 minutes (default) or
//! 1 hour from their last use, and a request must list longer TTLs before shorter ones; writes
//! cost 1.25x (5 minutes) or 2x (1 hour) the base input price, reads 0.1x.

use crate::cache::blocks::{CacheTtl, CacheUse, PromptBlock};
use std::collections::HashMap;

/// At most this many explicit breakpoints in one request.
pub const ANTHROPIC_MAX_BREAKPOINTS: usize = 4;

/// From each breakpoint, the cache is looked up at this many block boundaries (the
/// breakpoint's own included).
pub const ANTHROPIC_LOOKBACK_BLOCKS: usize = 20;

/// What a cached token costs on Anthropic, in base input tokens.
const READ_MULTIPLIER: f64 = 0.1;

/// The rules of one model's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnthropicCacheRules {
    /// The shortest prefix, in tokens, that gets a cache entry.
    pub min_cacheable_tokens: usize,
    /// The TTL breakpoints are set with.
    pub ttl: CacheTtl,
}

impl AnthropicCacheRules {
    /// The documented minimum cacheable length of `model` (by its name's family): 4,096 tokens
    /// for Claude Opus 4.5 and later Opus models and Haiku 4.5, 2,048 for Sonnet 4.6 and the
    /// Haiku 3 models, 1,024 for the other Sonnet and Opus models. A name this table does not
    /// know gets 4,096, the largest: a breakpoint is then set only where it caches on every
    /// model (set `min_cacheable_tokens` yourself for a model you know). TTL five minutes.
    pub fn for_model(model: &str) -> Self {
        let name = model.to_ascii_lowercase();
        let has = |needle: &str| name.contains(needle);
        let min_cacheable_tokens = if has("haiku-4")
            || has("opus-4-5")
            || has("opus-4-6")
            || has("opus-4-7")
            || has("opus-5")
            || has("mythos")
        {
            4096
        } else if has("sonnet-4-6") || has("haiku-3") || has("3-haiku") || has("3-5-haiku") {
            2048
        } else if has("sonnet") || has("opus") {
            1024
        } else {
            4096
        };
        AnthropicCacheRules {
            min_cacheable_tokens,
            ttl: CacheTtl::FiveMinutes,
        }
    }
}

/// Why a request breaks a cache rule (Anthropic refuses such a request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheRuleError {
    /// More explicit breakpoints than [`ANTHROPIC_MAX_BREAKPOINTS`].
    #[error("{found} cache breakpoints: at most {ANTHROPIC_MAX_BREAKPOINTS} per request")]
    TooManyBreakpoints {
        /// How many the request sets.
        found: usize,
    },
    /// A one-hour breakpoint after a five-minute one.
    #[error("block {block}: a 1h breakpoint after a 5m one (longer TTLs come first)")]
    TtlOrder {
        /// The later, longer-lived breakpoint's block.
        block: usize,
    },
}

/// A simulated Anthropic cache: send requests in time order and read what each one read,
/// wrote and cost.
#[derive(Debug, Clone)]
pub struct AnthropicCacheModel {
    rules: AnthropicCacheRules,
    // Prefix hash -> (when it expires, its TTL).
    entries: HashMap<u64, (u64, CacheTtl)>,
}

impl AnthropicCacheModel {
    /// An empty cache for a model with `rules`.
    pub fn new(rules: AnthropicCacheRules) -> Self {
        AnthropicCacheModel {
            rules,
            entries: HashMap::new(),
        }
    }

    /// Checks the request's breakpoints against the rules, without sending it.
    pub fn check(blocks: &[PromptBlock]) -> Result<(), CacheRuleError> {
        let breakpoints: Vec<(usize, CacheTtl)> = blocks
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.breakpoint.map(|ttl| (i, ttl)))
            .collect();
        if breakpoints.len() > ANTHROPIC_MAX_BREAKPOINTS {
            return Err(CacheRuleError::TooManyBreakpoints {
                found: breakpoints.len(),
            });
        }
        for pair in breakpoints.windows(2) {
            if pair[0].1 == CacheTtl::FiveMinutes && pair[1].1 == CacheTtl::OneHour {
                return Err(CacheRuleError::TtlOrder { block: pair[1].0 });
            }
        }
        Ok(())
    }

    /// Sends a request at `now_ms`: what it reads (the longest cached prefix found at or up to
    /// [`ANTHROPIC_LOOKBACK_BLOCKS`] boundaries before a breakpoint), what it writes (every
    /// breakpoint's prefix at or above the minimum, billed beyond what was read at the TTL of
    /// the breakpoint that covers it) and what it sends uncached (the rest).
    pub fn send(
        &mut self,
        now_ms: u64,
        blocks: &[PromptBlock],
    ) -> Result<CacheUse, CacheRuleError> {
        Self::check(blocks)?;
        self.entries.retain(|_, (expires, _)| *expires > now_ms);
        let mut ends = Vec::with_capacity(blocks.len());
        let mut sum = 0;
        for block in blocks {
            sum += block.tokens;
            ends.push(sum);
        }
        let breakpoints: Vec<usize> = (0..blocks.len())
            .filter(|&i| blocks[i].breakpoint.is_some())
            .collect();
        // The longest hit: the last block (at or before a breakpoint, within its lookback)
        // whose prefix has an entry.
        let mut hit: Option<usize> = None;
        for &bp in &breakpoints {
            let lowest = bp.saturating_sub(ANTHROPIC_LOOKBACK_BLOCKS - 1);
            if let Some(found) = (lowest..=bp)
                .rev()
                .find(|&i| self.entries.contains_key(&blocks[i].prefix_hash))
            {
                hit = hit.max(Some(found));
            }
        }
        let read = hit.map_or(0, |i| ends[i]);
        if let Some(i) = hit {
            if let Some((expires, ttl)) = self.entries.get_mut(&blocks[i].prefix_hash) {
                *expires = now_ms + ttl.millis();
            }
        }
        let mut usage = CacheUse {
            read,
            read_multiplier: READ_MULTIPLIER,
            ..CacheUse::default()
        };
        // Each breakpoint past the hit writes its prefix (when long enough); the tokens between
        // the previous write and it are billed at its TTL.
        let mut covered = read;
        for &bp in &breakpoints {
            let ttl = blocks[bp].breakpoint.unwrap_or(self.rules.ttl);
            if ends[bp] <= covered || ends[bp] < self.rules.min_cacheable_tokens {
                continue;
            }
            let written = ends[bp] - covered;
            match ttl {
                CacheTtl::FiveMinutes => usage.written_5m += written,
                CacheTtl::OneHour => usage.written_1h += written,
            }
            covered = ends[bp];
            let entry = self
                .entries
                .entry(blocks[bp].prefix_hash)
                .or_insert((0, ttl));
            *entry = (now_ms + ttl.millis(), ttl.max(entry.1));
        }
        usage.uncached = sum - covered;
        Ok(usage)
    }
}
