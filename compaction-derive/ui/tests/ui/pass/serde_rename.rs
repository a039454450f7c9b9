//! serde renames change the serialized names, never the schema's field paths.
use compaction::Compactable;
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct State {
    #[protected]
    #[serde(rename = "configPath")]
    config_path: String,
    #[serde(rename = "contents")]
    #[derivable(pointer = "file://{config_path}")]
    config_contents: String,
    #[redundant]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tool_output: Vec<String>,
}

#[test]
fn schema_uses_rust_field_names() {
    // The schema uses the Rust field names, whatever serde calls them.
    let schema = State::schema();
    assert!(schema.field("config_path").is_some());
    assert!(schema.field("config_contents").is_some());
    assert!(schema.field("tool_output").is_some());
}
