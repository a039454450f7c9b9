//! Making provider-opaque parts: checking a provider's block as it arrived against its kind
//! (`OpaquePart::from_block`, also on every load, with the documented shapes of OpenAI's
//! reasoning and compaction items), and building one from its fields (an Anthropic thinking,
//! redacted thinking or compaction block, an OpenAI Responses reasoning or compaction item).
//! The type itself is in `message.rs`.

use crate::conversation::message::{OpaqueKind, OpaquePart, OpaquePartError};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

impl OpaquePart {
    /// A part from the provider's JSON block as it arrived (kept byte-for-byte, whitespace
    /// around it aside). The block must be an object, without a repeated `type`, `thinking`,
    /// `signature`, `data`, `content` or `encrypted_content`, whose `type` is the
    /// kind's, with the kind's fields: `thinking` and `signature` for
    /// [`AnthropicThinking`](OpaqueKind::AnthropicThinking), `data` for
    /// [`AnthropicRedactedThinking`](OpaqueKind::AnthropicRedactedThinking), `content` (a
    /// string, or `null`) for [`AnthropicCompaction`](OpaqueKind::AnthropicCompaction);
    /// [`OpenAiReasoning`](OpaqueKind::OpenAiReasoning) and
    /// [`OpenAiCompaction`](OpaqueKind::OpenAiCompaction) must have their item's documented
    /// fields and no other (the Responses adapter sends them through async-openai's items,
    /// which would drop an unknown field).
    pub fn from_block(kind: OpaqueKind, block: impl Into<String>) -> Result<Self, OpaquePartError> {
        let block = block.into();
        let not_object = |reason: String| OpaquePartError::NotAnObject { kind, reason };
        let raw = RawValue::from_string(block).map_err(|e| not_object(e.to_string()))?;
        if !raw.get().starts_with('{') {
            return Err(not_object("not an object".to_owned()));
        }
        let head: Head = serde_json::from_str(raw.get()).map_err(|e| not_object(e.to_string()))?;
        let expected = kind.wire_type();
        match &head.kind {
            Some(Value::String(found)) if found == expected => {}
            other => {
                return Err(OpaquePartError::WrongType {
                    expected,
                    found: other.as_ref().and_then(Value::as_str).map(str::to_owned),
                })
            }
        }
        for field in kind.required_strings() {
            if !head.field(field).is_some_and(Value::is_string) {
                return Err(OpaquePartError::MissingField {
                    expected_type: expected,
                    field,
                });
            }
        }
        let shape = match kind {
            OpaqueKind::OpenAiReasoning => check_shape::<ReasoningShape>(raw.get()),
            OpaqueKind::OpenAiCompaction => check_shape::<CompactionItemShape>(raw.get()),
            OpaqueKind::AnthropicCompaction => match &head.content {
                Some(Value::String(_) | Value::Null) => Ok(()),
                _ => Err("a compaction block's `content` is a string or null".to_owned()),
            },
            _ => Ok(()),
        };
        shape.map_err(|reason| OpaquePartError::Shape { reason })?;
        Ok(OpaquePart { kind, block: raw })
    }
}

impl OpaquePart {
    /// An Anthropic `thinking` block.
    pub fn anthropic_thinking(thinking: impl Into<String>, signature: impl Into<String>) -> Self {
        let block = serde_json::json!({
            "type": "thinking",
            "thinking": thinking.into(),
            "signature": signature.into(),
        });
        Self::built(OpaqueKind::AnthropicThinking, &block)
    }

    /// An Anthropic `redacted_thinking` block.
    pub fn anthropic_redacted_thinking(data: impl Into<String>) -> Self {
        let block = serde_json::json!({"type": "redacted_thinking", "data": data.into()});
        Self::built(OpaqueKind::AnthropicRedactedThinking, &block)
    }

    /// An OpenAI Responses `reasoning` item with its `encrypted_content` (and an empty
    /// `summary`, which the API requires on input). The block's text is the item as
    /// async-openai writes it (`type`, `id`, `summary`, `encrypted_content`, in that order), so a
    /// part built here and one read from the wire compare equal.
    pub fn openai_reasoning(id: impl Into<String>, encrypted_content: impl Into<String>) -> Self {
        let block = ReasoningOut {
            kind: "reasoning",
            id: id.into(),
            summary: [],
            encrypted_content: encrypted_content.into(),
        };
        // Plain strings and an empty array always serialize.
        let text = serde_json::to_string(&block).unwrap_or_default();
        OpaquePart::from_block(OpaqueKind::OpenAiReasoning, text)
            .expect("a reasoning item built with its documented fields is one")
    }

