//! Anthropic Messages API values as JSON, our own serde types written from the API reference:
//! messages, content blocks (thinking blocks kept as the raw JSON that arrived), requests and
//! responses. Unknown block types are kept raw ([`ContentBlock::Other`]) so nothing is dropped.

use crate::conversation::message::{OpaqueKind, OpaquePart, ToolArguments};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

/// Who wrote a message: Anthropic has two roles (the system prompt is a top-level field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnthropicRole {
    /// The user; tool results come in user messages.
    User,
    /// The model; tool calls are `tool_use` blocks of its messages.
    Assistant,
}

/// A prompt-cache breakpoint (`{"type":"ephemeral","ttl":"5m"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheControl {
    /// Always `ephemeral` today.
    #[serde(rename = "type")]
    pub kind: String,
    /// `5m` or `1h`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
}

impl CacheControl {
    /// `{"type":"ephemeral"}`: the default five-minute breakpoint.
    pub fn ephemeral() -> Self {
        CacheControl {
            kind: "ephemeral".to_owned(),
            ttl: None,
        }
    }
}

/// One block of a message's `content`.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `{"type":"text","text":..}`.
    Text {
        /// The text.
        text: String,
        /// A cache breakpoint after this block.
        cache_control: Option<CacheControl>,
    },
    /// `{"type":"tool_use","id","name","input"}`: `input` is the JSON object exactly as
    /// received or as the model wrote our call's arguments.
    ToolUse {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// The input object, its JSON text as received.
        input: ToolArguments,
        /// A cache breakpoint after this block.
        cache_control: Option<CacheControl>,
    },
    /// `{"type":"tool_result","tool_use_id","content","is_error"}`.
    ToolResult {
        /// The call answered.
        tool_use_id: String,
        /// The result: a string, or blocks (text, image).
        content: Option<ToolResultContent>,
        /// Whether the tool failed.
        is_error: Option<bool>,
        /// A cache breakpoint after this block.
        cache_control: Option<CacheControl>,
    },
    /// A `thinking` or `redacted_thinking` block, byte-for-byte as it arrived.
    Opaque(OpaquePart),
    /// Any other block (image, document, server tool use and results, search results, a text
    /// block with citations), kept as its JSON text: conversions to our messages refuse it.
    Other(String),
}

/// A `tool_result`'s content: a string or a list of blocks.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResultContent {
    /// `"content": "..."`.
    Text(String),
    /// `"content": [blocks]`.
    Blocks(Vec<ContentBlock>),
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnthropicMessage {
    /// Who wrote it.
    pub role: AnthropicRole,
    /// Its blocks (read from a string too: `"content": "hi"` is one text block).
    #[serde(deserialize_with = "blocks_or_string")]
    pub content: Vec<ContentBlock>,
}

/// One block of the top-level `system` prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemBlock {
    /// Always `text`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text.
    pub text: String,
    /// A cache breakpoint after this block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

impl SystemBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        SystemBlock {
            kind: "text".to_owned(),
            text: text.into(),
            cache_control: None,
        }
    }
}

/// A Messages API request (`POST /v1/messages`): the fields compaction writes and reads.
/// `tools`, `tool_choice` and `thinking` are passed through as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnthropicRequest {
    /// The model.
    pub model: String,
    /// The most tokens the reply may have.
    pub max_tokens: u32,
    /// The system prompt (read from a string too).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "system_or_string"
    )]
    pub system: Vec<SystemBlock>,
    /// The conversation.
    pub messages: Vec<AnthropicMessage>,
    /// Tool definitions, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// How the model may use tools, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Extended thinking settings, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Value>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
}

/// Token usage of a response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnthropicUsage {
    /// Input tokens not read from or written to the cache.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens written to the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// Input tokens read from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
}

/// A Messages API response (`type: "message"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnthropicResponse {
    /// The message id.
    pub id: String,
    /// Always `assistant`.
    pub role: AnthropicRole,
    /// The model that answered.
    pub model: String,
    /// The reply's blocks.
    pub content: Vec<ContentBlock>,
    /// `end_turn`, `max_tokens`, `stop_sequence`, `tool_use`, `pause_turn`, `refusal`.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// The stop sequence met, if any.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// Token usage.
    #[serde(default)]
    pub usage: AnthropicUsage,
}

