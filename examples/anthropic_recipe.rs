//! The recipe of the guide's "An agent on Anthropic's Messages API" (docs/anthropic.md): a
//! session on Claude's wire with `ClaudeEstimate`, tools in the budget, the request with its
//! cache breakpoints, and one turn of the loop against a recorded reply.
//! `cargo run --example anthropic_recipe --features anthropic-types`

use compaction::anthropic::{AnthropicResponse, ClaudeEstimate};
use compaction::pointer_tool::resolve_pointer_definition;
use compaction::session::{Session, ToolFailure};
use compaction::{AnthropicMessages, Compactable, Compactor, Message, ToolDefinition, Transcript};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Agent {
    #[protected(pin)]
    rules: Vec<String>,
    #[transcript]
    chat: Transcript,
}

/// Your HTTP client goes here; this one answers with a recorded reply.
fn ask_claude(body: &serde_json::Value) -> AnthropicResponse {
    assert!(body["tools"]
        .as_array()
        .is_some_and(|tools| tools.len() == 2));
    serde_json::from_value(json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file",
                     "input": {"path": "src/lib.rs"}}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 2095, "output_tokens": 50}
    }))
    .unwrap()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let read_file = ToolDefinition::new(
        "read_file",
        "Read a file of the repository.",
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    );
    let mut session = Session::builder("claude-agent")
        .compactor(
            Compactor::builder()
                .budget(16_000)
                .token_counter(ClaudeEstimate::default()),
        )
        .chat_format(AnthropicMessages)
        .tools([resolve_pointer_definition(), read_file])
        .open_blocking(|| Agent {
            rules: vec!["Never push to main.".into()],
            ..Agent::default()
        })?;

    session.push(Message::user("What does src/lib.rs export?"));
    let request = session.next_request_blocking()?;
    let body = request.anthropic_request("claude-sonnet-4-5", 4096)?;
    assert!(request.tokens() <= 16_000); // messages, tools and the tool-use prompt
    session.push_response(ask_claude(&serde_json::to_value(&body)?))?;
    session.run_tools_blocking(|call| async move {
        match call.name.as_str() {
            "read_file" => Ok(format!(
                "// {}\npub mod session;",
                call.arguments.value()?["path"]
            )),
            other => Err(ToolFailure::failed(format!("no tool named {other}"))),
        }
    })?;
    assert!(!session.awaiting_user()); // the model reads the result next
    let next = session.next_request_blocking()?;
    assert!(next
        .messages()
        .iter()
        .any(|m| m.content.contains("pub mod session")));
    Ok(())
}
