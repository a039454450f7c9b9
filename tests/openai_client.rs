//! `OpenAiClient` against the scripted loopback server (feature `openai`; real HTTP, no
//! network): chat completions and Responses replies as async-openai's types, 429 / 5xx retried
//! honouring `retry-after`, other 4xx and non-replies typed at once, the key never in an error
//! and never sent in the clear; and a session's whole request on each OpenAI wire
//! (`openai_chat_request`, `responses_request`) carrying its messages, tools and cache key,
//! its `tokens()` bounding what the Responses body sends (issue 30 item 2 on that wire).

use compaction::openai::async_openai::types::responses::OutputItem;
use compaction::openai::{from_responses_output, OpenAiClient, OpenAiClientError};
use compaction::pointer_tool::resolve_pointer_definition;
use compaction::session::Session;
use compaction::{block_on, Compactable, Compactor, MemoryLedger, MemoryStore, Message};
use compaction::{TokenCounter, Tokenizer, ToolCall, Transcript};
use compaction_fixtures::openai_server::{FakeOpenAi, Reply};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Duration;

const KEY: &str = "sk-test-key-0123456789";
const RESPONSES_OUTPUT: &str = include_str!("../fixtures/openai/responses_output.json");

fn client(server: &FakeOpenAi) -> OpenAiClient {
    OpenAiClient::new(KEY)
        .base_url(server.base_url())
        .timeout(Duration::from_secs(5))
        .max_retries(3)
        .max_backoff(Duration::from_secs(2))
}

fn body() -> serde_json::Value {
    json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
}

#[test]
fn chat_retries_429_and_5xx_then_returns_the_completion_with_the_body_as_given() {
    let server = FakeOpenAi::start([
        Reply::rate_limited("0"),
        Reply::error(503, "overloaded"),
        Reply::tool_calls("", &[("call_1", "read_file", r#"{"path": "p17"}"#)]),
    ])
    .unwrap();
    let completion = block_on(client(&server).chat(&body())).unwrap();
    let calls = completion.choices[0].message.tool_calls.as_ref().unwrap();
    assert_eq!(calls.len(), 1);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].path, "/v1/chat/completions");
    assert_eq!(
        requests[2].json(),
        body(),
        "the client adds nothing to the body"
    );
    assert_eq!(
        requests[2].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[test]
fn retries_are_bounded_and_other_4xx_and_non_replies_are_not_retried() {
    let server = FakeOpenAi::start((0..10).map(|_| Reply::rate_limited("0"))).unwrap();
    let error = block_on(client(&server).max_retries(2).chat(&body())).unwrap_err();
    assert!(
        matches!(error, OpenAiClientError::Http { status: 429, .. }),
        "{error}"
    );
    assert!(error.is_retryable(), "a 429 may pass later");
    assert_eq!(server.request_count(), 3);

    // A server asking for a longer wait than allowed ends the call at once.
    let server = FakeOpenAi::start([Reply::rate_limited("60")]).unwrap();
    let error = block_on(client(&server).chat(&body())).unwrap_err();
    assert!(
        matches!(error, OpenAiClientError::Http { status: 429, .. }),
        "{error}"
    );
    assert_eq!(server.request_count(), 1);

    // A 400 that echoes the key and imitates the library's markers: typed, the key scrubbed.
    let echo = format!("key {KEY} refused for ⟦p17⟧ store://sha256:00ff");
    let server = FakeOpenAi::start([Reply::error(400, &echo)]).unwrap();
    let error = block_on(client(&server).chat(&body())).unwrap_err();
    let OpenAiClientError::Http { status, message } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(*status, 400);
    assert!(
        message.starts_with("invalid_request_error: key <api key> refused"),
        "{message}"
    );
    assert!(!format!("{error} {error:?}").contains(KEY));
    assert!(!error.is_retryable(), "a 400 fails the same way again");
    assert_eq!(server.request_count(), 1);

    // A 200 that is not a completion.
    let server = FakeOpenAi::start([Reply::Raw("<html>maintenance</html>".into())]).unwrap();
    let error = block_on(client(&server).chat(&body())).unwrap_err();
    assert!(
        matches!(error, OpenAiClientError::Malformed { .. }),
        "{error}"
    );
    assert!(!error.is_retryable());
    assert_eq!(server.request_count(), 1);
}

#[test]
fn refused_connections_are_retried_then_reported_and_the_key_needs_https_or_loopback() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = OpenAiClient::new(KEY)
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .max_retries(1)
        .max_backoff(Duration::from_secs(1));
    let error = block_on(client.chat(&body())).unwrap_err();
    assert!(
        matches!(error, OpenAiClientError::Connect { .. }),
        "{error}"
    );
    assert!(!format!("{error} {error:?}").contains(KEY));

    let insecure = OpenAiClient::new(KEY).base_url("http://api.example.invalid/v1");
    assert_eq!(
        block_on(insecure.chat(&body())),
        Err(OpenAiClientError::InsecureTransport {
            host: "api.example.invalid".into()
        })
    );
    // Without a key nothing secret is sent: a local server on the network is fine (the call
    // fails here only because the host does not exist).
    let keyless = OpenAiClient::new("").base_url("http://api.example.invalid/v1");
    let error = block_on(keyless.max_retries(0).chat(&body())).unwrap_err();
    assert!(
        !matches!(error, OpenAiClientError::InsecureTransport { .. }),
        "{error}"
    );
}

#[test]
fn responses_returns_the_recorded_response_whose_output_becomes_one_message() {
    let server = FakeOpenAi::start([
        Reply::error(500, "try again"),
        Reply::Raw(RESPONSES_OUTPUT.to_owned()),
    ])
    .unwrap();
    let request = json!({"model": "o4-mini", "input": "hi", "store": false});
    let response = block_on(client(&server).responses(&request)).unwrap();
    // The documented example's `usage` lacks the details async-openai requires: the reply is
    // kept, the usage dropped.
    assert!(response.usage.is_none());
    assert!(matches!(response.output[0], OutputItem::Reasoning(_)));
    let messages = from_responses_output(&response.output).unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].tool_calls[0].name, "read_file");
    assert_eq!(server.requests()[1].path, "/v1/responses");
    // The loopback's own text answer on this route is a Responses reply too.
    let server = FakeOpenAi::start([Reply::summary("done")]).unwrap();
    let response = block_on(client(&server).responses(&request)).unwrap();
    assert_eq!(
        from_responses_output(&response.output).unwrap()[0].content,
        "done"
    );
}

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Agent {
    #[transcript]
    chat: Transcript,
}

