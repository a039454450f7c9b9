//! [`OpenAiChat`]'s formula (spelled out on the type): OpenAI chat completions' token count,
//! the default format's. The type is declared beside the trait, in `mod.rs`, so a planner can
//! default to it without depending on this file.

use crate::tokens::TokenCounter;
use crate::transcript::format::{ChatFormat, OpenAiChat, OPENAI_CHAT};
use crate::transcript::message::Message;

/// Tokens every message costs besides its fields.
const MESSAGE_OVERHEAD_TOKENS: usize = 3;
/// Extra tokens for a message that carries a `name`.
const NAME_OVERHEAD_TOKENS: usize = 1;
/// Tokens every tool call costs besides its id, name and arguments.
const TOOL_CALL_OVERHEAD_TOKENS: usize = 3;
/// Tokens that prime the model's reply, once per request.
const REPLY_PRIMING_TOKENS: usize = 3;

impl ChatFormat for OpenAiChat {
    fn name(&self) -> &str {
        OPENAI_CHAT
    }

    fn message_tokens(
        &self,
        message: &Message,
        content: &str,
        counter: &dyn TokenCounter,
    ) -> usize {
        let count = |text: &str| counter.count(text);
        let mut tokens = MESSAGE_OVERHEAD_TOKENS + count(message.role.as_str()) + count(content);
        if let Some(name) = &message.name {
            tokens += NAME_OVERHEAD_TOKENS + count(name);
        }
        if let Some(id) = &message.tool_call_id {
            tokens += count(id);
        }
        for call in &message.tool_calls {
            tokens += TOOL_CALL_OVERHEAD_TOKENS + count(&call.id) + count(&call.name);
            tokens += count(call.arguments_text());
        }
        // Provider-opaque parts (thinking, encrypted reasoning) are sent with their turn:
        // counted as their JSON block, which over-counts what a provider bills (see
        // `OpaquePart`).
        for part in &message.opaque {
            tokens += count(part.block());
        }
        tokens
    }

    fn reply_priming(&self) -> usize {
        REPLY_PRIMING_TOKENS
    }
}
