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

mod lineage {
    use crate::transcript::conversation::{Message, ToolCall, Transcript, ROOT};
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