// --- serialization of blocks ------------------------------------------------------------

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TextBlock {
    #[serde(rename = "type")]
    kind: String,
    text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolUseBlock {
    #[serde(rename = "type")]
    kind: String,
    id: String,
    name: String,
    input: Box<RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolResultBlock {
    #[serde(rename = "type")]
    kind: String,
    tool_use_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Deserialize)]
struct BlockType {
    #[serde(rename = "type")]
    kind: String,
}

impl ContentBlock {
    /// A plain text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text {
            text: text.into(),
            cache_control: None,
        }
    }

    /// The block's `type`.
    pub fn kind(&self) -> String {
        match self {
            ContentBlock::Text { .. } => "text".to_owned(),
            ContentBlock::ToolUse { .. } => "tool_use".to_owned(),
            ContentBlock::ToolResult { .. } => "tool_result".to_owned(),
            ContentBlock::Opaque(part) => part.kind().wire_type().to_owned(),
            ContentBlock::Other(raw) => serde_json::from_str::<BlockType>(raw)
                .map(|b| b.kind)
                .unwrap_or_default(),
        }
    }

    /// The block's cache breakpoint, if it has one.
    pub fn cache_control(&self) -> Option<&CacheControl> {
        match self {
            ContentBlock::Text { cache_control, .. }
            | ContentBlock::ToolUse { cache_control, .. }
            | ContentBlock::ToolResult { cache_control, .. } => cache_control.as_ref(),
            ContentBlock::Opaque(_) | ContentBlock::Other(_) => None,
        }
    }

    /// The `cache_control` a thinking or raw block carries in its own JSON (any value: the
    /// provider, not this function, judges its shape). The library neither places nor clears
    /// these, so they count towards a request's four.
    pub(crate) fn raw_cache_control(&self) -> Option<serde_json::Value> {
        let raw = match self {
            ContentBlock::Opaque(part) => part.block(),
            ContentBlock::Other(raw) => raw.as_str(),
            _ => return None,
        };
        let fields: std::collections::BTreeMap<String, &RawValue> =
            serde_json::from_str(raw).ok()?;
        serde_json::from_str(fields.get("cache_control")?.get()).ok()
    }

    /// Sets (or clears) the block's cache breakpoint; `false` for a block that cannot carry
    /// one here (thinking blocks, raw blocks).
    pub fn set_cache_control(&mut self, control: Option<CacheControl>) -> bool {
        match self {
            ContentBlock::Text { cache_control, .. }
            | ContentBlock::ToolUse { cache_control, .. }
            | ContentBlock::ToolResult { cache_control, .. } => {
                *cache_control = control;
                true
            }
            ContentBlock::Opaque(_) | ContentBlock::Other(_) => false,
        }
    }

    fn from_raw(raw: &RawValue) -> Result<ContentBlock, serde_json::Error> {
        let kind = serde_json::from_str::<BlockType>(raw.get())?.kind;
        let opaque =
            |kind| OpaquePart::from_block(kind, raw.get()).map_err(serde_json::Error::custom);
        Ok(match kind.as_str() {
            "thinking" => ContentBlock::Opaque(opaque(OpaqueKind::AnthropicThinking)?),
            "redacted_thinking" => {
                ContentBlock::Opaque(opaque(OpaqueKind::AnthropicRedactedThinking)?)
            }
            // Server-side compaction (the `compact_20260112` context-management edit, beta
            // header `compact-2026-01-12`): the response's assistant content carries a
            // `{"type": "compaction", "content": ...}` block, to be sent back in its turn on
            // later requests (Anthropic, "Compaction", build-with-claude/compaction).
            "compaction" => ContentBlock::Opaque(opaque(OpaqueKind::AnthropicCompaction)?),
            "text" => match serde_json::from_str::<TextBlock>(raw.get()) {
                Ok(b) => ContentBlock::Text {
                    text: b.text,
                    cache_control: b.cache_control,
                },
                Err(_) => ContentBlock::Other(raw.get().to_owned()),
            },
            "tool_use" => match serde_json::from_str::<ToolUseBlock>(raw.get()) {
                Ok(b) => ContentBlock::ToolUse {
                    id: b.id,
                    name: b.name,
                    input: ToolArguments::from_text(String::from(Box::<str>::from(b.input)))
                        .map_err(serde_json::Error::custom)?,
                    cache_control: b.cache_control,
                },
                Err(_) => ContentBlock::Other(raw.get().to_owned()),
            },
            "tool_result" => match serde_json::from_str::<ToolResultBlock>(raw.get()) {
                Ok(b) => ContentBlock::ToolResult {
                    tool_use_id: b.tool_use_id,
                    content: match b.content {
                        None => None,
                        Some(content) => Some(ToolResultContent::from_raw(&content)?),
                    },
                    is_error: b.is_error,
                    cache_control: b.cache_control,
                },
                Err(_) => ContentBlock::Other(raw.get().to_owned()),
            },
            _ => ContentBlock::Other(raw.get().to_owned()),
        })
    }
}

