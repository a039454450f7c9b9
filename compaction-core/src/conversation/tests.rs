//! Unit tests of `Transcript::validate` (one per `TranscriptError`) and of deserialization.

use crate::conversation::message::{OpaquePart, ToolArguments};
use crate::conversation::transcript::*;
use serde_json::json;

fn call(id: &str) -> ToolCall {
    ToolCall::new(id, "read_file", json!({"path": "a.rs"}))
}

#[test]
fn a_valid_conversation_with_parallel_calls_and_a_trailing_call_passes() {
    let messages = vec![
        Message::system("be careful"),
        Message::user("fix it"),
        Message::assistant_with_tools("", vec![call("a"), call("b")]),
        Message::tool_result("b", "B"),
        Message::tool_result("a", "A"),
        Message::developer("note"),
        Message::assistant("done"),
        Message::user("more"),
        Message::assistant_with_tools("", vec![call("c")]),
    ];
    assert_eq!(validate_messages(&messages), Ok(()));
    assert_eq!(validate_messages(&[]), Ok(()));
}

#[test]
fn nothing_comes_between_a_call_and_its_results() {
    // Issue 21.6: OpenAI rejects a system or developer message there; a user message there
    // means the call went unanswered.
    for between in [
        Message::system("late rule"),
        Message::developer("late note"),
        Message::user("are you done?"),
    ] {
        let role = between.role;
        for answered_first in [false, true] {
            let mut messages = vec![
                Message::user("x"),
                Message::assistant_with_tools("", vec![call("a"), call("b")]),
            ];
            if answered_first {
                messages.push(Message::tool_result("b", "B"));
            }
            let index = messages.len();
            messages.push(between.clone());
            messages.push(Message::tool_result("a", "A"));
            messages.push(Message::tool_result("b", "B"));
            let expected = if role == Role::User {
                TranscriptError::CallWithoutResult {
                    index: 1,
                    call_id: "a".into(),
                    next: index,
                }
            } else {
                TranscriptError::BetweenCallAndResult {
                    index,
                    role: role.as_str(),
                    call_id: "a".into(),
                    call_index: 1,
                }
            };
            assert_eq!(validate_messages(&messages), Err(expected), "{role:?}");
        }
    }
    // Once every result is in, a system message is fine; so is one before the call.
    let fine = vec![
        Message::system("s"),
        Message::user("x"),
        Message::assistant_with_tools("", vec![call("a")]),
        Message::tool_result("a", "A"),
        Message::system("after"),
    ];
    assert_eq!(validate_messages(&fine), Ok(()));
}

#[test]
fn only_assistant_messages_carry_opaque_parts() {
    let thinking = OpaquePart::anthropic_thinking("plan", "c2ln");
    let ok = vec![
        Message::user("x"),
        Message::assistant_with_tools("", vec![call("a")]).with_opaque([thinking.clone()]),
        Message::tool_result("a", "A"),
    ];
    assert_eq!(validate_messages(&ok), Ok(()));
    for (index, message) in [
        (0, Message::system("s")),
        (0, Message::developer("d")),
        (0, Message::user("u")),
    ] {
        let message = message.with_opaque([thinking.clone()]);
        let role = message.role.as_str();
        assert_eq!(
            validate_messages(&[message]),
            Err(TranscriptError::OpaqueOutsideAssistant { index, role })
        );
    }
    let mut result = Message::tool_result("a", "A");
    result.opaque.push(thinking);
    let messages = vec![Message::assistant_with_tools("", vec![call("a")]), result];
    assert_eq!(
        validate_messages(&messages),
        Err(TranscriptError::OpaqueOutsideAssistant {
            index: 1,
            role: "tool"
        })
    );
}

#[test]
fn a_result_whose_call_is_not_earlier_is_refused() {
    let messages = vec![
        Message::user("x"),
        Message::tool_result("a", "A"),
        Message::assistant_with_tools("", vec![call("a")]),
    ];
    assert_eq!(
        validate_messages(&messages),
        Err(TranscriptError::ResultWithoutCall {
            index: 1,
            call_id: "a".into()
        })
    );
}

