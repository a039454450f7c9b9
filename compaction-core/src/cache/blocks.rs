//! What every cache model reads: a request as blocks with their tokens and prefix hashes
//! ([`PromptBlocks`]), the breakpoints' TTLs ([`CacheTtl`]), and what one request read, wrote
//! and paid ([`CacheUse`]).

use std::hash::{DefaultHasher, Hash, Hasher};

/// How long a cache entry lives after its last use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CacheTtl {
    /// Five minutes (Anthropic's default, `{"type": "ephemeral"}`).
    FiveMinutes,
    /// One hour (`{"type": "ephemeral", "ttl": "1h"}`).
    OneHour,
}

impl CacheTtl {
    /// Its length in milliseconds.
    pub fn millis(self) -> u64 {
        match self {
            CacheTtl::FiveMinutes => 5 * 60 * 1000,
            CacheTtl::OneHour => 60 * 60 * 1000,
        }
    }

    /// What writing one token to an Anthropic cache of this TTL costs, in base input tokens
    /// (1.25 for 5 minutes, 2 for 1 hour: Anthropic's prompt caching pricing).
    pub fn write_multiplier(self) -> f64 {
        match self {
            CacheTtl::FiveMinutes => 1.25,
            CacheTtl::OneHour => 2.0,
        }
    }

    /// The `ttl` of Anthropic's `cache_control` (`None` for the default five minutes).
    pub fn wire_ttl(self) -> Option<&'static str> {
        match self {
            CacheTtl::FiveMinutes => None,
            CacheTtl::OneHour => Some("1h"),
        }
    }
}

/// One block of a request in cache order: its tokens, the hash of the whole prefix up to and
/// including it (two requests share a prefix exactly where these hashes agree), and the
/// breakpoint the request sets after it, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptBlock {
    /// Its tokens, as the provider counts them.
    pub tokens: usize,
    /// The hash of the prefix up to and including this block.
    pub prefix_hash: u64,
    /// An explicit cache breakpoint after this block.
    pub breakpoint: Option<CacheTtl>,
}

/// Builds a request's blocks from their contents, hashing each prefix.
#[derive(Debug, Clone, Default)]
pub struct PromptBlocks {
    blocks: Vec<PromptBlock>,
}

impl PromptBlocks {
    /// No blocks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a block with its exact bytes (what the provider hashes), its tokens and its
    /// breakpoint.
    pub fn push(&mut self, bytes: &[u8], tokens: usize, breakpoint: Option<CacheTtl>) {
        // A fixed-key hasher: the same request hashes the same in every process and run.
        let mut hasher = DefaultHasher::new();
        self.blocks.last().map(|b| b.prefix_hash).hash(&mut hasher);
        bytes.hash(&mut hasher);
        self.blocks.push(PromptBlock {
            tokens,
            prefix_hash: hasher.finish(),
            breakpoint,
        });
    }

    /// The blocks.
    pub fn blocks(&self) -> &[PromptBlock] {
        &self.blocks
    }
}

/// What one request read from the cache, wrote to it and sent uncached, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CacheUse {
    /// Tokens read from the cache.
    pub read: usize,
    /// Tokens written with a five-minute TTL.
    pub written_5m: usize,
    /// Tokens written with a one-hour TTL.
    pub written_1h: usize,
    /// Tokens neither read nor written.
    pub uncached: usize,
    /// What one cached token costs here, in base input tokens.
    pub read_multiplier: f64,
}

impl CacheUse {
    /// Every input token of the request.
    pub fn total(&self) -> usize {
        self.read + self.written_5m + self.written_1h + self.uncached
    }

    /// The billed input, in base input tokens: uncached tokens at 1, reads at the provider's
    /// cached price, writes at their TTL's multiplier.
    pub fn billed_input(&self) -> f64 {
        self.uncached as f64
            + self.read as f64 * self.read_multiplier
            + self.written_5m as f64 * CacheTtl::FiveMinutes.write_multiplier()
            + self.written_1h as f64 * CacheTtl::OneHour.write_multiplier()
    }
}