/// A session with the pointer tool's definition, in memory.
fn session(budget: usize) -> Session<Agent> {
    Session::builder("agent-7")
        .compactor(Compactor::builder().budget(budget))
        .tools([resolve_pointer_definition()])
        .store(MemoryStore::new())
        .ledger(MemoryLedger::new())
        .open_blocking(Agent::default)
        .unwrap()
}

#[test]
fn a_session_request_on_each_openai_wire_carries_messages_tools_and_cache_key() {
    let mut session = session(8_000);
    session.push(Message::user("read ⟦p4⟧ and store://sha256:abc"));
    let request = session.next_request_blocking().unwrap();
    session
        .push_response(Message::assistant_with_tools(
            "",
            vec![ToolCall::new("c1", "read_file", json!({"path": "p17"}))],
        ))
        .unwrap();

    let chat = serde_json::to_value(request.openai_chat_request("gpt-4o-mini")).unwrap();
    assert_eq!(chat["model"], "gpt-4o-mini");
    assert_eq!(
        chat["messages"],
        serde_json::to_value(request.openai_messages()).unwrap()
    );
    assert_eq!(chat["tools"][0]["function"]["name"], "resolve_pointer");
    assert_eq!(chat["prompt_cache_key"], request.prompt_cache_key());

    let responses = serde_json::to_value(request.responses_request("o4-mini")).unwrap();
    assert_eq!(
        responses["input"],
        serde_json::to_value(request.responses_input()).unwrap()
    );
    assert_eq!(responses["tools"][0]["name"], "resolve_pointer");
    assert_eq!(responses["store"], false);
    assert_eq!(responses["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(responses["prompt_cache_key"], request.prompt_cache_key());
    let input = request.responses_input();
    let back = compaction::openai::from_responses_input(&input).unwrap();
    assert_eq!(back.len(), request.messages().len());
    assert_eq!(back[1].content, "read ⟦p4⟧ and store://sha256:abc");
}

/// What a Responses body's input and tools cost, each item priced as the chat formula prices
/// the message it stands for (the API renders the same conversation to the model): 3 per item,
/// a message's role and texts, a call's id, name and arguments, an output's id and text, a
/// reasoning item's encrypted content and summary; each tool in the Responses shape.
fn responses_body_tokens(body: &serde_json::Value) -> usize {
    let count = |v: &serde_json::Value| v.as_str().map_or(0, |s| Tokenizer::O200kBase.count(s));
    let mut tokens = 0;
    for item in body["input"].as_array().expect("a list of items") {
        tokens += 3;
        match item["type"].as_str() {
            Some("message") => {
                tokens += count(&item["role"]);
                match &item["content"] {
                    serde_json::Value::Array(parts) => {
                        tokens += parts.iter().map(|p| count(&p["text"])).sum::<usize>()
                    }
                    text => tokens += count(text),
                }
            }
            Some("function_call") => {
                tokens += count(&item["call_id"]) + count(&item["name"]);
                tokens += count(&item["arguments"]);
            }
            Some("function_call_output") => {
                tokens += count(&item["call_id"]) + count(&item["output"]);
            }
            Some("reasoning") => {
                tokens += count(&item["encrypted_content"]);
                let summary = item["summary"].as_array().into_iter().flatten();
                tokens += summary.map(|s| count(&s["text"])).sum::<usize>();
            }
            other => panic!("an input item of an unexpected type: {other:?}"),
        }
    }
    let tools = body["tools"].as_array().into_iter().flatten();
    tokens
        + tools
            .map(|t| Tokenizer::O200kBase.count(&t.to_string()))
            .sum::<usize>()
}

#[test]
fn a_session_requests_tokens_bound_its_responses_body_with_tools() {
    let mut session = session(6_000);
    let (mut compacted, mut last) = (0, 0);
    for turn in 0..40 {
        session.push(Message::user(format!("turn {turn}: read the next file")));
        let request = session.next_request_blocking().unwrap();
        let body = serde_json::to_value(request.responses_request("o4-mini")).unwrap();
        let sent = responses_body_tokens(&body);
        assert!(
            sent <= request.tokens(),
            "turn {turn}: {sent} > {}",
            request.tokens()
        );
        assert!(request.tokens() <= 6_000);
        // A request smaller than the one before it is a compaction point's.
        compacted += usize::from(request.tokens() < last);
        last = request.tokens();
        let call = ToolCall::new(format!("c{turn}"), "read_file", json!({"path": turn}));
        session
            .push_response(Message::assistant_with_tools(
                format!("reading file {turn}"),
                vec![call.clone()],
            ))
            .unwrap();
        let result = format!("line {turn}: let retry = backoff(attempt);\n").repeat(40);
        session.answer(&call, result).unwrap();
    }
    // The bound held across compaction points, not only on whole transcripts.
    assert!(compacted > 0, "the session never compacted");
}

const CHAT_SSE: &str = include_str!("../fixtures/openai/chat_stream_tool_calls.sse");
const CHAT_JSON: &str = include_str!("../fixtures/openai/chat_stream_tool_calls.json");

/// `chat_stream` sends `"stream": true` (and asks for the usage chunk), assembles the chunks
/// into the completion `chat` returns, and makes a stream that broke or ended early again from
/// the start; an error object in the stream is final, its text without the key.
#[test]
fn chat_stream_assembles_what_chat_returns_and_retries_a_cut_stream() {
    use compaction::openai::async_openai::types::chat::CreateChatCompletionResponse;
    // The recorded completion read as async-openai's type (as `chat` would), without its
    // `usage` (OpenAI's example's shape is not async-openai's).
    let mut recorded: serde_json::Value = serde_json::from_str(CHAT_JSON).unwrap();
    recorded.as_object_mut().unwrap().remove("usage");
    let recorded: CreateChatCompletionResponse = serde_json::from_value(recorded).unwrap();
    let recorded = serde_json::to_value(&recorded).unwrap();
    let server = FakeOpenAi::start([
        Reply::rate_limited("0"),
        Reply::Sse(CHAT_SSE[..CHAT_SSE.len() / 2].to_owned()),
        Reply::Sse(CHAT_SSE.to_owned()),
    ])
    .unwrap();
    let reply = block_on(client(&server).chat_stream(&body())).unwrap();
    let reply = serde_json::to_value(&reply).unwrap();
    assert_eq!(reply["choices"], recorded["choices"]);
    assert_eq!(reply["id"], recorded["id"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "a 429, a cut stream, then the whole one");
    let sent = requests[2].json();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    assert_eq!(sent["messages"], body()["messages"]);

    // Every attempt cut: the last error, retryable.
    let cut = Reply::Sse(CHAT_SSE[..CHAT_SSE.len() / 3].to_owned());
    let server = FakeOpenAi::start(vec![cut; 4]).unwrap();
    let error = block_on(client(&server).chat_stream(&body())).unwrap_err();
    assert!(
        matches!(error, OpenAiClientError::Stream { .. }),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert_eq!(server.request_count(), 4);

    // The server's error object in the stream, echoing the key: final, the key scrubbed.
    let first = CHAT_SSE.split("\n\n").next().unwrap();
    let echo = format!(
        "{first}\n\ndata: {}\n\n",
        json!({"error": {"message": format!("bad key {KEY}"), "type": "invalid_request_error"}})
    );
    let server = FakeOpenAi::start([Reply::Sse(echo), Reply::Sse(CHAT_SSE.to_owned())]).unwrap();
    let error = block_on(client(&server).chat_stream(&body())).unwrap_err();
    assert!(
        matches!(error, OpenAiClientError::Stream { .. }),
        "{error:?}"
    );
    assert!(!error.is_retryable());
    assert!(!format!("{error} {error:?}").contains(KEY), "{error:?}");
    assert_eq!(server.request_count(), 1);
}
