//! Building provider-opaque parts from their fields: an Anthropic thinking or redacted thinking
//! block, an OpenAI Responses reasoning item (adapters take the provider's block as it arrived,
//! `OpaquePart::from_block`).

use crate::transcript::message::{OpaqueKind, OpaquePart};
use serde::Serialize;
use serde_json::Value;

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
