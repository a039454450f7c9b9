//! [`SessionRequest`]: what a session hands the agent to send, independent of the wire format:
//! the messages, where their stable prefix ends, the sequence of the checkpoint behind them, and
//! what of them a provider's prompt cache is expected to serve ([`ExpectedCache`]).

use crate::cache::{AnthropicCacheRules, OpenAiCacheRules};
use crate::checkpoint::Compacted;
use crate::conversation::message::Message;
use crate::conversation::tool::ToolDefinition;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The next request of a [`Session`](crate::session::Session): the messages to send to the
/// chat API, in order (the window's system message first, then the conversation as compacted),
/// with what a provider's prompt cache needs.
///
/// It is the same for every wire format: convert [`messages`](Self::messages) with the format's
/// adapter ([`openai_messages`](Self::openai_messages) for OpenAI chat completions, with
/// [`prompt_cache_key`](Self::prompt_cache_key); `anthropic_request` for Anthropic's Messages
/// API, feature `anthropic-types`), which puts a cache breakpoint (Anthropic's
/// `cache_control`) after the first [`stable_prefix_len`](Self::stable_prefix_len) messages.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRequest {
    pub(crate) messages: Vec<Message>,
    pub(crate) stable_prefix_len: usize,
    pub(crate) reused_prefix_len: usize,
    pub(crate) compaction_point: bool,
    pub(crate) sequence: u64,
    pub(crate) tokens: usize,
    pub(crate) cache_key: String,
    pub(crate) tools: Arc<[ToolDefinition]>,
    pub(crate) expected_cache: ExpectedCache,
}

impl SessionRequest {
    /// The request of checkpoint `compacted`, made for `agent_id` in `namespace` after the
    /// request of `previous` (the session's last checkpoint, if any).
    pub(crate) fn of<S>(
        compacted: &Compacted<S>,
        previous: Option<&Compacted<S>>,
        agent_id: &str,
        namespace: &str,
        tools: Arc<[ToolDefinition]>,
    ) -> Self {
        SessionRequest {
            expected_cache: ExpectedCache::of(compacted, previous),
            messages: compacted.messages(),
            stable_prefix_len: compacted.stable_prefix_len(),
            reused_prefix_len: compacted.reused_prefix_len(),
            compaction_point: compacted.is_compaction_point(),
            sequence: compacted.binding().map_or(0, |b| b.sequence()),
            tokens: compacted.request_tokens().unwrap_or(compacted.tokens()),
            cache_key: cache_key(agent_id, namespace),
            tools,
        }
    }

    /// The messages to send, in order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The messages to send, owned.
    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }

    /// How many leading [`messages`](Self::messages) the session keeps byte-identical from
    /// one request to the next as long as it can (the window's stable part and the compacted
    /// history): where a cache breakpoint belongs. Everything after them is identical too until
    /// the next compaction point.
    pub fn stable_prefix_len(&self) -> usize {
        self.stable_prefix_len
    }

    /// How many leading [`messages`](Self::messages) are byte-identical to the previous
    /// request's: all of the previous request when this one only appended to it.
    pub fn reused_prefix_len(&self) -> usize {
        self.reused_prefix_len
    }

    /// Whether this request is a compaction point (history folded, tombstoned, spilled or
    /// paged); `false` when it only appends to the previous request.
    pub fn is_compaction_point(&self) -> bool {
        self.compaction_point
    }

    /// The sequence number of the checkpoint saved with this request: it only goes forward for
    /// the agent, across restarts, and is what the operator's `compaction show` prints.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// Tokens of the whole request by the chat format's formula with the compactor's counter:
    /// the messages, the reply priming and the [`tools`](Self::tools) (by
    /// [`ChatFormat::tools_tokens`](crate::conversation::format::ChatFormat::tools_tokens)).
    /// Never above the budget.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// The tool definitions to send with the messages (`SessionBuilder::tools`), counted in
    /// [`tokens`](Self::tokens). Put them in the request in the wire's shape
    /// ([`ToolDefinition::openai_chat`], [`ToolDefinition::openai_responses`]); Anthropic's
    /// request builder (`anthropic_request`) puts them in itself.
    pub fn tools(&self) -> &[ToolDefinition] {
        &self.tools
    }

    /// What of this request a provider's prompt cache is expected to serve, from what the
    /// previous request of this session wrote to it: log it beside the provider's reported
    /// cache reads, or read what a compaction point cost
    /// ([`ExpectedCache::anthropic_tokens`], [`ExpectedCache::openai_tokens`]).
    pub fn expected_cache(&self) -> ExpectedCache {
        self.expected_cache
    }

    /// A key naming this agent's conversation for a provider's prompt cache (OpenAI's
    /// `prompt_cache_key`): the same for every request of the agent, and not the agent id
    /// itself (`compaction-` and 32 hex digits of a SHA-256 of the namespace and agent id).
    pub fn prompt_cache_key(&self) -> &str {
        &self.cache_key
    }
}