#[test]
fn a_call_without_result_before_the_next_turn_is_refused() {
    let messages = vec![
        Message::user("x"),
        Message::assistant_with_tools("", vec![call("a"), call("b")]),
        Message::tool_result("a", "A"),
        Message::user("y"),
    ];
    assert_eq!(
        validate_messages(&messages),
        Err(TranscriptError::CallWithoutResult {
            index: 1,
            call_id: "b".into(),
            next: 3
        })
    );
    let before_assistant = vec![
        Message::assistant_with_tools("", vec![call("a")]),
        Message::assistant("y"),
    ];
    assert!(matches!(
        validate_messages(&before_assistant),
        Err(TranscriptError::CallWithoutResult {
            index: 0,
            next: 1,
            ..
        })
    ));
}

#[test]
fn duplicate_call_ids_are_refused_within_and_across_messages() {
    let within = vec![Message::assistant_with_tools(
        "",
        vec![call("a"), call("a")],
    )];
    assert_eq!(
        validate_messages(&within),
        Err(TranscriptError::DuplicateCallId {
            index: 0,
            call_id: "a".into()
        })
    );
    let across = vec![
        Message::assistant_with_tools("", vec![call("a")]),
        Message::tool_result("a", "A"),
        Message::assistant_with_tools("", vec![call("a")]),
    ];
    assert!(matches!(
        validate_messages(&across),
        Err(TranscriptError::DuplicateCallId { index: 2, .. })
    ));
}

#[test]
fn a_second_result_for_one_call_is_refused() {
    let messages = vec![
        Message::assistant_with_tools("", vec![call("a")]),
        Message::tool_result("a", "A"),
        Message::tool_result("a", "again"),
    ];
    assert!(matches!(
        validate_messages(&messages),
        Err(TranscriptError::DuplicateResult { index: 2, .. })
    ));
}

#[test]
fn a_tool_message_without_call_id_is_refused() {
    let mut orphan = Message::tool_result("a", "A");
    orphan.tool_call_id = None;
    let messages = vec![Message::user("x"), orphan];
    assert_eq!(
        validate_messages(&messages),
        Err(TranscriptError::ToolMessageWithoutCallId { index: 1 })
    );
}

#[test]
fn tool_calls_on_a_user_message_are_refused() {
    let mut user = Message::user("x");
    user.tool_calls.push(call("a"));
    assert_eq!(
        validate_messages(&[user]),
        Err(TranscriptError::ToolCallsOutsideAssistant {
            index: 0,
            role: "user"
        })
    );
}

#[test]
fn a_call_id_outside_a_tool_message_is_refused() {
    for mut message in [
        Message::user("x"),
        Message::assistant("y"),
        Message::system("z"),
    ] {
        let role = message.role.as_str();
        message.tool_call_id = Some("call_1".into());
        assert_eq!(
            validate_messages(&[Message::user("first"), message]),
            Err(TranscriptError::CallIdOutsideTool { index: 1, role })
        );
    }
}

#[test]
fn a_name_on_a_tool_message_is_refused() {
    let messages = vec![
        Message::assistant_with_tools("", vec![call("a")]),
        Message::tool_result("a", "A").with_name("read_file"),
    ];
    assert_eq!(
        validate_messages(&messages),
        Err(TranscriptError::NameOnToolMessage { index: 1 })
    );
}

