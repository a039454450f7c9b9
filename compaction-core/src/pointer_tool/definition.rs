//! The `resolve_pointer` tool as a model sees it: its name, description and JSON schema in the
//! OpenAI tools format.

use crate::conversation::tool::ToolDefinition;
use serde_json::{json, Value};

/// The tool's name, as the model calls it.
pub const RESOLVE_POINTER: &str = "resolve_pointer";

/// What the model reads about the tool: when to call it and what it returns.
pub const RESOLVE_POINTER_DESCRIPTION: &str = "Read back, byte for byte, content that left your \
    context during compaction. Pass a handle exactly as it appears in your context (p followed by \
    a number, like p17) or a full pointer (store://sha256: followed by 64 hex digits): tombstoned \
    and paged tool results, spilled values, user runs and folded turns each name one. For a user \
    run or a folded range, also pass index=N to read message #N exactly. The content is verified \
    before it is returned. Long content comes in parts: the result then says which bytes it holds \
    and the offset to pass for the rest.";

/// The JSON schema of the tool's arguments: `pointer` (required: a handle like `p17`, or a
/// full `store://sha256:` pointer), `index` (optional: which message of a user run or folded
/// range) and `offset` (optional, the byte to start from when a long content comes in parts).
pub fn resolve_pointer_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pointer": {
                "type": "string",
                "description": "The handle (like p17) or pointer (store://sha256:<64 hex digits>), exactly as in your context.",
                "pattern": "^(store://sha256:[0-9a-fA-F]{64}|⟦?p[1-9][0-9]*⟧?)$"
            },
            "index": {
                "type": "integer",
                "minimum": 0,
                "description": "For a user run or a folded range: the number of the message to read (its #N)."
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "The byte to start from, when an earlier result said the content was cut (default 0)."
            }
        },
        "required": ["pointer"],
        "additionalProperties": false
    })
}

/// The ready tool definition, in the OpenAI tools format (`{"type": "function", "function":
/// {name, description, parameters}}`): put it in the `tools` array of a chat request, then answer
/// the model's calls with [`PointerResolver`](crate::pointer_tool::PointerResolver).
///
/// ```
/// let tool = compaction::pointer_tool::resolve_pointer_tool();
/// assert_eq!(tool["type"], "function");
/// assert_eq!(tool["function"]["name"], "resolve_pointer");
/// assert_eq!(tool["function"]["parameters"]["required"][0], "pointer");
/// ```
pub fn resolve_pointer_tool() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": RESOLVE_POINTER,
            "description": RESOLVE_POINTER_DESCRIPTION,
            "parameters": resolve_pointer_parameters(),
        }
    })
}

/// The pointer tool as a wire-neutral [`ToolDefinition`]: give it to `SessionBuilder::tools`
/// (or `CompactorBuilder::tools`) with your own, so the budget counts it and the request
/// carries it in each wire's shape.
///
/// ```
/// let tool = compaction::pointer_tool::resolve_pointer_definition();
/// assert_eq!(tool.name, "resolve_pointer");
/// assert_eq!(tool.openai_chat(), compaction::pointer_tool::resolve_pointer_tool());
/// ```
pub fn resolve_pointer_definition() -> ToolDefinition {
    ToolDefinition::new(
        RESOLVE_POINTER,
        RESOLVE_POINTER_DESCRIPTION,
        resolve_pointer_parameters(),
    )
}