/// `compaction-<32 hex>`: stable per agent, without showing the agent id to the provider.
fn cache_key(agent_id: &str, namespace: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(namespace.as_bytes());
    hasher.update([0]);
    hasher.update(agent_id.as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("compaction-{hex}")
}

/// What of a [`SessionRequest`] a provider's prompt cache is expected to serve, from the
/// previous request of the same session (sent within the cache's lifetime): the leading
/// messages identical to that request's, and those a cache entry that request's breakpoints
/// wrote covers. Tokens are counted as the budget counts the request
/// ([`Compacted::prefix_tokens`]: the chat format's formula, the tool definitions first), an
/// estimate of what the provider bills as cached.
///
/// After an append, both are the whole previous request. At a compaction point, an automatic
/// cache (OpenAI, Gemini) can serve every message the point left in place
/// ([`reused_messages`](Self::reused_messages)); Anthropic's only what an entry covers: with this
/// library's breakpoints (`SessionRequest::anthropic_request`), the previous request's stable
/// prefix as far as this request kept it ([`breakpoint_messages`](Self::breakpoint_messages);
/// when the point changed only a later message, an earlier request's entry inside the kept
/// prefix may serve more). Everything after is written to the cache again: what the point cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExpectedCache {
    /// Leading messages byte-identical to the previous request's.
    pub reused_messages: usize,
    /// Their tokens, the tool definitions included.
    pub reused_tokens: usize,
    /// Leading messages a cache entry written by the previous request's breakpoints covers.
    pub breakpoint_messages: usize,
    /// Their tokens, the tool definitions included.
    pub breakpoint_tokens: usize,
}

impl ExpectedCache {
    fn of<S>(compacted: &Compacted<S>, previous: Option<&Compacted<S>>) -> Self {
        // A first request, or one after the process restarted without the previous request's
        // checkpoint in hand: the compactor still knows what it reused (its memory came with
        // the checkpoint), but not where that request's stable prefix ended.
        let reused = compacted.reused_prefix_len();
        let breakpoint = match previous {
            Some(_) if !compacted.is_compaction_point() => reused,
            Some(previous) => reused.min(previous.stable_prefix_len()),
            None => 0,
        };
        let reused_tokens = compacted.prefix_tokens(reused);
        ExpectedCache {
            reused_messages: reused,
            reused_tokens,
            breakpoint_messages: breakpoint,
            // After an append (every request but a point) both prefixes are the same.
            breakpoint_tokens: if breakpoint == reused {
                reused_tokens
            } else {
                compacted.prefix_tokens(breakpoint)
            },
        }
    }

    /// Tokens Anthropic's cache is expected to serve with the library's breakpoints: the
    /// breakpoint prefix, when it reaches the model's minimum cacheable length (a shorter prefix
    /// gets no entry: Anthropic's prompt caching, "Cache limitations").
    pub fn anthropic_tokens(&self, rules: &AnthropicCacheRules) -> usize {
        if self.breakpoint_tokens >= rules.min_cacheable_tokens {
            self.breakpoint_tokens
        } else {
            0
        }
    }

    /// Tokens OpenAI's automatic cache is expected to serve: the reused prefix, rounded down to
    /// the minimum plus whole steps (1,024 tokens, then 128 at a time: OpenAI's prompt caching
    /// guide), 0 under the minimum.
    pub fn openai_tokens(&self, rules: &OpenAiCacheRules) -> usize {
        let tokens = self.reused_tokens;
        if tokens < rules.min_tokens {
            return 0;
        }
        let step = rules.step_tokens.max(1);
        rules.min_tokens + (tokens - rules.min_tokens) / step * step
    }
}
