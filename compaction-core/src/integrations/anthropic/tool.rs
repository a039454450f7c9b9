//! The `resolve_pointer` tool in the Messages API's tool shape (`name`, `description`,
//! `input_schema`), for an Anthropic request's `tools`.

use crate::pointer_tool::definition::{
    resolve_pointer_parameters, RESOLVE_POINTER, RESOLVE_POINTER_DESCRIPTION,
};
use serde_json::{json, Value};

/// The `resolve_pointer` tool (see [`crate::pointer_tool`]) as an Anthropic tool definition:
/// put it in the request's `tools` (with a `Session`, give
/// [`resolve_pointer_definition`](crate::pointer_tool::resolve_pointer_definition) to
/// `SessionBuilder::tools` instead: its request builder sends it, counted in the budget), then
/// answer the model's `tool_use` calls with `Session::answer_pointer_calls`.
///
/// ```
/// let tool = compaction::anthropic::resolve_pointer_anthropic_tool();
/// assert_eq!(tool["name"], "resolve_pointer");
/// assert_eq!(tool["input_schema"]["required"][0], "pointer");
/// ```
pub fn resolve_pointer_anthropic_tool() -> Value {
    json!({
        "name": RESOLVE_POINTER,
        "description": RESOLVE_POINTER_DESCRIPTION,
        "input_schema": resolve_pointer_parameters(),
    })
}
