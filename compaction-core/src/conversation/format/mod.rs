//! [`ChatFormat`]: the seam for a wire format. A format owns its token formula (per-message,
//! per-name and per-tool-call overheads, reply priming), where the system prompt and the state
//! window go, and how messages group into the wire's turns. [`OpenAiChat`] is the default
//! everywhere; [`AnthropicMessages`] is Anthropic's Messages API.
//!
//! The planner prices every message on its own ([`ChatFormat::message_tokens`], as if it
//! opened a turn), so a request it plans fits the budget whatever the neighbours; the exact
//! count of a whole request, turns grouped, is [`ChatFormat::request_tokens`], never above it.

mod anthropic;
mod openai_chat;

pub use anthropic::{AnthropicMessages, TOOL_USE_SYSTEM_PROMPT_TOKENS};

use crate::conversation::message::{Message, Role};
use crate::conversation::tool::ToolDefinition;
use crate::tokens::TokenCounter;

/// OpenAI chat completions: every message, system messages (the window first) included, is a
/// message of the list; no turns merge. The default format. Its formula (the overheads are
/// private to its impl, `conversation/format/openai_chat.rs`):
///
/// ```text
/// message  = 3 + count(role) + count(content)
///            + (1 + count(name))        when the message has a name
///            + count(tool_call_id)      for tool messages
///            + per tool call: 3 + count(id) + count(name) + count(arguments, the exact text)
///            + per opaque part: count(its block, the provider's JSON as received)
/// request  = sum(message) + 3           (the reply is primed with 3 tokens)
/// ```
///
/// This is OpenAI's cookbook (`num_tokens_from_messages`), extended to tool calls. `count` is
/// the configured [`TokenCounter`]; providers differ by a few tokens per message, the
/// overheads here are the ones OpenAI documents.
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

/// [`OpenAiChat`]'s name: the default format's, which memories do not record.
pub(crate) const OPENAI_CHAT: &str = "openai-chat";

/// Where a format sends the system prompt and the state window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SystemPlacement {
    /// As system messages at the front of the message list (OpenAI chat): each priced as a
    /// message, overhead included.
    Messages,
    /// In the request's top-level `system` field (Anthropic): the leading system and developer
    /// messages (the window first) become its blocks, each priced by
    /// [`ChatFormat::system_block_tokens`], without a message's overhead. The message list
    /// still holds them first; the format's adapter moves them (for Anthropic,
    /// `to_anthropic` and `SessionRequest::anthropic_request`).
    TopLevel,
}

/// A wire format's token formula, system placement and turn grouping.
///
/// The compactor plans every request with one format: [`OpenAiChat`] unless
/// [`CompactorBuilder::chat_format`](crate::CompactorBuilder::chat_format) (or
/// [`SessionBuilder::chat_format`](crate::SessionBuilder::chat_format)) names another. The
/// state window is a [`window_message`](Self::window_message) at the front of the request
/// (its prefix stays stable from request to request); where the wire puts it is
/// [`system_placement`](Self::system_placement).
///
/// The contract the planner relies on (a format that breaks it may plan over the budget):
/// - [`message_tokens`](Self::message_tokens) counts `content` once, with `counter.count`, and
///   adds a count that does not depend on it;
/// - [`joined_tokens`](Self::joined_tokens) is never above `message_tokens` of the same
///   message, nor is [`system_block_tokens`](Self::system_block_tokens) of a system message's
///   text: the planner prices each message as its own turn, an upper bound of the grouped
///   count.
///
/// A format of your own: OpenAI's formula with a heavier framing per message, and the window
/// as a developer message.
///
/// ```
/// use compaction::transcript::{ChatFormat, OpenAiChat};
/// use compaction::{Compactor, Message, TokenCounter, Tokenizer};
///
/// struct Framed;
///
/// impl ChatFormat for Framed {
///     fn name(&self) -> &str {
///         "framed-chat"
///     }
///     fn message_tokens(&self, message: &Message, content: &str, counter: &dyn TokenCounter) -> usize {
///         OpenAiChat.message_tokens(message, content, counter) + 10
///     }
///     fn reply_priming(&self) -> usize {
///         OpenAiChat.reply_priming()
///     }
///     fn window_message(&self, window: &str) -> Message {
///         Message::developer(window)
///     }
/// }
///
/// let messages = [Message::user("hello world")];
/// let counter = Tokenizer::O200kBase;
/// let plain = OpenAiChat.request_tokens(&messages, &counter);
/// assert_eq!(Framed.request_tokens(&messages, &counter), plain + 10);
/// let compactor = Compactor::builder().budget(4_000).chat_format(Framed).build()?;
/// assert_eq!(compactor.chat_format().name(), "framed-chat");
/// # Ok::<(), compaction::CompactionError>(())
/// ```
pub trait ChatFormat: Send + Sync {
    /// A short name (`"openai-chat"`). The planner's memory of a request is only continued by
    /// a planner with the same counter and format.
    fn name(&self) -> &str;

    /// Tokens of `message`, sent with `content` in place of its own, as a turn of its own:
    /// the format's overheads plus its fields counted with `counter`.
    fn message_tokens(&self, message: &Message, content: &str, counter: &dyn TokenCounter)
        -> usize;

    /// Tokens that prime the model's reply, once per request.
    fn reply_priming(&self) -> usize;

    /// Tokens the request's tool definitions cost on this wire, once per request (0 without
    /// tools). Default: each definition's JSON text in OpenAI chat's shape
    /// ([`ToolDefinition::openai_chat`]), counted with `counter`. OpenAI does not document
    /// how it counts tools (it renders them into the prompt in a form of its own); the JSON
    /// text names every name, description and schema key, and is what the planner reserves.
    fn tools_tokens(&self, tools: &[ToolDefinition], counter: &dyn TokenCounter) -> usize {
        tools
            .iter()
            .map(|tool| counter.count(&tool.openai_chat().to_string()))
            .sum()
    }

