//! Unit tests of `Transcript::validate` (one per `TranscriptError`) and of deserialization.

use crate::transcript::conversation::*;
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
        Message::developer("note"),
        Message::tool_result("a", "A"),
        Message::assistant("done"),
        Message::user("more"),
        Message::assistant_with_tools("", vec![call("c")]),
    ];
    assert_eq!(validate_messages(&messages), Ok(()));
    assert_eq!(validate_messages(&[]), Ok(()));
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
