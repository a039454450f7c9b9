//! Chat token counting: what a list of messages costs in a chat request, and a cache of text
//! counts so re-planning a grown transcript does not count its unchanged prefix again.
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

use crate::store::ContentHash;
use crate::tokens::TokenCounter;
use crate::transcript::conversation::Message;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};

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

/// What the cache knows about one text.
#[derive(Debug, Clone, Copy)]
struct TextFacts {
    tokens: Option<usize>,
    hash: Option<ContentHash>,
    generation: u64,
}

/// Token counts and SHA-256 hashes of texts, keyed by a 128-bit keyed hash of the text and its
/// length. An agent that compacts after every turn re-plans a transcript whose prefix has not
/// changed: its counts and hashes come from here instead of the tokenizer and SHA-256.
///
/// The key is two SipHash-1-3 values under random per-process keys, so an adversary cannot craft
/// colliding texts; an accidental collision is a 2^-128 event. Entries not used by the latest
/// plan are dropped, so the cache holds one transcript's working set.
#[derive(Debug, Default)]
pub(crate) struct TextCache {
    first: RandomState,
    second: RandomState,
    entries: HashMap<(u64, u64, usize), TextFacts>,
    generation: u64,
}

impl TextCache {
    fn entry(&mut self, text: &str) -> &mut TextFacts {
        let key = (
            self.first.hash_one(text),
            self.second.hash_one(text),
            text.len(),
        );
        let generation = self.generation;
        let facts = self.entries.entry(key).or_insert(TextFacts {
            tokens: None,
            hash: None,
            generation,
        });
        facts.generation = generation;
        facts
    }

    /// Tokens of `text`, counted once.
    pub(crate) fn tokens<C: TokenCounter + ?Sized>(&mut self, text: &str, counter: &C) -> usize {
        // Short texts (roles, ids, names) are cheaper to count than to look up.
        if text.len() < 16 {
            return counter.count(text);
        }
        let facts = self.entry(text);
        match facts.tokens {
            Some(tokens) => tokens,
            None => {
                let tokens = counter.count(text);
                facts.tokens = Some(tokens);
                tokens
            }
        }
    }

    /// SHA-256 of `text`, computed once.
    pub(crate) fn hash(&mut self, text: &str) -> ContentHash {
        let facts = self.entry(text);
        match facts.hash {
            Some(hash) => hash,
            None => {
                let hash = ContentHash::of(text.as_bytes());
                facts.hash = Some(hash);
                hash
            }
        }
    }

    /// Starts a plan: entries touched from now on survive the next [`TextCache::sweep`].
    pub(crate) fn begin(&mut self) {
        self.generation += 1;
    }

    /// Drops every entry the current plan did not use.
    pub(crate) fn sweep(&mut self) {
        let generation = self.generation;
        self.entries
            .retain(|_, facts| facts.generation == generation);
    }

    /// Number of texts known (for tests of the append case).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

// The planner's state lives here, beside the cache it holds, and its planning in `plan.rs`:
// the compactor stores a planner without depending on the planning steps.
/// Plans transcripts for one token counter, remembering the counts and hashes of the last
/// transcript it planned so that re-planning after an append only counts what is new.
pub struct TranscriptPlanner {
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) cache: Mutex<TextCache>,
}

impl std::fmt::Debug for TranscriptPlanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptPlanner")
            .field("counter", &self.counter.name())
            .finish_non_exhaustive()
    }
}

impl TranscriptPlanner {
    /// A planner counting with `counter`.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        TranscriptPlanner {
            counter,
            cache: Mutex::new(TextCache::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Tokenizer;
    use crate::transcript::conversation::ToolCall;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

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
    fn the_cache_counts_each_long_text_once_and_forgets_unused_ones() {
        let calls = AtomicUsize::new(0);
        let counting = |text: &str| {
            calls.fetch_add(1, Ordering::SeqCst);
            text.len()
        };
        let mut cache = TextCache::default();
        let long = "a long text that is over sixteen bytes";
        cache.begin();
        assert_eq!(cache.tokens(long, &counting), long.len());
        assert_eq!(cache.tokens(long, &counting), long.len());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(cache.hash(long), ContentHash::of(long.as_bytes()));
        cache.sweep();
        assert_eq!(cache.len(), 1);
        cache.begin();
        cache.sweep();
        assert_eq!(cache.len(), 0);
    }
}