    /// An Anthropic `compaction` block with the provider's summary (`None`: the `null` content
    /// of a compaction that failed).
    pub fn anthropic_compaction(content: Option<String>) -> Self {
        let block = serde_json::json!({"type": "compaction", "content": content});
        Self::built(OpaqueKind::AnthropicCompaction, &block)
    }

    /// An OpenAI Responses `compaction` item with its `encrypted_content`. The block's text is
    /// the item as async-openai writes an input compaction item (`type`, `id`,
    /// `encrypted_content`, in that order), so a part built here and one read from the wire
    /// compare equal.
    pub fn openai_compaction(id: impl Into<String>, encrypted_content: impl Into<String>) -> Self {
        let block = CompactionOut {
            kind: "compaction",
            id: id.into(),
            encrypted_content: encrypted_content.into(),
        };
        // Plain strings always serialize.
        let text = serde_json::to_string(&block).unwrap_or_default();
        OpaquePart::from_block(OpaqueKind::OpenAiCompaction, text)
            .expect("a compaction item built with its documented fields is one")
    }

    fn built(kind: OpaqueKind, block: &Value) -> Self {
        OpaquePart::from_block(kind, block.to_string())
            .expect("a block built with the kind's type and fields is one of its kind")
    }
}

/// A reasoning item built here, in the field order async-openai writes.
#[derive(Serialize)]
struct ReasoningOut {
    #[serde(rename = "type")]
    kind: &'static str,
    id: String,
    summary: [(); 0],
    encrypted_content: String,
}

/// A compaction item built here, in the field order async-openai writes.
#[derive(Serialize)]
struct CompactionOut {
    #[serde(rename = "type")]
    kind: &'static str,
    id: String,
    encrypted_content: String,
}

impl OpaqueKind {
    /// The string fields a block of this kind must have.
    fn required_strings(self) -> &'static [&'static str] {
        match self {
            OpaqueKind::AnthropicThinking => &["thinking", "signature"],
            OpaqueKind::AnthropicRedactedThinking => &["data"],
            OpaqueKind::OpenAiCompaction => &["encrypted_content"],
            OpaqueKind::OpenAiReasoning | OpaqueKind::AnthropicCompaction => &[],
        }
    }
}

/// The fields of a block that are checked. Deriving `Deserialize` refuses a repeated one of
/// them (`duplicate field`), so a block cannot say two things about its own type or signature.
#[derive(Deserialize)]
struct Head {
    #[serde(rename = "type")]
    kind: Option<Value>,
    thinking: Option<Value>,
    signature: Option<Value>,
    data: Option<Value>,
    // `Some(Null)` for `"content": null` (present), `None` when the field is missing.
    #[serde(default, deserialize_with = "present")]
    content: Option<Value>,
    encrypted_content: Option<Value>,
}

/// A field that is present, `null` included (serde's `Option` reads `null` as missing).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl Head {
    fn field(&self, name: &str) -> Option<&Value> {
        match name {
            "thinking" => self.thinking.as_ref(),
            "signature" => self.signature.as_ref(),
            "data" => self.data.as_ref(),
            "content" => self.content.as_ref(),
            "encrypted_content" => self.encrypted_content.as_ref(),
            _ => None,
        }
    }
}

/// An [`OpaquePart`] as read, before its block is checked against its kind.
#[derive(Deserialize)]
struct UncheckedPart {
    kind: OpaqueKind,
    block: Box<RawValue>,
}

impl TryFrom<UncheckedPart> for OpaquePart {
    type Error = OpaquePartError;

    fn try_from(read: UncheckedPart) -> Result<Self, OpaquePartError> {
        OpaquePart::from_block(read.kind, String::from(Box::<str>::from(read.block)))
    }
}

/// The documented fields of a Responses `reasoning` item and their types; any other field is
/// refused, so no reasoning part holds what the Responses adapter could not send unchanged.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // read only to check the shape
struct ReasoningShape {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    summary: Vec<TypedText<SummaryText>>,
    content: Option<Vec<TypedText<ReasoningText>>>,
    encrypted_content: Option<String>,
    status: Option<ItemStatus>,
}