impl ToolResultContent {
    fn from_raw(raw: &RawValue) -> Result<ToolResultContent, serde_json::Error> {
        if raw.get().starts_with('"') {
            Ok(ToolResultContent::Text(serde_json::from_str(raw.get())?))
        } else {
            let blocks: Vec<Box<RawValue>> = serde_json::from_str(raw.get())?;
            let blocks = blocks.iter().map(|raw| ContentBlock::from_raw(raw));
            Ok(ToolResultContent::Blocks(blocks.collect::<Result<_, _>>()?))
        }
    }

    fn to_raw(&self) -> Result<Box<RawValue>, serde_json::Error> {
        match self {
            ToolResultContent::Text(text) => serde_json::value::to_raw_value(text),
            ToolResultContent::Blocks(blocks) => serde_json::value::to_raw_value(blocks),
        }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ContentBlock::Text {
                text,
                cache_control,
            } => TextBlock {
                kind: "text".to_owned(),
                text: text.clone(),
                cache_control: cache_control.clone(),
            }
            .serialize(serializer),
            ContentBlock::ToolUse {
                id,
                name,
                input,
                cache_control,
            } => ToolUseBlock {
                kind: "tool_use".to_owned(),
                id: id.clone(),
                name: name.clone(),
                input: input.raw().to_owned(),
                cache_control: cache_control.clone(),
            }
            .serialize(serializer),
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                cache_control,
            } => {
                let content = match content {
                    Some(content) => Some(content.to_raw().map_err(serde::ser::Error::custom)?),
                    None => None,
                };
                ToolResultBlock {
                    kind: "tool_result".to_owned(),
                    tool_use_id: tool_use_id.clone(),
                    content,
                    is_error: *is_error,
                    cache_control: cache_control.clone(),
                }
                .serialize(serializer)
            }
            ContentBlock::Opaque(part) => part.raw_block().serialize(serializer),
            ContentBlock::Other(text) => RawValue::from_string(text.clone())
                .map_err(serde::ser::Error::custom)?
                .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        ContentBlock::from_raw(&raw).map_err(D::Error::custom)
    }
}

fn blocks_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ContentBlock>, D::Error> {
    let raw = Box::<RawValue>::deserialize(d)?;
    if raw.get().starts_with('"') {
        let text: String = serde_json::from_str(raw.get()).map_err(D::Error::custom)?;
        return Ok(vec![ContentBlock::text(text)]);
    }
    serde_json::from_str(raw.get()).map_err(D::Error::custom)
}

fn system_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SystemBlock>, D::Error> {
    let raw = Box::<RawValue>::deserialize(d)?;
    if raw.get().starts_with('"') {
        let text: String = serde_json::from_str(raw.get()).map_err(D::Error::custom)?;
        return Ok(vec![SystemBlock::text(text)]);
    }
    serde_json::from_str(raw.get()).map_err(D::Error::custom)
}
