//! The formats' formulas, counted with a word counter so every number is checkable by hand.

use super::*;
use crate::conversation::message::ToolCall;
use serde_json::json;

fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

fn conversation() -> Vec<Message> {
    vec![
        Message::system("the window"),
        Message::system("you code"),
        Message::user("read a"),
        Message::assistant_with_tools("", vec![ToolCall::new("c1", "read", json!({"p": 1}))]),
        Message::tool_result("c1", "x y"),
        Message::user("and b"),
        Message::assistant("done"),
    ]
}

#[test]
fn openai_chat_prices_every_message_alone_with_its_overheads() {
    let messages = conversation();
    // system: 3 + 1 + 2, 3 + 1 + 2; user 3 + 1 + 2; call: 3 + 1 + 0 + (3 + 1 + 1 + 1);
    // result 3 + 1 + 2 + 1; user 3 + 1 + 2; assistant 3 + 1 + 1; priming 3.
    let expected = 6 + 6 + 6 + 10 + 7 + 6 + 5 + 3;
    assert_eq!(OpenAiChat.request_tokens(&messages, &words), expected);
    assert_eq!(OpenAiChat.window_tokens("", &words), 4);
    assert_eq!(OpenAiChat.system_placement(), SystemPlacement::Messages);
}

#[test]
fn anthropic_puts_leading_system_messages_top_level_and_merges_turns() {
    let messages = conversation();
    // system field: (1 + 2) + (1 + 2); user turn 3 + 1 + (1 + 2); assistant turn 3 + 1 +
    // (1 + 0 + 3 + 1 + 1 + 1); user turn: the result (1 + 2 + 1) and "and b" (1 + 2) joined,
    // 3 + 1 + 4 + 3; assistant 3 + 1 + (1 + 1); priming 3.
    let expected = 6 + 7 + 11 + 11 + 6 + 3;
    assert_eq!(
        AnthropicMessages.request_tokens(&messages, &words),
        expected
    );
    assert_eq!(AnthropicMessages.window_tokens("a b", &words), 3);
    // Without merging (every message its own turn) the same list costs more: what the planner
    // prices is an upper bound.
    let priced: usize = messages
        .iter()
        .map(|m| AnthropicMessages.message_tokens(m, &m.content, &words))
        .sum();
    assert!(expected < priced + AnthropicMessages.reply_priming());
}

#[test]
fn anthropic_counts_a_system_message_after_the_conversation_as_a_user_block() {
    let late = [
        Message::user("go"),
        Message::system("an update"),
        Message::assistant("ok"),
    ];
    // user turn 3 + 1 + (1 + 1), the update joined (1 + 2); assistant 3 + 1 + (1 + 1); 3.
    assert_eq!(
        AnthropicMessages.request_tokens(&late, &words),
        6 + 3 + 6 + 3
    );
}

#[test]
fn grouped_counts_never_pass_the_planners_upper_bound() {
    // Every pair of roles, in every order of three: the exact count is at most the sum of the
    // messages priced alone, for both formats.
    let kinds = [
        Message::system("s s"),
        Message::developer("d"),
        Message::user("u u u"),
        Message::assistant("a"),
        Message::tool_result("c9", "r r"),
    ];
    let formats: [&dyn ChatFormat; 2] = [&OpenAiChat, &AnthropicMessages];
    for format in formats {
        for a in &kinds {
            for b in &kinds {
                for c in &kinds {
                    let list = [a.clone(), b.clone(), c.clone()];
                    let alone: usize = list
                        .iter()
                        .map(|m| format.message_tokens(m, &m.content, &words))
                        .sum();
                    let exact = format.request_tokens(&list, &words);
                    assert!(
                        exact <= alone + format.reply_priming(),
                        "{format:?} {list:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_limited_count_agrees_with_each_format() {
    let counter = crate::tokens::Tokenizer::O200kBase;
    let message = Message::tool_result("call_1", "hello world, this is a test");
    for format in [&OpenAiChat as &dyn ChatFormat, &AnthropicMessages] {
        let exact = format.message_tokens(&message, &message.content, &counter);
        let limited =
            |limit| message_tokens_limited(format, &message, &message.content, &counter, limit);
        assert_eq!(limited(exact), Some(exact));
        assert_eq!(limited(exact - 1), None);
    }
}

#[test]
fn memories_of_another_format_are_keyed_apart() {
    let counter = crate::tokens::Tokenizer::O200kBase;
    assert_eq!(counts_key(&counter, &OpenAiChat), "o200k_base");
    assert_eq!(
        counts_key(&counter, &AnthropicMessages),
        "o200k_base in anthropic-messages"
    );
}
