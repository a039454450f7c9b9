//! [`ToolDefinition`]: a tool the model may call, independent of the wire (its name,
//! description and the JSON schema of its arguments), with its shape on each wire. A request's
//! tools are part of what the provider counts, so the budget counts them too
//! ([`ChatFormat::tools_tokens`](crate::conversation::format::ChatFormat::tools_tokens)).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A tool the model may call: what every wire's tool definition holds.
///
/// Give a session its tools with `SessionBuilder::tools` (or a compactor with
/// `CompactorBuilder::tools`): their tokens are taken from the budget of every request, and
/// the request carries them (`SessionRequest::tools`, and Anthropic's request builder puts them
/// in its `tools`). The pointer tool is
/// [`resolve_pointer_definition`](crate::pointer_tool::resolve_pointer_definition).
///
/// ```
/// use compaction::ToolDefinition;
/// use serde_json::json;
///
/// let read = ToolDefinition::new(
///     "read_file",
///     "Read a file of the repository.",
///     json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
/// );
/// assert_eq!(read.openai_chat()["function"]["name"], "read_file");
/// assert_eq!(read.openai_responses()["name"], "read_file");
/// assert_eq!(read.anthropic()["input_schema"]["required"][0], "path");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name the model calls it by.
    pub name: String,
    /// What the model reads about when and how to call it.
    pub description: String,
    /// The JSON schema of its arguments (an object schema).
    pub parameters: Value,
}

impl ToolDefinition {
    /// A tool named `name`, described by `description`, whose arguments follow the JSON schema
    /// `parameters`.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolDefinition {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }

    /// OpenAI chat completions' shape: `{"type": "function", "function": {"name",
    /// "description", "parameters"}}`.
    pub fn openai_chat(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }

    /// OpenAI Responses' shape: `{"type": "function", "name", "description", "parameters"}`.
    pub fn openai_responses(&self) -> Value {
        json!({
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        })
    }

    /// Anthropic Messages' shape: `{"name", "description", "input_schema"}`.
    pub fn anthropic(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "input_schema": self.parameters,
        })
    }
}
