//! OpenAI's server-side compaction on the Responses wire (issue 31.5, feature
//! `openai-responses`): a response's `compaction` item, in the shape OpenAI documents (`type`,
//! `id`, `encrypted_content`, before the reply), is an opaque part of its assistant turn, sent
//! back first in its turn with every field unchanged, within the item rules; a hostile or edited
//! item is a typed error, never dropped. (The planner's side, never summarized and never
//! separated from its turn, is in tests/api/message_model.rs.)

use compaction::openai::async_openai::types::responses::{InputItem, OutputItem};
use compaction::openai::{
    check_responses_input, from_responses_input, from_responses_output, to_responses_input,
    ResponsesError,
};
use compaction::transcript::{OpaqueKind, OpaquePart, OpaquePartError};
use compaction::{Message, ToolCall, Transcript};
use serde_json::{json, Value};

const OUTPUT: &str = include_str!("../fixtures/openai/responses_compaction_output.json");

fn output(json: Value) -> Vec<OutputItem> {
    serde_json::from_value(json).expect("output items")
}

#[test]
fn a_recorded_compaction_item_is_replayed_unchanged_first_in_its_turn() {
    let response: Value = serde_json::from_str(OUTPUT).unwrap();
    let recorded = response["output"][0].clone();
    let turn = from_responses_output(&output(response["output"].clone())).unwrap();
    assert_eq!(
        turn.len(),
        1,
        "the compaction item and the reply are one turn"
    );
    let message = &turn[0];
    assert_eq!(message.opaque.len(), 1);
    assert_eq!(message.opaque[0].kind(), OpaqueKind::OpenAiCompaction);
    let block: Value = serde_json::from_str(message.opaque[0].block()).unwrap();
    assert_eq!(block, recorded, "every field as received");
    assert_eq!(
        message.content,
        "Migration 0042 is applied; deploying to staging next."
    );
    // Built from its fields, the part is the one read from the wire, byte for byte.
    assert_eq!(
        message.opaque[0],
        OpaquePart::openai_compaction(
            recorded["id"].as_str().unwrap(),
            recorded["encrypted_content"].as_str().unwrap()
        )
    );

    // A checkpoint round trip, then the next request: the item first in its turn, unchanged,
    // and the input reads back into the same messages.
    let stored: Message = serde_json::from_str(&serde_json::to_string(message).unwrap()).unwrap();
    let chat = vec![
        Message::user("Migrate the orders service."),
        stored,
        Message::user("Go on."),
    ];
    Transcript::from_messages(chat.clone()).expect("a valid transcript");
    let input = to_responses_input(&chat).unwrap();
    check_responses_input(&input).unwrap();
    let sent = serde_json::to_value(&input).unwrap();
    assert_eq!(sent[1], recorded);
    assert_eq!(sent[2]["role"], "assistant");
    assert_eq!(from_responses_input(&input).unwrap(), chat);
}

#[test]
fn compaction_then_reasoning_then_a_call_is_one_turn_in_order() {
    let items = output(json!([
        {"type": "compaction", "id": "cmp_2", "encrypted_content": "gAAAA-compacted"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA-reasoning"},
        {"type": "function_call", "call_id": "call_9", "name": "deploy", "arguments": "{\"target\": \"staging\"}", "status": "completed"}
    ]));
    let turn = from_responses_output(&items).unwrap();
    assert_eq!(turn.len(), 1);
    let kinds: Vec<OpaqueKind> = turn[0].opaque.iter().map(|p| p.kind()).collect();
    assert_eq!(
        kinds,
        [OpaqueKind::OpenAiCompaction, OpaqueKind::OpenAiReasoning]
    );
    let mut chat = vec![Message::user("deploy")];
    chat.extend(turn);
    chat.push(Message::tool_result("call_9", "ok"));
    let input = to_responses_input(&chat).unwrap();
    check_responses_input(&input).unwrap();
    let types: Vec<String> = serde_json::to_value(&input).unwrap().as_array().unwrap()[1..]
        .iter()
        .map(|item| item["type"].as_str().unwrap_or("message").to_owned())
        .collect();
    assert_eq!(
        types,
        [
            "compaction",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    // A call left unanswered before a compaction item still breaks the rules.
    let broken: Vec<InputItem> = serde_json::from_value(json!([
        {"role": "user", "content": "x"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "compaction", "id": "cmp_3", "encrypted_content": "gAAAA"}
    ]))
    .unwrap();
    assert!(check_responses_input(&broken).is_err());
}

#[test]
fn an_edited_or_hostile_compaction_item_is_a_typed_error() {
    let kind = OpaqueKind::OpenAiCompaction;
    // A field the adapter could not send unchanged, a missing or non-text ciphertext.
    for block in [
        r#"{"type":"compaction","id":"cmp_1","encrypted_content":"gAAAA","extra":1}"#,
        r#"{"type":"compaction","id":7,"encrypted_content":"gAAAA"}"#,
    ] {
        assert!(
            matches!(
                OpaquePart::from_block(kind, block),
                Err(OpaquePartError::Shape { .. })
            ),
            "{block}"
        );
    }
    for block in [
        r#"{"type":"compaction","id":"cmp_1"}"#,
        r#"{"type":"compaction","encrypted_content":null}"#,
    ] {
        assert!(
            matches!(
                OpaquePart::from_block(kind, block),
                Err(OpaquePartError::MissingField { .. })
            ),
            "{block}"
        );
    }
    assert!(matches!(
        OpaquePart::from_block(kind, r#"{"type":"reasoning","summary":[]}"#),
        Err(OpaquePartError::WrongType { .. })
    ));
    // A checkpoint edited to call a reasoning item a compaction item is refused on load.
    let edited = json!({"kind": "open_ai_compaction", "block": {"type": "reasoning", "summary": [], "encrypted_content": "x"}});
    assert!(serde_json::from_value::<OpaquePart>(edited).is_err());
    // Anthropic's compaction block is another provider's: never sent to OpenAI.
    let foreign = Message::assistant_with_tools("", vec![ToolCall::new("c1", "f", json!({}))])
        .with_opaque([OpaquePart::anthropic_compaction(Some("summary".into()))]);
    assert_eq!(
        to_responses_input(&[Message::user("x"), foreign]),
        Err(ResponsesError::ForeignOpaque {
            index: 1,
            kind: "compaction"
        })
    );
}
