//! Writes a transcript bench's conversation as OpenAI chat messages (JSON) for the Python
//! peer (`benches/peers/trim_messages.py`):
//! `cargo run --release -p compaction-benches --example export_chat -- OUT.json [coding|chat-heavy] [MESSAGES]`
//! (default: the coding conversation of 10,000 messages). The same generators and seeds as
//! `benches/transcript.rs`, so both sides see the same messages.

use compaction_fixtures::chat::{self, openai_message, ChatHeavy};
use serde_json::{json, Value};

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .expect("usage: export_chat OUT.json [coding|chat-heavy] [MESSAGES]");
    let kind = args.next().unwrap_or_else(|| "coding".into());
    let length = args.next().map_or(10_000, |n| n.parse().expect("a count"));
    let agent = match kind.as_str() {
        "coding" => chat::session(length, 10),
        "chat-heavy" => ChatHeavy::new(20).agent(length),
        other => panic!("unknown conversation {other}: coding or chat-heavy"),
    };
    let messages: Vec<Value> = agent.chat.iter().map(openai_message).collect();
    let file = json!({ "budget": 32_000, "conversation": kind, "messages": messages });
    std::fs::write(&out, serde_json::to_vec(&file).expect("serializes")).expect("writes");
    println!("{} {kind} messages -> {out}", messages.len());
}
