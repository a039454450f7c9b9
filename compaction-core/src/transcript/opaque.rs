//! Building provider-opaque parts from their fields: an Anthropic thinking or redacted thinking
//! block, an OpenAI Responses reasoning item (adapters take the provider's block as it arrived,
//! `OpaquePart::from_block`).

use crate::transcript::message::{OpaqueKind, OpaquePart};
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
    /// `summary`, which the API requires on input).
    pub fn openai_reasoning(id: impl Into<String>, encrypted_content: impl Into<String>) -> Self {
        let block = serde_json::json!({
            "type": "reasoning",
            "id": id.into(),
            "summary": [],
            "encrypted_content": encrypted_content.into(),
        });
        Self::built(OpaqueKind::OpenAiReasoning, &block)
    }

    fn built(kind: OpaqueKind, block: &Value) -> Self {
        OpaquePart::from_block(kind, block.to_string())
            .expect("a block built with the kind's type and fields is one of its kind")
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
        assert!(reasoning.block().contains(r#""encrypted_content":"gAAAA""#));
    }
}
