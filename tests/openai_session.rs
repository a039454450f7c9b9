//! A session's turns in async-openai's types, and a session driving a chat model over real HTTP
//! (feature `openai`: the loopback server of `compaction-fixtures`). The model's completion or
//! its message is pushed as it comes, the request goes out as chat completion messages, and what
//! the server receives is exactly what the session asked to send: effects under the ledger run
//! once, and a request that only appends extends the previous one on the wire.

mod session_driver;

use compaction::openai::async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionResponseMessage, CreateChatCompletionResponse,
};
use compaction::openai::from_openai_messages;
use compaction::session::{EffectOutcome, Session, SessionError, SessionRequest};
use compaction::{Compactable, Compactor, EffectLedger, EffectStatus, MemoryLedger, MemoryStore};
use compaction::{Message, Role, Transcript};
use compaction_fixtures::openai_server::{FakeOpenAi, Reply};
use serde::{Deserialize, Serialize};
use serde_json::json;
use session_driver::{compactor, effect_of, fresh_agent, model_of, user_message, Script, SCOPE};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Agent {
    #[transcript]
    chat: Transcript,
}

fn completion(message: serde_json::Value) -> CreateChatCompletionResponse {
    serde_json::from_value(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }))
    .unwrap()
}

#[test]
fn a_completion_is_pushed_and_the_request_converts() {
    let mut session = Session::<Agent>::builder("a")
        .compactor(Compactor::builder().budget(2_000))
        .open_blocking(Agent::default)
        .unwrap();
    session.push(Message::user("read it"));
    let request = session.next_request_blocking().unwrap();
    let sent = request.openai_messages();
    assert_eq!(sent.len(), request.messages().len());
    assert!(matches!(sent[0], ChatCompletionRequestMessage::System(_)));
    assert!(matches!(sent[1], ChatCompletionRequestMessage::User(_)));

    let arguments = r#"{"path": "a.rs", "n": 123456789012345678901234567890}"#;
    let reply = completion(json!({
        "role": "assistant", "content": null,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": arguments}}],
    }));
    session.push_response(&reply).unwrap();
    let calls = session.pending_calls();
    assert_eq!(
        calls[0].arguments_text(),
        arguments,
        "arguments byte for byte"
    );
    session.answer(&calls[0], "fn main() {}").unwrap();
    let request = session.next_request_blocking().unwrap();
    assert!(matches!(
        request.openai_messages().last(),
        Some(ChatCompletionRequestMessage::Tool(_))
    ));

    // The message alone, by value.
    let message: ChatCompletionResponseMessage =
        serde_json::from_value(json!({"role": "assistant", "content": "done"})).unwrap();
    session.push_response(message).unwrap();
    assert_eq!(
        session.transcript().messages().last().unwrap().content,
        "done"
    );
}

#[test]
fn what_our_messages_cannot_carry_is_refused_and_nothing_is_pushed() {
    let mut session = Session::<Agent>::builder("a")
        .compactor(Compactor::builder().budget(2_000))
        .open_blocking(Agent::default)
        .unwrap();
    let refusal = completion(json!({"role": "assistant", "content": null, "refusal": "no"}));
    assert!(matches!(
        session.push_response(&refusal),
        Err(SessionError::Response(_))
    ));
    let empty: CreateChatCompletionResponse = serde_json::from_value(json!({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []
    }))
    .unwrap();
    assert!(matches!(
        session.push_response(empty),
        Err(SessionError::Response(_))
    ));
    assert!(session.transcript().is_empty());
}

/// POSTs `body` to the chat completions endpoint behind `base_url` (`http://127.0.0.1:PORT/v1`)
/// over a plain HTTP/1.1 connection, and returns the 200 response's body.
fn post(base_url: &str, body: &str) -> String {
    let rest = base_url.strip_prefix("http://").expect("a loopback URL");
    let (host, path) = rest.split_once('/').expect("a URL with a path");
    let mut stream = TcpStream::connect(host).expect("the server accepts");
    write!(
        stream,
        "POST /{path}/chat/completions HTTP/1.1\r\nHost: {host}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a full response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// The server side of the model: the driver's model, a pure function of the messages the
/// request carries (parsed back from the wire), answered as a chat completion.
fn serve(script: Script) -> FakeOpenAi {
    FakeOpenAi::start_with(move |request| {
        let wire: Vec<ChatCompletionRequestMessage> =
            serde_json::from_value(request.json()["messages"].clone()).expect("chat messages");
        let messages = from_openai_messages(&wire).expect("messages we sent");
        let reply = model_of(&script, &messages);
        if reply.tool_calls.is_empty() {
            return Reply::summary(reply.content);
        }
        let calls: Vec<(&str, &str, &str)> = reply
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments_text()))
            .collect();
        Reply::tool_calls(&reply.content, &calls)
    })
    .expect("a loopback server starts")
}