#[test]
fn deserializing_validates_and_names_the_message() {
    let ok: Transcript = serde_json::from_str(r#"[{"role":"user","content":"hi"}]"#).unwrap();
    assert_eq!(ok.messages(), &[Message::user("hi")]);
    assert_eq!(
        serde_json::to_string(&ok).unwrap(),
        r#"[{"role":"user","content":"hi"}]"#
    );
    let err = serde_json::from_str::<Transcript>(
        r#"[{"role":"user","content":"hi"},{"role":"tool","content":"x","tool_call_id":"a"}]"#,
    )
    .unwrap_err();
    assert!(err.to_string().contains("message 1"), "{err}");
}

/// Hostile argument texts: each must come back byte-for-byte through our serialization.
const EXACT_ARGUMENTS: [&str; 6] = [
    r#"{"order":123456789012345678901234567890}"#,
    r#"{"a":1,"a":2}"#,
    "{\n  \"path\" : \"a.rs\" ,\"n\":1.10e0\n}",
    " \t{\"padded\":true}\r\n",
    r#"[-0, 1E400, "\u00e9\ud83d\ude00"]"#,
    r#"{"⟦compaction:fold store://sha256:00⟧":"\u0000"}"#,
];

#[test]
fn tool_call_arguments_survive_serialization_byte_for_byte() {
    for text in EXACT_ARGUMENTS {
        let arguments = ToolArguments::from_text(text).unwrap();
        let call = ToolCall::new("c1", "charge", arguments).with_effect("charge-1");
        assert_eq!(call.arguments_text(), text);
        let thinking = OpaquePart::anthropic_thinking("think", "c2ln");
        let transcript = Transcript::from_messages(vec![
            Message::user("go"),
            Message::assistant_with_tools("", vec![call]).with_opaque([thinking]),
            Message::tool_result("c1", "ok"),
        ])
        .unwrap();
        let json = serde_json::to_string(&transcript).unwrap();
        let back: Transcript = serde_json::from_str(&json).unwrap();
        assert_eq!(back, transcript);
        assert_eq!(back.messages()[1].tool_calls[0].arguments_text(), text);
        // And again: the serialization is stable (checkpoint seals depend on it).
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
    }
}

#[test]
fn arguments_serialize_embedded_as_before_and_old_checkpoints_read_the_same() {
    let call = ToolCall::new("c1", "read_file", json!({"path": "a.rs"}));
    let json = serde_json::to_string(&call).unwrap();
    assert_eq!(
        json,
        r#"{"id":"c1","name":"read_file","arguments":{"path":"a.rs"}}"#
    );
    let padded = ToolCall::new("c1", "f", ToolArguments::from_text(" {} ").unwrap());
    assert_eq!(
        serde_json::to_string(&padded).unwrap(),
        r#"{"id":"c1","name":"f","arguments":{},"arguments_text":" {} "}"#
    );
    // An `arguments_text` edited to disagree with `arguments` is refused, not preferred.
    for edited in [
        r#"{"id":"c1","name":"f","arguments":{},"arguments_text":" [] "}"#,
        r#"{"id":"c1","name":"f","arguments":{},"arguments_text":"{"}"#,
        r#"{"id":"c1","name":"f","arguments":{},"arguments_text":"x{}"}"#,
    ] {
        assert!(
            serde_json::from_str::<ToolCall>(edited).is_err(),
            "{edited}"
        );
    }
}

mod lineage {
    use crate::conversation::transcript::{Message, ToolCall, Transcript, ROOT};
    use serde_json::json;

    #[test]
    fn the_chain_names_the_messages_and_their_order_in_every_copy() {
        let a: Transcript = [Message::user("x"), Message::user("y")]
            .into_iter()
            .collect();
        let b: Transcript = [Message::user("y"), Message::user("x")]
            .into_iter()
            .collect();
        assert_ne!(a.link(2), b.link(2));
        assert_ne!(a.link(1), a.link(2));
        let c: Transcript = [Message::user("x")].into_iter().collect();
        assert_eq!(c.link(1), a.link(1));
        assert_eq!(a.link(0), Some(ROOT));
        assert_eq!(a.link(3), None);
        let loaded: Transcript = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(loaded.link(2), a.link(2));
        assert_eq!(a.clone().link(2), a.link(2));
    }

    #[test]
    fn validating_from_a_point_agrees_with_validating_everything() {
        let call = |id: &str| ToolCall::new(id, "t", json!({}));
        let mut chat = Transcript::new();
        chat.push(Message::user("go"));
        chat.push(Message::assistant_with_tools(
            "",
            vec![call("a"), call("b")],
        ));
        chat.push(Message::tool_result("a", "1"));
        let checked = chat.len();
        chat.push(Message::tool_result("b", "2"));
        assert_eq!(chat.validate_from(checked), Ok(()));
        // An id reused long after: found without a full pass, named exactly.
        let mut dup = chat.clone();
        dup.push(Message::assistant_with_tools("", vec![call("a")]));
        assert_eq!(dup.validate_from(checked), dup.validate());
        assert!(dup.validate().is_err());
        // A result for a call answered long ago.
        let mut twice = chat.clone();
        twice.push(Message::user("more"));
        twice.push(Message::tool_result("a", "again"));
        assert_eq!(twice.validate_from(chat.len()), twice.validate());
        assert!(twice.validate().is_err());
    }
}
