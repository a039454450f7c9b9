//! Proptest strategies and builders the wire-format suites share (OpenAI chat and Responses,
//! Anthropic Messages): hostile text, arguments as a model writes them, and calls answered by
//! their results.
// Each test binary uses a part of what is shared.
#![allow(dead_code)]

use compaction::transcript::{ToolArguments, MARKER_PREFIX};
use compaction::{Message, ToolCall};
use proptest::prelude::*;
use serde_json::json;

/// Text with unicode, quotes, backslashes, newlines and an imitation of our spill marker.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z ]{0,30}",
        1 => "[αβ日本🦀\"\\\n ]{1,20}",
        1 => Just(format!("{MARKER_PREFIX}spilled store://sha256:{}⟧", "ab".repeat(32))),
    ]
}

/// Object arguments, some as a model writes them (huge integers, repeated keys, spacing).
pub fn object_arguments() -> impl Strategy<Value = ToolArguments> {
    prop_oneof![
        2 => prop::collection::btree_map("[a-z]{1,5}", text(), 0..3)
            .prop_map(|m| ToolArguments::from(json!(m))),
        1 => ("[a-z]{1,4}", "[1-9][0-9]{19,40}", "[ \n]{0,2}").prop_map(|(k, n, ws)| {
            ToolArguments::from_text(format!(r#"{{"{k}":{n},{ws}"{k}" : "dup"}}"#)).unwrap()
        }),
    ]
}

/// `calls` (tool, arguments, result) as tool calls with fresh ids `{prefix}{n}` (`next` counts
/// them across a transcript) and the tool messages that answer them, in order.
pub fn answered(
    calls: Vec<(String, ToolArguments, String)>,
    prefix: &str,
    next: &mut usize,
) -> (Vec<ToolCall>, Vec<Message>) {
    let mut made = Vec::new();
    let mut results = Vec::new();
    for (tool, args, result) in calls {
        *next += 1;
        let id = format!("{prefix}{next}");
        made.push(ToolCall::new(&id, tool, args));
        results.push(Message::tool_result(id, result));
    }
    (made, results)
}
