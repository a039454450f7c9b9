//! The wire-format seam (issue 23.1): a compaction planned for a [`ChatFormat`] fits the budget
//! counted by that format's own formula (OpenAI chat, Anthropic's Messages, a format of the
//! user's), and the format really drives the plan: a heavier framing per message keeps fewer
//! messages at the same budget.

use compaction::transcript::chat_tokens;
use compaction::{
    AnthropicMessages, ChatFormat, Compactable, Compacted, Compactor, Message, OpenAiChat,
    TokenCounter, Tokenizer, ToolCall, Transcript,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Compactable, Serialize, Deserialize, Clone)]
struct Agent {
    #[protected(pin)]
    rules: Vec<String>,
    #[transcript]
    chat: Transcript,
}

/// A session of `turns` turns: a user message, a call and its result, an answer.
fn agent(turns: usize) -> Agent {
    let mut chat = Transcript::from_messages(vec![Message::system("You are careful.")]).unwrap();
    for turn in 0..turns {
        chat.push(Message::user(format!("turn {turn}: read file {turn}")));
        let call = ToolCall::new(format!("call_{turn}"), "read", json!({"path": turn}));
        chat.push(Message::assistant_with_tools("", vec![call]));
        let body = format!("line {turn} of the file. ").repeat(5 + turn % 13);
        chat.push(Message::tool_result(format!("call_{turn}"), body));
        chat.push(Message::assistant(format!("file {turn} read, nothing odd")));
    }
    Agent {
        rules: vec!["never touch /etc/prod".into()],
        chat,
    }
}

fn compact(agent: &Agent, budget: usize, format: impl ChatFormat + 'static) -> Compacted<Agent> {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .chat_format(format)
        .build()
        .unwrap()
        .compact_blocking(agent)
        .unwrap()
}

/// OpenAI's formula with a heavy framing (40 more tokens per message), and the window as a
/// developer message.
#[derive(Clone, Copy, Debug)]
struct Heavy;

impl ChatFormat for Heavy {
    fn name(&self) -> &str {
        "heavy"
    }
    fn message_tokens(
        &self,
        message: &Message,
        content: &str,
        counter: &dyn TokenCounter,
    ) -> usize {
        OpenAiChat.message_tokens(message, content, counter) + 40
    }
    fn reply_priming(&self) -> usize {
        3
    }
    fn window_message(&self, window: &str) -> Message {
        Message::developer(window)
    }
}

/// Plans `state` at budgets from 1,500 up to its full size: each request fits the budget by
/// `format`'s own count, and the planner's count is never under it.
fn fits_by_its_own_formula(
    state: &Agent,
    format: impl ChatFormat + Copy + std::fmt::Debug + 'static,
) {
    let counter = Tokenizer::O200kBase;
    let full = format.request_tokens(state.chat.messages(), &counter);
    let mut compacted_somewhere = false;
    for budget in (1_500..full).step_by(997) {
        let compacted = compact(state, budget, format);
        let messages = compacted.messages();
        let exact = format.request_tokens(&messages, &counter);
        let reported = compacted.request_tokens().unwrap();
        assert!(exact <= budget, "{format:?} at {budget}: {exact} tokens");
        // The planner prices each message as its own turn: never under the exact count.
        assert!(
            exact <= reported && reported <= budget,
            "{format:?}: {exact} {reported}"
        );
        compacted_somewhere |= messages.len() < state.chat.len() + 1;
    }
    assert!(compacted_somewhere, "{format:?}: some budget compacts");
}

#[test]
fn every_format_plans_within_the_budget_by_its_own_formula() {
    let state = agent(60);
    fits_by_its_own_formula(&state, OpenAiChat);
    fits_by_its_own_formula(&state, AnthropicMessages);
    fits_by_its_own_formula(&state, Heavy);
}

#[test]
fn the_default_counts_the_chat_way_and_anthropic_counts_its_window_top_level() {
    let counter = Tokenizer::O200kBase;
    let state = agent(40);
    let default = Compactor::builder()
        .budget(3_000)
        .build()
        .unwrap()
        .compact_blocking(&state)
        .unwrap();
    assert_eq!(
        chat_tokens(&default.messages(), &counter),
        default.request_tokens().unwrap(),
        "the default's request count is exactly the chat formula's"
    );
    let anthropic = compact(&state, 3_000, AnthropicMessages);
    // Same layout (the window first, then the transcript); the window's framing is a system
    // block's, not a message's.
    assert_eq!(anthropic.messages()[0], Message::system(anthropic.render()));
    assert!(
        AnthropicMessages.window_tokens(anthropic.render(), &counter)
            < OpenAiChat.window_tokens(anthropic.render(), &counter)
    );
}

#[test]
fn a_heavier_framing_per_message_keeps_fewer_messages() {
    let state = agent(60);
    let budget = 6_000;
    let plain = compact(&state, budget, OpenAiChat);
    let heavy = compact(&state, budget, Heavy);
    let kept = |c: &Compacted<Agent>| c.report().transcript.as_ref().unwrap().kept;
    assert!(
        kept(&heavy) < kept(&plain),
        "heavy keeps {} messages, plain {}",
        kept(&heavy),
        kept(&plain)
    );
    assert!(Heavy.request_tokens(&heavy.messages(), &Tokenizer::O200kBase) <= budget);
    // Counted by the plain formula, the heavy plan leaves most of the budget unused: the
    // format, not the counter, made the difference.
    assert!(chat_tokens(&heavy.messages(), &Tokenizer::O200kBase) < budget / 2 + budget / 4);
}

#[test]
fn the_format_lays_out_the_window_and_a_loaded_checkpoint_can_name_it() {
    let state = agent(10);
    let compacted = compact(&state, 4_000, Heavy);
    assert_eq!(
        compacted.messages()[0],
        Message::developer(compacted.render())
    );
    // The format is code, not part of the checkpoint: read back, the default lays it out,
    // unless named.
    let json = serde_json::to_string(&compacted).unwrap();
    let loaded: Compacted<Agent> = serde_json::from_str(&json).unwrap();
    assert_eq!(loaded.messages()[0], Message::system(compacted.render()));
    assert_eq!(loaded.messages_in(&Heavy), compacted.messages());
}
