//! [`SessionRequest`]: what a session hands the agent to send, independent of the wire format:
//! the messages, where their stable prefix ends, and the sequence of the checkpoint behind them.

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
}

impl SessionRequest {
    /// The request of checkpoint `compacted`, made for `agent_id` in `namespace`.
    pub(crate) fn of<S>(
        compacted: &Compacted<S>,
        agent_id: &str,
        namespace: &str,
        tools: Arc<[ToolDefinition]>,
    ) -> Self {
        SessionRequest {
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