/// One request on the wire: the body the agent sends for `request`.
fn body_of(request: &SessionRequest) -> serde_json::Value {
    json!({
        "model": "fake-model",
        "messages": request.openai_messages(),
        "tools": [compaction::pointer_tool::resolve_pointer_tool()],
        "prompt_cache_key": request.prompt_cache_key(),
    })
}

#[test]
fn a_session_drives_a_model_over_http_and_the_wire_carries_its_requests() {
    let script = Script { seed: 7, turns: 10 };
    let server = serve(script);
    let (store, ledger) = (MemoryStore::new(), MemoryLedger::new());
    let mut session = Session::builder("agent-http")
        .compactor(compactor(2_500))
        .store(store)
        .ledger(ledger.clone())
        .effect_calls(effect_of)
        .open_blocking(fresh_agent)
        .unwrap();
    let performed = Mutex::new(Vec::<String>::new());
    let mut sent: Vec<SessionRequest> = Vec::new();
    // The outcome of every deploy, by the round of the loop that ran it.
    let mut outcomes: Vec<(usize, EffectOutcome)> = Vec::new();
    // Every turn once, then the first turn again: its deploy must not run twice.
    let turns = (0..script.turns).chain([0]);
    for (round, turn) in turns.enumerate() {
        session.push(Message::user(user_message(turn)));
        loop {
            let request = session.next_request_blocking().unwrap();
            let body = post(&server.base_url(), &body_of(&request).to_string());
            sent.push(request);
            let completion: CreateChatCompletionResponse = serde_json::from_str(&body).unwrap();
            session.push_response(&completion).unwrap();
            if session.pending_calls().is_empty() {
                break;
            }
            session.answer_pointer_calls_blocking();
            for call in session.pending_calls() {
                match call.name.as_str() {
                    "read_file" => session.answer(&call, script.file(turn)).unwrap(),
                    "deploy" => {
                        let key = effect_of(&call).unwrap().effect.idempotency_key;
                        let performed = &performed;
                        let run = || async move {
                            performed.lock().unwrap().push(key.clone());
                            Ok::<_, String>(format!("deployed {key}"))
                        };
                        outcomes.push((round, session.run_effect_blocking(&call, run).unwrap()));
                    }
                    other => panic!("the model called an unknown tool {other}"),
                }
            }
        }
    }

    // The server received exactly the requests the session made, in order.
    let received = server.requests();
    assert_eq!(received.len(), sent.len());
    for (wire, request) in received.iter().zip(&sent) {
        assert_eq!(wire.json(), body_of(request));
        assert_eq!(wire.json()["messages"][0]["role"], "system");
    }
    // Between compaction points a request only appends: the previous one is a prefix of it on
    // the wire, so a provider's prompt cache hits.
    let mut appended = 0;
    for (pair, wires) in sent.windows(2).zip(received.windows(2)) {
        if pair[1].is_compaction_point() {
            continue;
        }
        let (before, after) = (&wires[0].json()["messages"], &wires[1].json()["messages"]);
        let (before, after) = (before.as_array().unwrap(), after.as_array().unwrap());
        assert!(after.len() > before.len() && after[..before.len()] == before[..]);
        appended += 1;
    }
    assert!(appended > 0, "some requests only appended");
    assert!(
        sent.iter()
            .any(|r| r.is_compaction_point() && r.sequence() > 1),
        "the conversation outgrew the budget and was compacted"
    );
    assert!(sent.iter().all(|r| r.tokens() <= 2_500));

    // Each deploy ran once; the repeated turn's deploy was not run, and the model was told.
    let performed = performed.into_inner().unwrap();
    let mut unique = performed.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        performed.len(),
        "an effect ran twice: {performed:?}"
    );
    assert!(!performed.is_empty());
    for key in &performed {
        let status = compaction::block_on(ledger.status(SCOPE, key)).unwrap();
        assert_eq!(status, Some(EffectStatus::Committed), "{key}");
    }
    let repeated: Vec<&EffectOutcome> = outcomes
        .iter()
        .filter(|(round, _)| *round == script.turns)
        .map(|(_, outcome)| outcome)
        .collect();
    assert!(
        performed.contains(&"deploy-0".to_owned()),
        "seed 7 deploys in turn 0"
    );
    assert_eq!(repeated, [&EffectOutcome::AlreadyCommitted]);
    let told = session
        .transcript()
        .messages()
        .iter()
        .rev()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert!(!told.content.starts_with("deployed"), "{}", told.content);
}
