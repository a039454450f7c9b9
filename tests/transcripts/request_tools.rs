//! Everything sent is counted (issue 30 item 2): the tool definitions a session is given are
//! part of every request's tokens and of its budget, by the chat format's formula, and the
//! request carries them.

use crate::session_driver::{compactor, effect_of, fresh_agent, Agent};

use compaction::pointer_tool::{resolve_pointer_definition, resolve_pointer_tool};
use compaction::session::{Session, SessionRequest};
use compaction::transcript::TOOL_USE_SYSTEM_PROMPT_TOKENS;
use compaction::transcript::{ChatFormat, OpenAiChat};
use compaction::{CompactionError, Compactor, MemoryStore, Message, Tokenizer, ToolCall};
use compaction::{TokenCounter, ToolDefinition};
use serde_json::json;

/// A tool with a long schema, like a real agent's (about 300 tokens).
fn search_tool() -> ToolDefinition {
    let mut properties = serde_json::Map::new();
    for field in [
        "query", "path", "glob", "language", "since", "until", "author", "limit",
    ] {
        properties.insert(
            field.to_owned(),
            json!({"type": "string", "description": format!("Only results whose {field} matches this value; see the repository's search syntax for {field} (wildcards, ranges, negation with a leading '!').")}),
        );
    }
    ToolDefinition::new(
        "search_code",
        "Search the repository's code and history. Returns matching lines with their file and line number, newest first.",
        json!({"type": "object", "properties": properties, "required": ["query"]}),
    )
}

fn tools() -> Vec<ToolDefinition> {
    vec![resolve_pointer_definition(), search_tool()]
}

fn session(budget: usize, tools: Vec<ToolDefinition>) -> Session<Agent> {
    Session::builder("agent-tools")
        .compactor(compactor(budget))
        .store(MemoryStore::new())
        .tools(tools)
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .unwrap()
}

/// What the OpenAI chat body of `request` costs by the wire's formula: its messages, and each
/// tool in the shape the body sends it.
fn body_tokens(request: &SessionRequest) -> usize {
    let counter = Tokenizer::O200kBase;
    let messages = OpenAiChat.request_tokens(request.messages(), &counter);
    let tools: usize = request
        .tools()
        .iter()
        .map(|tool| counter.count(&tool.openai_chat().to_string()))
        .sum();
    messages + tools
}

/// Thirty turns of searches with results of ~2 KB: the session compacts many times.
fn drive(session: &mut Session<Agent>, mut each: impl FnMut(&SessionRequest)) {
    for turn in 0..30 {
        session.push(Message::user(format!("turn {turn}: find the retry loop")));
        let request = session.next_request_blocking().unwrap();
        each(&request);
        let call = ToolCall::new(
            format!("c{turn}"),
            "search_code",
            json!({ "query": "retry" }),
        );
        session
            .push_response(Message::assistant_with_tools("", vec![call.clone()]))
            .unwrap();
        let result = format!("src/retry.rs:{turn}: loop {{ backoff(); }}\n").repeat(50);
        session.answer(&call, result).unwrap();
        let request = session.next_request_blocking().unwrap();
        each(&request);
        session
            .push_response(Message::assistant(format!("found it, turn {turn}")))
            .unwrap();
    }
}

#[test]
fn every_request_counts_its_tools_and_stays_within_the_budget() {
    let budget = 3_000;
    let mut session = session(budget, tools());
    let tools_tokens = session.compactor().tools_tokens();
    assert!(tools_tokens > 300, "the tools cost {tools_tokens}");
    let mut requests = 0;
    drive(&mut session, |request| {
        requests += 1;
        assert_eq!(request.tools(), tools().as_slice());
        assert!(
            request.tokens() >= body_tokens(request),
            "tokens() {} is below the body's {}",
            request.tokens(),
            body_tokens(request)
        );
        assert!(
            request.tokens() <= budget,
            "{} > {budget}",
            request.tokens()
        );
    });
    assert_eq!(requests, 60);
}

#[test]
fn the_tools_take_their_room_from_the_messages() {
    // The same conversation with and without tools: with them, the messages get less room.
    let budget = 3_000;
    let mut largest = [0usize; 2];
    for (i, tools) in [Vec::new(), tools()].into_iter().enumerate() {
        let mut session = session(budget, tools);
        drive(&mut session, |request| {
            let counter = Tokenizer::O200kBase;
            let messages = OpenAiChat.request_tokens(request.messages(), &counter);
            largest[i] = largest[i].max(messages);
        });
    }
    let tools_tokens = OpenAiChat.tools_tokens(&tools(), &Tokenizer::O200kBase);
    assert!(
        largest[1] + tools_tokens <= budget,
        "{largest:?} + {tools_tokens}"
    );
    assert!(largest[0] > largest[1], "{largest:?}");
}

#[test]
fn the_pointer_tools_definition_is_the_same_on_every_wire() {
    let tool = resolve_pointer_definition();
    assert_eq!(tool.openai_chat(), resolve_pointer_tool());
    assert_eq!(tool.openai_responses()["name"], "resolve_pointer");
    assert_eq!(tool.openai_responses()["type"], "function");
    assert_eq!(tool.anthropic()["input_schema"], tool.parameters);
}

#[test]
fn a_budget_the_tools_fill_is_refused() {
    let error = Compactor::builder()
        .budget(200)
        .tools(tools())
        .build()
        .unwrap_err();
    assert!(
        matches!(&error, CompactionError::Config(message) if message.contains("tool definitions")),
        "{error:?}"
    );
    // Anthropic's formula adds the tool-use system prompt it documents.
    let anthropic = compaction::AnthropicMessages.tools_tokens(&tools(), &Tokenizer::O200kBase);
    let openai = OpenAiChat.tools_tokens(&tools(), &Tokenizer::O200kBase);
    assert!(
        anthropic >= TOOL_USE_SYSTEM_PROMPT_TOKENS + openai / 2,
        "{anthropic} {openai}"
    );
    assert_eq!(
        compaction::AnthropicMessages.tools_tokens(&[], &Tokenizer::O200kBase),
        0
    );
}