/// A `{"type": K, "text": ..}` part: `summary_text` in `summary`, `reasoning_text` in
/// `content` (each list takes only its own).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // read only to check the shape
struct TypedText<K> {
    #[serde(rename = "type")]
    kind: K,
    text: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum SummaryText {
    SummaryText,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum ReasoningText {
    ReasoningText,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum ItemStatus {
    InProgress,
    Completed,
    Incomplete,
}

/// The documented fields of a Responses input `compaction` item (`CompactionSummaryItemParam`
/// in OpenAI's API reference: `type`, an optional `id`, `encrypted_content`); any other field
/// is refused, as for reasoning.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // read only to check the shape
struct CompactionItemShape {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    encrypted_content: String,
}

/// Whether `block` has a documented item shape `T`: `Err` names what does not (an unknown
/// field, a missing one, a value of the wrong type).
fn check_shape<T: serde::de::DeserializeOwned>(block: &str) -> Result<(), String> {
    serde_json::from_str::<T>(block)
        .map(drop)
        .map_err(|e| e.to_string())
}

impl<'de> Deserialize<'de> for OpaquePart {
    /// Reads the kind and the block, then checks the block against the kind
    /// ([`OpaquePart::from_block`]): an edited checkpoint cannot smuggle in a block of another
    /// kind.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = UncheckedPart::deserialize(deserializer)?;
        OpaquePart::try_from(read).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_kept_byte_for_byte_and_checked_against_their_kind() {
        let block = r#"{"signature":"c2ln","type":"thinking","thinking":"x\u00e9","extra":[1]}"#;
        let part = OpaquePart::from_block(OpaqueKind::AnthropicThinking, block).unwrap();
        assert_eq!(part.block(), block);
        let json = serde_json::to_string(&part).unwrap();
        let back: OpaquePart = serde_json::from_str(&json).unwrap();
        assert_eq!(back.block(), block);
        assert_eq!(back, part);

        use OpaqueKind::*;
        let refused = [
            (AnthropicThinking, "[1]"),
            (AnthropicThinking, "{"),
            (AnthropicThinking, r#"{"type":"thinking","thinking":"a"}"#),
            (
                AnthropicThinking,
                r#"{"type":"thinking","thinking":"a","signature":7}"#,
            ),
            (
                AnthropicThinking,
                r#"{"type":"redacted_thinking","data":"d"}"#,
            ),
            (
                AnthropicThinking,
                r#"{"type":"thinking","thinking":"a","signature":"s","signature":"t"}"#,
            ),
            (AnthropicRedactedThinking, r#"{"type":"redacted_thinking"}"#),
            (
                OpenAiReasoning,
                r#"{"type":"thinking","thinking":"a","signature":"s"}"#,
            ),
            (OpenAiReasoning, r#"{"id":"rs_1"}"#),
            // A reasoning item with a field the Responses API does not document, without its
            // required `summary`, or with a summary part of another type.
            (
                OpenAiReasoning,
                r#"{"type":"reasoning","summary":[],"signature":"s"}"#,
            ),
            (OpenAiReasoning, r#"{"type":"reasoning","id":"rs_1"}"#),
            (
                OpenAiReasoning,
                r#"{"type":"reasoning","summary":[{"type":"text","text":"a"}]}"#,
            ),
            (
                OpenAiReasoning,
                r#"{"type":"reasoning","summary":[],"status":"done"}"#,
            ),
            // Each list takes only its own part type.
            (
                OpenAiReasoning,
                r#"{"type":"reasoning","summary":[{"type":"reasoning_text","text":"a"}]}"#,
            ),
            (
                OpenAiReasoning,
                r#"{"type":"reasoning","summary":[],"content":[{"type":"summary_text","text":"a"}]}"#,
            ),
        ];
        for (kind, block) in refused {
            assert!(OpaquePart::from_block(kind, block).is_err(), "{block}");
        }
    }

    #[test]
    fn an_edited_kind_is_refused_on_load() {
        let part = OpaquePart::anthropic_redacted_thinking("ZW5j");
        let json = serde_json::to_string(&part).unwrap();
        let edited = json.replace("anthropic_redacted_thinking", "anthropic_thinking");
        assert!(serde_json::from_str::<OpaquePart>(&edited).is_err());
        let reasoning = OpaquePart::openai_reasoning("rs_1", "gAAAA");
        assert_eq!(reasoning.kind(), OpaqueKind::OpenAiReasoning);
        assert_eq!(
            reasoning.block(),
            r#"{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA"}"#
        );
        let full = r#"{"type":"reasoning","id":null,"summary":[{"type":"summary_text","text":"s"}],"content":[{"type":"reasoning_text","text":"t"}],"encrypted_content":"e","status":"completed"}"#;
        assert!(OpaquePart::from_block(OpaqueKind::OpenAiReasoning, full).is_ok());
    }
}
