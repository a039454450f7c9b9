//! Chat token counting: what a list of messages costs in a chat request.
//!
//! # The formula
//!
//! Chat APIs bill a message for more than its text. We count the way OpenAI's cookbook does
//! (`num_tokens_from_messages`), extended to tool calls:
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
//! `count` is the configured [`TokenCounter`] (exact `o200k_base` by default). Providers differ
//! by a few tokens per message; the per-message overheads above are the ones OpenAI documents.

use crate::tokens::TokenCounter;
use crate::transcript::conversation::Message;

/// Tokens every message costs besides its fields.
pub const MESSAGE_OVERHEAD_TOKENS: usize = 3;
/// Extra tokens for a message that carries a `name`.
pub const NAME_OVERHEAD_TOKENS: usize = 1;
/// Tokens every tool call costs besides its id, name and arguments.
pub const TOOL_CALL_OVERHEAD_TOKENS: usize = 3;
/// Tokens that prime the model's reply, once per request.
pub const REPLY_PRIMING_TOKENS: usize = 3;

/// Tokens of one message in a chat request (see the module docs for the formula).
pub fn message_tokens<C: TokenCounter + ?Sized>(message: &Message, counter: &C) -> usize {
    message_tokens_with(message, &message.content, &mut |text| counter.count(text))
}

/// Tokens of a whole chat request: every message plus the reply priming.
///
/// ```
/// use compaction::transcript::{chat_tokens, REPLY_PRIMING_TOKENS};
/// use compaction::{Message, Tokenizer};
///
/// let messages = [Message::system("be brief"), Message::user("hello world")];
/// // 3 + "system" (1) + "be brief" (2), then 3 + "user" (1) + "hello world" (2), then 3.
/// assert_eq!(chat_tokens(&messages, &Tokenizer::O200kBase), 6 + 6 + REPLY_PRIMING_TOKENS);
/// ```
pub fn chat_tokens<C: TokenCounter + ?Sized>(messages: &[Message], counter: &C) -> usize {
    messages
        .iter()
        .map(|m| message_tokens(m, counter))
        .sum::<usize>()
        + REPLY_PRIMING_TOKENS
}

/// The formula for `message` with `content` in place of its own, with the text counter
/// supplied (so the planner can price a stub without cloning the message, through its cache).
pub(crate) fn message_tokens_with(
    message: &Message,
    content: &str,
    count: &mut dyn FnMut(&str) -> usize,
) -> usize {
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
    // Provider-opaque parts (thinking, encrypted reasoning) are sent with their turn: counted
    // as their JSON block, which over-counts what a provider bills (see `OpaquePart`).
    for part in &message.opaque {
        tokens += count(part.block());
    }
    tokens
}

/// The formula for `message` with `content` in place of its own, or `None` when it passes
/// `limit`: the content is counted with [`TokenCounter::count_till_limit`], so a huge text far
/// over the limit costs little to reject (issue 20.5).
pub(crate) fn message_tokens_limited(
    message: &Message,
    content: &str,
    counter: &dyn TokenCounter,
    limit: usize,
) -> Option<usize> {
    let rest = message_tokens_with(message, "", &mut |t| counter.count(t)) - counter.count("");
    let left = limit.checked_sub(rest)?;
    Some(rest + counter.count_till_limit(content, left)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Tokenizer;
    use crate::transcript::conversation::ToolCall;
    use serde_json::json;

    #[test]
    fn the_formula_counts_names_ids_and_calls() {
        let words = |text: &str| text.split_whitespace().count();
        let user = Message::user("a b c").with_name("ann");
        assert_eq!(message_tokens(&user, &words), 3 + 1 + 3 + 1 + 1);
        let call = ToolCall::new("c1", "read", json!({"p": 1}));
        let assistant = Message::assistant_with_tools("", vec![call]);
        // role 1, content 0, call: 3 + id 1 + name 1 + arguments `{"p":1}` 1.
        assert_eq!(message_tokens(&assistant, &words), 3 + 1 + 3 + 1 + 1 + 1);
        let result = Message::tool_result("c1", "x y");
        assert_eq!(message_tokens(&result, &words), 3 + 1 + 2 + 1);
        assert_eq!(
            chat_tokens(&[user, assistant, result], &words),
            9 + 10 + 7 + REPLY_PRIMING_TOKENS
        );
        assert_eq!(
            chat_tokens(&[], &Tokenizer::O200kBase),
            REPLY_PRIMING_TOKENS
        );
    }

    #[test]
    fn a_limited_count_agrees_with_the_formula_or_says_over() {
        let counter = Tokenizer::O200kBase;
        let message = Message::user("hello world, this is a test").with_name("ann");
        let exact = message_tokens(&message, &counter);
        let limited = |limit| message_tokens_limited(&message, &message.content, &counter, limit);
        assert_eq!(limited(exact), Some(exact));
        assert_eq!(limited(exact - 1), None);
        assert_eq!(limited(0), None);
    }
}