    /// Where the wire puts the system prompt and the window (default:
    /// [`SystemPlacement::Messages`]).
    fn system_placement(&self) -> SystemPlacement {
        SystemPlacement::Messages
    }

    /// Tokens of one block of the top-level system field holding `text` (only asked under
    /// [`SystemPlacement::TopLevel`]; default: the text alone).
    fn system_block_tokens(&self, text: &str, counter: &dyn TokenCounter) -> usize {
        counter.count(text)
    }

    /// The message that carries the state window at the front of the request (default: a
    /// system message).
    fn window_message(&self, window: &str) -> Message {
        Message::system(window)
    }

    /// Whether `message` shares the wire turn of `previous`, the message before it (default:
    /// never; Anthropic merges consecutive turns of one role, tool results into the user's).
    fn joins_turn(&self, previous: &Message, message: &Message) -> bool {
        let _ = (previous, message);
        false
    }

    /// Tokens of `message` when it joins the turn before it (default: as its own turn).
    fn joined_tokens(&self, message: &Message, counter: &dyn TokenCounter) -> usize {
        self.message_tokens(message, &message.content, counter)
    }

    /// Tokens the state window `window` costs where this format puts it, overhead included.
    fn window_tokens(&self, window: &str, counter: &dyn TokenCounter) -> usize {
        match self.system_placement() {
            SystemPlacement::Messages => {
                let message = self.window_message(window);
                self.message_tokens(&message, &message.content, counter)
            }
            SystemPlacement::TopLevel => self.system_block_tokens(window, counter),
        }
    }

    /// The request an author sends: the window's message first, then the transcript's
    /// messages, in order.
    fn request_messages(&self, window: &str, transcript: &[Message]) -> Vec<Message> {
        window_first(self.window_message(window), transcript)
    }

    /// Tokens of a whole request, exactly as this format sends it: leading system messages
    /// where [`system_placement`](Self::system_placement) puts them, turns grouped by
    /// [`joins_turn`](Self::joins_turn), and the reply priming.
    fn request_tokens(&self, messages: &[Message], counter: &dyn TokenCounter) -> usize {
        let mut rest = messages;
        let mut total = self.reply_priming();
        if self.system_placement() == SystemPlacement::TopLevel {
            let leading = rest
                .iter()
                .take_while(|m| matches!(m.role, Role::System | Role::Developer))
                .count();
            for message in &rest[..leading] {
                total += self.system_block_tokens(&message.content, counter);
            }
            rest = &rest[leading..];
        }
        let mut previous: Option<&Message> = None;
        for message in rest {
            total += match previous {
                Some(p) if self.joins_turn(p, message) => self.joined_tokens(message, counter),
                _ => self.message_tokens(message, &message.content, counter),
            };
            previous = Some(message);
        }
        total
    }
}

/// Tokens of the fields both built-in formats count alike, with `call_overhead` per tool call:
/// a tool result's call id, each call's id, name and exact argument text, and each
/// provider-opaque part (thinking, encrypted reasoning) as its JSON block, which over-counts
/// what a provider bills (see `OpaquePart`).
pub(crate) fn calls_and_parts_tokens(
    message: &Message,
    call_overhead: usize,
    counter: &dyn TokenCounter,
) -> usize {
    let count = |text: &str| counter.count(text);
    let mut tokens = message.tool_call_id.as_deref().map_or(0, count);
    for call in &message.tool_calls {
        tokens += call_overhead + count(&call.id) + count(&call.name);
        tokens += count(call.arguments_text());
    }
    tokens
        + message
            .opaque
            .iter()
            .map(|p| count(p.block()))
            .sum::<usize>()
}

/// The request with `window` first, then the transcript's messages.
fn window_first(window: Message, transcript: &[Message]) -> Vec<Message> {
    let mut out = Vec::with_capacity(transcript.len() + 1);
    out.push(window);
    out.extend_from_slice(transcript);
    out
}

/// The default format's request ([`OpenAiChat`]'s: the window a system message first), for a
/// checkpoint that names no format (read back from JSON). Here, beside the trait, so what
/// lays out a checkpoint does not depend on a format's formula.
pub(crate) fn default_request_messages(window: &str, transcript: &[Message]) -> Vec<Message> {
    window_first(Message::system(window), transcript)
}

impl std::fmt::Debug for dyn ChatFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// [`ChatFormat::message_tokens`] for `message` with `content`, or `None` when it passes
/// `limit`: the content is counted with [`TokenCounter::count_till_limit`], so a huge text far
/// over the limit costs little to reject (issue 20.5).
pub(crate) fn message_tokens_limited(
    format: &dyn ChatFormat,
    message: &Message,
    content: &str,
    counter: &dyn TokenCounter,
    limit: usize,
) -> Option<usize> {
    let rest = format.message_tokens(message, "", counter) - counter.count("");
    let left = limit.checked_sub(rest)?;
    Some(rest + counter.count_till_limit(content, left)?)
}

/// The key a planner's memory records for counts by `counter` in `format`: the counter's name
/// alone for the default format (so checkpoints of the default are unchanged), else both.
pub(crate) fn counts_key(counter: &dyn TokenCounter, format: &dyn ChatFormat) -> String {
    if format.name() == OPENAI_CHAT {
        counter.name().to_owned()
    } else {
        format!("{} in {}", counter.name(), format.name())
    }
}

#[cfg(test)]
mod tests;
