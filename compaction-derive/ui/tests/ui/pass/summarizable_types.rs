//! `#[derive(Summarizable)]` on a plain struct and on an enum, used in `summarize` fields.
use compaction::{Compactable, Summarizable};
use serde::{Deserialize, Serialize};

#[derive(Summarizable, Serialize, Deserialize, Default)]
struct ToolCall {
    tool: String,
    output: String,
    exit: Option<i32>,
}

#[derive(Summarizable, Serialize, Deserialize, Default)]
enum Verdict {
    #[default]
    Pending,
    Passed {
        tests: u32,
    },
    Failed(String),
}

#[derive(Summarizable, Serialize, Deserialize, Default)]
struct Generic<T> {
    items: Vec<T>,
}

#[derive(Compactable, Serialize, Deserialize, Default)]
struct State {
    #[protected]
    run: u32,
    #[redundant(summarize)]
    calls: Vec<ToolCall>,
    #[derivable(pointer = "https://ci.example/runs/{run}", summarize)]
    verdict: Verdict,
    #[redundant(summarize)]
    generic: Generic<String>,
    #[redundant(summarize)]
    json: serde_json::Value,
    // A plain Compactable-free struct with only redundant fields may be evicted whole.
    #[redundant]
    scratch: Scratch,
}

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Scratch {
    #[redundant]
    lines: Vec<String>,
}

#[test]
fn summarizable_structs_and_enums() {
    assert_eq!(State::schema().fields().len(), 6);
    assert_eq!(
        Verdict::Failed("x".into()).summary_source(),
        r#"{"Failed":"x"}"#
    );
}
