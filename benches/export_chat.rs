//! Writes the transcript bench's conversation as OpenAI chat messages (JSON) for the Python
//! peer (`benches/peers/trim_messages.py`): `cargo run -p compaction-benches --example
//! export_chat -- OUT.json [MESSAGES]`.

use compaction::Role;
use compaction_fixtures::chat;
use serde_json::{json, Value};

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args.next().expect("usage: export_chat OUT.json [MESSAGES]");
    let length = args.next().map_or(10_000, |n| n.parse().expect("a count"));
    let agent = chat::session(length, 10);
    let messages: Vec<Value> = agent
        .chat
        .iter()
        .map(|m| {
            let mut value = json!({ "role": m.role.as_str(), "content": m.content });
            if !m.tool_calls.is_empty() {
                value["tool_calls"] = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({ "id": c.id, "type": "function", "function": {
                        "name": c.name, "arguments": c.arguments.to_string() } })
                    })
                    .collect();
            }
            if m.role == Role::Tool {
                value["tool_call_id"] = json!(m.tool_call_id);
            }
            value
        })
        .collect();
    let file = json!({ "budget": 32_000, "messages": messages });
    std::fs::write(&out, serde_json::to_vec(&file).expect("serializes")).expect("writes");
    println!("{} messages -> {out}", messages.len());
}
