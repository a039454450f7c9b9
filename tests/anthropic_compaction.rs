//! Anthropic's server-side compaction (issue 31.5, feature `anthropic-types`): a response's
//! `compaction` block, in the shape Anthropic documents (`{"type": "compaction", "content":
//! <the summary, or null when the provider's compaction failed>}`, first in the assistant's
//! content), is an opaque part of its assistant turn: kept byte-for-byte through a checkpoint,
//! sent back first in its turn, within the conversation rules; an edited or misplaced block is
//! a typed error, never dropped. (The planner's side, never summarized and never separated from
//! its turn, is in tests/api/message_model.rs.)

use compaction::anthropic::{
    check_anthropic, from_anthropic, from_anthropic_response, to_anthropic, AnthropicError,
    AnthropicResponse,
};
use compaction::transcript::{OpaqueKind, OpaquePart, OpaquePartError};
use compaction::{Message, Transcript};
use serde_json::{json, Value};

const RESPONSE: &str = include_str!("../fixtures/anthropic/compaction_response.json");

/// The exact text of the first JSON object in `json` that contains `needle`, as it appears.
fn block_containing<'a>(json: &'a str, needle: &str) -> &'a str {
    let at = json.find(needle).expect("the needle");
    let start = json[..at].rfind('{').expect("an opening brace");
    let end = at + json[at..].find('}').expect("a closing brace") + 1;
    &json[start..end]
}

#[test]
fn a_recorded_compaction_block_is_replayed_byte_for_byte_first_in_its_turn() {
    let recorded = block_containing(RESPONSE, r#""type": "compaction""#);
    let response: AnthropicResponse = serde_json::from_str(RESPONSE).unwrap();
    let message = from_anthropic_response(&response).unwrap();
    assert_eq!(message.opaque.len(), 1);
    assert_eq!(message.opaque[0].kind(), OpaqueKind::AnthropicCompaction);
    assert_eq!(message.opaque[0].block(), recorded);
    assert_eq!(message.content, "Next I will deploy to staging.");
    assert_eq!(message.tool_calls[0].name, "deploy");

    // Stored (a checkpoint) and read back, then sent on the next request: the same bytes.
    let stored: Message = serde_json::from_str(&serde_json::to_string(&message).unwrap()).unwrap();
    assert_eq!(stored, message);
    let chat = vec![
        Message::user("Migrate the orders service."),
        stored,
        Message::tool_result("toolu_01Deploy", "deployed to staging"),
    ];
    Transcript::from_messages(chat.clone()).expect("a valid transcript");
    let request = to_anthropic(&chat).unwrap();
    check_anthropic(&request.messages).unwrap();
    let sent = serde_json::to_string(&request.messages).unwrap();
    assert!(sent.contains(recorded), "{sent}");
    let sent: Value = serde_json::from_str(&sent).unwrap();
    assert_eq!(sent[1]["role"], "assistant");
    assert_eq!(
        sent[1]["content"][0],
        serde_json::from_str::<Value>(recorded).unwrap(),
        "first in its turn"
    );
    // And read back from the wire: the same messages.
    assert_eq!(
        from_anthropic(&request.system, &request.messages).unwrap(),
        chat
    );
}

#[test]
fn a_failed_compaction_with_null_content_is_kept_too() {
    let block = r#"{"type": "compaction", "content": null}"#;
    let part = OpaquePart::from_block(OpaqueKind::AnthropicCompaction, block).unwrap();
    assert_eq!(part.block(), block);
    let built = OpaquePart::anthropic_compaction(None);
    assert_eq!(
        serde_json::from_str::<Value>(built.block()).unwrap(),
        json!({"type": "compaction", "content": null})
    );
    let summary = OpaquePart::anthropic_compaction(Some("kept: key rk_42".into()));
    assert_eq!(summary.kind().wire_type(), "compaction");
    assert!(summary.kind().is_anthropic());
}

#[test]
fn an_edited_or_hostile_compaction_block_is_a_typed_error() {
    let kind = OpaqueKind::AnthropicCompaction;
    for (block, why) in [
        (r#"{"type": "compaction"}"#, "content missing"),
        (
            r#"{"type": "compaction", "content": 42}"#,
            "content not text",
        ),
        (
            r#"{"type": "compaction", "content": ["a"]}"#,
            "content not text",
        ),
    ] {
        assert!(
            matches!(
                OpaquePart::from_block(kind, block),
                Err(OpaquePartError::Shape { .. })
            ),
            "{why}: {block}"
        );
    }
    // Two `content`s (which one would the provider read?) and a block of another type.
    assert!(
        OpaquePart::from_block(kind, r#"{"type":"compaction","content":"a","content":"b"}"#)
            .is_err()
    );
    assert!(matches!(
        OpaquePart::from_block(kind, r#"{"type": "thinking", "content": "x"}"#),
        Err(OpaquePartError::WrongType { .. })
    ));
    // A checkpoint edited to call a thinking block a compaction is refused on load.
    let edited = json!({"kind": "anthropic_compaction", "block": {"type": "thinking", "thinking": "t", "signature": "s"}});
    assert!(serde_json::from_value::<OpaquePart>(edited).is_err());

    // A compaction block after the reply's text is not the documented order: refused by name.
    let misplaced: AnthropicResponse = serde_json::from_value(json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [
            {"type": "text", "text": "Done."},
            {"type": "compaction", "content": "summary"}
        ],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1}
    }))
    .unwrap();
    let refused = from_anthropic_response(&misplaced).unwrap_err();
    assert!(
        matches!(&refused, AnthropicError::Unsupported { what, .. } if what.contains("compaction")),
        "{refused:?}"
    );

    // OpenAI's compaction item is another provider's ciphertext: never sent to Anthropic.
    let foreign =
        Message::assistant("ok").with_opaque([OpaquePart::openai_compaction("cmp_1", "gAAAA")]);
    assert!(matches!(
        to_anthropic(&[Message::user("x"), foreign]),
        Err(AnthropicError::ForeignOpaque { .. })
    ));
}
