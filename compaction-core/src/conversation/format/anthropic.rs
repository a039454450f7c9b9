//! [`AnthropicMessages`]: the token formula, system placement and turn grouping of Anthropic's
//! Messages API.
//!
//! ```text
//! system   = per leading system or developer message (the window first): 1 + count(text)
//! turn     = 3 + count(role)                  role: assistant, or user (tool results too)
//!            + per message in the turn: its blocks
//! blocks   = 1 + count(content)
//!            + count(name)                    (Anthropic cannot carry a name: counted so the
//!                                              count never falls short of what is refused)
//!            + count(tool_call_id)            a tool result's `tool_use_id`
//!            + per tool call: 3 + count(id) + count(name) + count(arguments, the exact text)
//!            + per opaque part: count(its block, the provider's JSON as received)
//! request  = system + sum(turn) + 3           (the reply is primed with 3 tokens)
//! ```
//!
//! Consecutive messages of one wire role share a turn (a tool result is a block of the user
//! turn after the call, a message joining a turn pays its blocks only), as `to_anthropic`
//! sends them. Anthropic does not document its framing per turn or block: the overheads are
//! an estimate of the same size as OpenAI's; the text's count is the configured counter's
//! (`ClaudeEstimate` adds the margin Claude's tokenizer needs over `o200k_base`).

use crate::conversation::format::{calls_and_parts_tokens, ChatFormat, SystemPlacement};
use crate::conversation::message::{Message, Role};
use crate::conversation::tool::ToolDefinition;
use crate::tokens::TokenCounter;

/// Tokens that open a turn besides its role.
const TURN_OVERHEAD_TOKENS: usize = 3;
/// Tokens every content or system block costs besides its fields.
const BLOCK_OVERHEAD_TOKENS: usize = 1;
/// Tokens every `tool_use` block costs besides its id, name and input.
const TOOL_USE_OVERHEAD_TOKENS: usize = 3;
/// Tokens that prime the model's reply, once per request.
const REPLY_PRIMING_TOKENS: usize = 3;
/// The system prompt Anthropic adds to every request with tools, at its largest documented size
/// ("Tool use system prompt token count", docs.anthropic.com/en/docs/tool-use-pricing-and-tokens:
/// 530 tokens for Claude 3 Opus with `tool_choice` auto; every other documented model and
/// choice is below it). A bound, so a request with tools is never planned under its bill.
pub const TOOL_USE_SYSTEM_PROMPT_TOKENS: usize = 530;

/// Anthropic's Messages API: the leading system messages (the window first) are the top-level
/// `system` field, counted without a message's overhead; consecutive messages of one role
/// share a turn, tool results go in the following user turn (see the formula in this
/// module's docs).
///
/// ```
/// use compaction::transcript::{AnthropicMessages, ChatFormat, OpenAiChat};
/// use compaction::{Message, ToolCall, Tokenizer};
/// use serde_json::json;
///
/// let counter = Tokenizer::O200kBase;
/// let messages = [
///     Message::system("be brief"),
///     Message::user("read a"),
///     Message::assistant_with_tools("", vec![ToolCall::new("c1", "read", json!({"p": "a"}))]),
///     Message::tool_result("c1", "a's text"),
///     Message::user("and now?"),
/// ];
/// // The result and the next user message share one user turn: one turn's framing less, and
/// // the system prompt has none.
/// let anthropic = AnthropicMessages.request_tokens(&messages, &counter);
/// assert!(anthropic < OpenAiChat.request_tokens(&messages, &counter));
/// // What the planner prices (each message a turn of its own) is never less.
/// let alone = |m: &Message| AnthropicMessages.message_tokens(m, &m.content, &counter);
/// let priced: usize = messages.iter().map(alone).sum();
/// assert!(anthropic <= priced + AnthropicMessages.reply_priming());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnthropicMessages;

/// The role of the turn `message` goes into: assistant, or user (tool results, and system
/// messages after the conversation started, are user blocks on Anthropic's wire).
fn wire_role(message: &Message) -> &'static str {
    match message.role {
        Role::Assistant => "assistant",
        _ => "user",
    }
}

/// Tokens of `message`'s blocks with `content` in place of its own.
fn blocks_tokens(message: &Message, content: &str, counter: &dyn TokenCounter) -> usize {
    let count = |text: &str| counter.count(text);
    let mut tokens = BLOCK_OVERHEAD_TOKENS + count(content);
    if let Some(name) = &message.name {
        tokens += count(name);
    }
    tokens + calls_and_parts_tokens(message, TOOL_USE_OVERHEAD_TOKENS, counter)
}

impl ChatFormat for AnthropicMessages {
    fn name(&self) -> &str {
        "anthropic-messages"
    }

    fn message_tokens(
        &self,
        message: &Message,
        content: &str,
        counter: &dyn TokenCounter,
    ) -> usize {
        TURN_OVERHEAD_TOKENS
            + counter.count(wire_role(message))
            + blocks_tokens(message, content, counter)
    }

    fn reply_priming(&self) -> usize {
        REPLY_PRIMING_TOKENS
    }

    /// Each definition's JSON text in the Messages API's shape
    /// ([`ToolDefinition::anthropic`]), plus the system prompt Anthropic adds whenever a
    /// request has tools ([`TOOL_USE_SYSTEM_PROMPT_TOKENS`]).
    fn tools_tokens(&self, tools: &[ToolDefinition], counter: &dyn TokenCounter) -> usize {
        if tools.is_empty() {
            return 0;
        }
        TOOL_USE_SYSTEM_PROMPT_TOKENS
            + tools
                .iter()
                .map(|tool| counter.count(&tool.anthropic().to_string()))
                .sum::<usize>()
    }

    fn system_placement(&self) -> SystemPlacement {
        SystemPlacement::TopLevel
    }

    fn system_block_tokens(&self, text: &str, counter: &dyn TokenCounter) -> usize {
        BLOCK_OVERHEAD_TOKENS + counter.count(text)
    }

    fn joins_turn(&self, previous: &Message, message: &Message) -> bool {
        wire_role(previous) == wire_role(message)
    }

    fn joined_tokens(&self, message: &Message, counter: &dyn TokenCounter) -> usize {
        blocks_tokens(message, &message.content, counter)
    }
}
