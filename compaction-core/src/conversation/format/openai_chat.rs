//! [`OpenAiChat`]'s formula (spelled out on the type): OpenAI chat completions' token count,
//! the default format's. The type is declared beside the trait, in `mod.rs`, so a planner can
//! default to it without depending on this file.

use crate::conversation::format::{calls_and_parts_tokens, ChatFormat, OpenAiChat, OPENAI_CHAT};
use crate::conversation::message::Message;
use crate::tokens::TokenCounter;

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
        tokens + calls_and_parts_tokens(message, TOOL_CALL_OVERHEAD_TOKENS, counter)
    }

    fn reply_priming(&self) -> usize {
        REPLY_PRIMING_TOKENS
    }
}
