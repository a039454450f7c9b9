//! A session's turn in async-openai's types (feature `openai-types`): the model's completion or
//! its message pushed as it comes, the request as chat completion messages.

use compaction::openai::async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionResponseMessage, CreateChatCompletionResponse,
};
use compaction::session::{Session, SessionError};
use compaction::{Compactable, Compactor, Message, Transcript};
use serde::{Deserialize, Serialize};
use serde_json::json;

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
