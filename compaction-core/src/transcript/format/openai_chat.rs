//! [`OpenAiChat`]: OpenAI chat completions' token formula, the default format.
//!
//! ```text
//! message  = 3 + count(role) + count(content)
//!            + (1 + count(name))        when the message has a name
//!            + count(tool_call_id)      for tool messages
//!            + per tool call: 3 + count(id) + count(name) + count(arguments, the exact text)
//!            + per opaque part: count(its block, the provider's JSON as received)
//! request  = sum(message) + 3           (the reply is primed with 3 tokens)
//! ```
//!
//! This is OpenAI's cookbook (`num_tokens_from_messages`), extended to tool calls. `count` is
//! the configured [`TokenCounter`]; providers differ by a few tokens per message, the
//! overheads here are the ones OpenAI documents.

use crate::tokens::TokenCounter;
use crate::transcript::format::ChatFormat;
use crate::transcript::message::Message;

/// Tokens every message costs besides its fields.
const MESSAGE_OVERHEAD_TOKENS: usize = 3;
/// Extra tokens for a message that carries a `name`.
const NAME_OVERHEAD_TOKENS: usize = 1;
/// Tokens every tool call costs besides its id, name and arguments.
const TOOL_CALL_OVERHEAD_TOKENS: usize = 3;
/// Tokens that prime the model's reply, once per request.
const REPLY_PRIMING_TOKENS: usize = 3;

/// OpenAI chat completions: every message, system messages (the window first) included, is a
/// message of the list, priced by the formula in this module's docs; no turns merge. The
/// default format.
///
/// ```
/// use compaction::transcript::{ChatFormat, OpenAiChat};
/// use compaction::{Message, Tokenizer};
///
/// let messages = [Message::system("be brief"), Message::user("hello world")];
/// // 3 + "system" (1) + "be brief" (2), then 3 + "user" (1) + "hello world" (2), then 3.
/// assert_eq!(OpenAiChat.request_tokens(&messages, &Tokenizer::O200kBase), 6 + 6 + 3);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenAiChat;

impl ChatFormat for OpenAiChat {
    fn name(&self) -> &str {
        "openai-chat"
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
