//! The `resolve_pointer` tool as a model sees it: its name, description and JSON schema in the
//! OpenAI tools format.

use serde_json::{json, Value};

/// The tool's name, as the model calls it.
pub const RESOLVE_POINTER: &str = "resolve_pointer";

/// What the model reads about the tool: when to call it and what it returns.
pub const RESOLVE_POINTER_DESCRIPTION: &str = "Read back, byte for byte, content that left your \
    context during compaction. Pass a pointer exactly as it appears in your context \
    (store://sha256: followed by 64 hex digits): spilled values, stubbed user messages, \
    tombstoned tool results and folded turns each name one. The content is verified against the \
    pointer before it is returned. Long content comes in parts: the result then says which bytes \
    it holds and the offset to pass for the rest.";

/// The JSON schema of the tool's arguments: `pointer` (required) and `offset` (optional, the
/// byte to start from when a long content comes in parts).
pub fn resolve_pointer_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pointer": {
                "type": "string",
                "description": "The pointer, exactly as in your context: store://sha256:<64 hex digits>.",
                "pattern": "^store://sha256:[0-9a-fA-F]{64}$"
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
