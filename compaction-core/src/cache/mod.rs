//! The providers' prompt caches, modelled from their documentation: which part of a request a
//! provider reads from its cache, which part it writes, and what the input then costs. A
//! request is a list of [`PromptBlock`]s in the provider's cache order (for Anthropic: tools,
//! then system, then messages), each with its tokens, a hash of the whole prefix up to it, and
//! an explicit breakpoint where the request sets one.
//!
//! - [`AnthropicCacheModel`]: explicit breakpoints (`cache_control`), at most
//!   [`ANTHROPIC_MAX_BREAKPOINTS`], a lookback of [`ANTHROPIC_LOOKBACK_BLOCKS`] blocks from each
//!   breakpoint, a per-model minimum cacheable length ([`AnthropicCacheRules::for_model`]),
//!   TTLs of 5 minutes or 1 hour (longer TTLs first), writes billed 1.25x / 2x and reads 0.1x
//!   the base input price.
//! - [`OpenAiCacheModel`]: automatic, from 1,024 tokens in 128-token steps, routed by the first
//!   256 tokens and the `prompt_cache_key`, kept for the retention the request asks.
//! - [`GeminiCacheModel`]: implicit (Gemini 2.5), from 1,024 tokens (Flash) or 2,048 (Pro),
//!   cached tokens at a 75% discount ([`GeminiCacheRules::for_model`]).
//!
//! Costs are in units of the model's base input price per token ([`CacheUse::billed_input`]):
//! multiply by the price to get money. The models are what the benches measure sessions with;
//! they are deterministic (time is a number the caller passes).

mod anthropic;
mod blocks;
mod gemini;
mod openai;

pub use anthropic::{
    AnthropicCacheModel, AnthropicCacheRules, CacheRuleError, ANTHROPIC_LOOKBACK_BLOCKS,
    ANTHROPIC_MAX_BREAKPOINTS,
};
pub use blocks::{CacheTtl, CacheUse, PromptBlock, PromptBlocks};
pub use gemini::{GeminiCacheModel, GeminiCacheRules};
pub use openai::{OpenAiCacheModel, OpenAiCacheRules};

#[cfg(test)]
mod tests;
