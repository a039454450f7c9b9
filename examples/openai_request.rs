//! One turn through async-openai's chat types, as the guide's "Letting the model follow pointers"
//! shows it (`src/lib.rs` tests that docs/pointers.md's block is this file below these lines): the
//! compacted request, the model's reply converted back, its pointer calls answered. Needs the
//! `openai-types` feature (types only, no HTTP client):
//! `cargo run --example openai_request --features openai-types`.

use compaction::openai::async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionResponseMessage, ChatCompletionTools,
};
use compaction::openai::{from_openai_response_message, resolve_pointer_chat_tool};
use compaction::pointer_tool::PointerResolver;
use compaction::{Compactable, Compactor, Message, Transcript};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Agent {
    #[transcript]
    chat: Transcript,
}

/// Your chat client's call (e.g. async-openai's `client.chat().create(..)` with these messages
/// and tools). This stand-in answers "ok" without a server.
fn send(
    _messages: Vec<ChatCompletionRequestMessage>,
    _tools: Vec<ChatCompletionTools>,
) -> ChatCompletionResponseMessage {
    serde_json::from_value(serde_json::json!({"role": "assistant", "content": "ok"}))
        .expect("a chat completion message")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut agent = Agent::default();
    agent.chat.push(Message::user("why did the deploy fail?"));
    let compactor = Compactor::builder().budget(32_000).build()?;
    let mut resolver = PointerResolver::new();

    let compacted = compactor.compact_blocking(&agent)?;
    resolver.allow_compacted(&compactor, &compacted)?;
    let reply = send(
        compacted.openai_messages(),
        vec![resolve_pointer_chat_tool()],
    );
    let message = from_openai_response_message(&reply)?; // typed error for what we cannot carry
    agent.chat.push(message.clone());
    for call in message
        .tool_calls
        .iter()
        .filter(|c| PointerResolver::handles(c))
    {
        agent
            .chat
            .push(resolver.handle_blocking(&compactor, call).message);
    }
    println!(
        "{} messages, valid: {}",
        agent.chat.len(),
        agent.chat.validate().is_ok()
    );
    Ok(())
}
