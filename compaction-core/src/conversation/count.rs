//! Chat token counting with the default format's formula ([`OpenAiChat`]: see its module for
//! the formula): what a list of messages costs in an OpenAI chat request. Other wire formats
//! count through their [`ChatFormat`](crate::transcript::ChatFormat).

use crate::conversation::format::{ChatFormat, OpenAiChat};
use crate::conversation::transcript::Message;
use crate::tokens::TokenCounter;

/// Tokens of one message in an OpenAI chat request ([`OpenAiChat::message_tokens`]).
pub fn message_tokens<C: TokenCounter + ?Sized>(message: &Message, counter: &C) -> usize {
    OpenAiChat.message_tokens(message, &message.content, &Borrowed(counter))
}

/// Tokens of a whole OpenAI chat request: every message plus the reply priming
/// ([`OpenAiChat::request_tokens`]).
///
/// ```
/// use compaction::transcript::{chat_tokens, ChatFormat, OpenAiChat};
/// use compaction::{Message, Tokenizer};
///
/// let messages = [Message::system("be brief"), Message::user("hello world")];
/// // 3 + "system" (1) + "be brief" (2), then 3 + "user" (1) + "hello world" (2), then 3.
/// let priming = OpenAiChat.reply_priming();
/// assert_eq!(chat_tokens(&messages, &Tokenizer::O200kBase), 6 + 6 + priming);
/// ```
pub fn chat_tokens<C: TokenCounter + ?Sized>(messages: &[Message], counter: &C) -> usize {
    OpenAiChat.request_tokens(messages, &Borrowed(counter))
}

/// A borrowed counter of any kind (a `dyn TokenCounter` too) as a sized one, for the format's
/// `&dyn TokenCounter`.
struct Borrowed<'a, C: ?Sized>(&'a C);

impl<C: TokenCounter + ?Sized> TokenCounter for Borrowed<'_, C> {
    fn count(&self, text: &str) -> usize {
        self.0.count(text)
    }

    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        self.0.count_till_limit(text, limit)
    }

    fn name(&self) -> &str {
        self.0.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::format::message_tokens_limited;
    use crate::conversation::transcript::ToolCall;
    use crate::tokens::Tokenizer;
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
            9 + 10 + 7 + OpenAiChat.reply_priming()
        );
        assert_eq!(
            chat_tokens(&[], &Tokenizer::O200kBase),
            OpenAiChat.reply_priming()
        );
    }

    #[test]
    fn a_limited_count_agrees_with_the_formula_or_says_over() {
        let counter = Tokenizer::O200kBase;
        let message = Message::user("hello world, this is a test").with_name("ann");
        let exact = message_tokens(&message, &counter);
        let limited = |limit| {
            message_tokens_limited(&OpenAiChat, &message, &message.content, &counter, limit)
        };
        assert_eq!(limited(exact), Some(exact));
        assert_eq!(limited(exact - 1), None);
        assert_eq!(limited(0), None);
    }
}
