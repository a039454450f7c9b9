//! The chat message types: `Message`, `Role`, `ToolCall`, as agents and chat APIs use them.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt: pinned, verbatim.
    System,
    /// Developer instructions (the newer name for system messages): pinned, verbatim.
    Developer,
    /// The user: protected, never summarized.
    User,
    /// The model's replies, possibly calling tools.
    Assistant,
    /// A tool result, answering one call by its id.
    Tool,
}

impl Role {
    /// The role's wire name (`system`, `developer`, `user`, `assistant`, `tool`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// System and developer messages: kept verbatim in every compaction.
    pub fn is_pinned(self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

/// One tool call an assistant message makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id; its result names it in `tool_call_id`.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON.
    pub arguments: serde_json::Value,
    /// The idempotency key of the `EffectLog` record this call performs, when it has side
    /// effects. A call whose effect is live (`not_started` or `unknown`) is never folded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

impl ToolCall {
    /// A call without side effects.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: serde_json::Value,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            effect: None,
        }
    }

    /// Links the call to the effect record with this idempotency key.
    pub fn with_effect(mut self, key: impl Into<String>) -> Self {
        self.effect = Some(key.into());
        self
    }
}

/// One message of a conversation with a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub content: String,
    /// Tool calls (assistant messages only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers (tool messages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// An optional participant name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    fn of(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::of(Role::System, content)
    }

    /// A developer message.
    pub fn developer(content: impl Into<String>) -> Self {
        Self::of(Role::Developer, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::of(Role::User, content)
    }

    /// An assistant message without tool calls.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::of(Role::Assistant, content)
    }

    /// An assistant message that calls tools.
    pub fn assistant_with_tools(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Message {
            tool_calls: calls,
            ..Self::of(Role::Assistant, content)
        }
    }

    /// The result of the call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            tool_call_id: Some(call_id.into()),
            ..Self::of(Role::Tool, content)
        }
    }

    /// Sets the participant name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}
