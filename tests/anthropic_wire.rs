//! Anthropic Messages API at the wire level (feature `anthropic-types`): recorded request and
//! response JSON read into our types and our messages and back byte-for-byte where it matters
//! (thinking blocks with signatures, redacted thinking, `tool_use` input); ours -> wire -> ours
//! is the identity on what the format carries and a typed error on what it cannot; every
//! request built from a compacted transcript passes the documented conversation rules.

use compaction::anthropic::{
    check_anthropic, from_anthropic, from_anthropic_response, to_anthropic, AnthropicError,
    AnthropicMessage, AnthropicRequest, AnthropicResponse, AnthropicRole, AnthropicRuleError,
    ContentBlock,
};
use compaction::transcript::{OpaquePart, ToolArguments, MARKER_PREFIX};
use compaction::{Message, Role, ToolCall, Transcript};
use compaction_fixtures::compacted_chat::compact_share;
use proptest::prelude::*;
use serde_json::{json, Value};

const REQUEST: &str = include_str!("../fixtures/anthropic/request.json");
const RESPONSE: &str = include_str!("../fixtures/anthropic/response.json");

/// The exact text of the first JSON object in `json` that contains `needle`, as it appears.
fn block_containing<'a>(json: &'a str, needle: &str) -> &'a str {
    let at = json.find(needle).expect("the needle");
    let start = json[..at].rfind('{').expect("an opening brace");
    let end = at + json[at..].find('}').expect("a closing brace") + 1;
    &json[start..end]
}

#[test]
fn a_recorded_request_reads_into_our_messages_with_thinking_byte_for_byte() {
    let request: AnthropicRequest = serde_json::from_str(REQUEST).unwrap();
    assert_eq!(request.system.len(), 2);
    assert!(request.system[1].cache_control.is_some());
    check_anthropic(&request.messages).unwrap();
    let ours = from_anthropic(&request.system, &request.messages).unwrap();
    let roles: Vec<Role> = ours.iter().map(|m| m.role).collect();
    use Role::*;
    assert_eq!(roles, [System, System, User, Assistant, Tool, User]);
    let turn = &ours[3];
    assert_eq!(turn.opaque.len(), 2);
    assert_eq!(
        turn.opaque[0].block(),
        block_containing(REQUEST, r#""type": "thinking""#)
    );
    assert_eq!(
        turn.opaque[1].block(),
        block_containing(REQUEST, r#""type": "redacted_thinking""#)
    );
    assert_eq!(turn.content, "Let me read the test.");
    // The input as written: spacing and the 30-digit integer intact.
    assert_eq!(
        turn.tool_calls[0].arguments_text(),
        r#"{"path": "tests/math.rs", "max_bytes": 123456789012345678901234567890}"#
    );
    assert_eq!(
        ours[4].tool_call_id.as_deref(),
        Some("toolu_01A09q90qw90lq917835lq9")
    );
    Transcript::from_messages(ours.clone()).expect("a valid transcript");

    // Back to the wire: the same conversation, cache breakpoints aside (request metadata that
    // compaction places itself), thinking blocks the very bytes that came in.
    let back = to_anthropic(&ours).unwrap();
    let sent = serde_json::to_string(&back.messages).unwrap();
    for needle in [r#""type": "thinking""#, r#""type": "redacted_thinking""#] {
        assert!(sent.contains(block_containing(REQUEST, needle)), "{sent}");
    }
    assert!(sent.contains(r#""max_bytes": 123456789012345678901234567890"#));
    let mut expected: Value = serde_json::from_str(REQUEST).unwrap();
    expected["messages"][0]["content"] =
        json!([{"type": "text", "text": "Why does the test in tests/math.rs fail?"}]);
    expected["messages"][2]["content"][0]
        .as_object_mut()
        .unwrap()
        .remove("cache_control");
    let got: Value = serde_json::from_str(&sent).unwrap();
    assert_eq!(got, expected["messages"]);
}

#[test]
fn a_recorded_response_becomes_our_assistant_message_byte_for_byte() {
    let response: AnthropicResponse = serde_json::from_str(RESPONSE).unwrap();
    assert_eq!(response.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(response.usage.cache_read_input_tokens, Some(1850));
    let message = from_anthropic_response(&response).unwrap();
    assert_eq!(
        message.opaque[0].block(),
        block_containing(RESPONSE, r#""type": "thinking""#)
    );
    // A repeated key in the model's input is kept as written, never collapsed.
    let input = message.tool_calls[0].arguments_text();
    assert_eq!(input.matches(r#""find""#).count(), 2, "{input}");
    assert!(message.tool_calls[0].arguments.value().is_err());
    // Serialized and read back (a checkpoint), then sent: still the same bytes.
    let stored: Message = serde_json::from_str(&serde_json::to_string(&message).unwrap()).unwrap();
    assert_eq!(stored, message);
    let wire = serde_json::to_string(
        &to_anthropic(&[Message::user("go"), stored])
            .unwrap()
            .messages,
    )
    .unwrap();
    assert!(wire.contains(block_containing(RESPONSE, r#""type": "thinking""#)));
    assert!(wire.contains(input));
}

#[test]
fn what_the_wire_cannot_carry_is_a_typed_error() {
    let thinking = OpaquePart::anthropic_thinking("plan", "c2ln");
    let call = |args: Value| ToolCall::new("c1", "f", args);
    let cases: Vec<(Vec<Message>, AnthropicError)> = vec![
        (
            vec![Message::user("x"), Message::system("late")],
            AnthropicError::SystemInConversation {
                index: 1,
                role: "system",
            },
        ),
        (
            vec![Message::user("x").with_name("ann")],
            AnthropicError::Named { index: 0 },
        ),
        (
            vec![
                Message::user("x"),
                Message::assistant("a").with_opaque([OpaquePart::openai_reasoning("rs_1", "gAAA")]),
            ],
            AnthropicError::ForeignOpaque {
                index: 1,
                kind: "reasoning",
            },
        ),
        (
            vec![
                Message::user("x"),
                Message::assistant_with_tools("", vec![call(json!([1, 2]))]),
            ],
            AnthropicError::ArgumentsNotObject {
                index: 1,
                call_id: "c1".into(),
            },
        ),
        (
            vec![
                Message::user("x"),
                Message::assistant("a").with_opaque([thinking.clone()]),
                Message::assistant("b").with_opaque([thinking.clone()]),
            ],
            AnthropicError::SplitThinking { index: 2 },
        ),
    ];
    for (messages, expected) in cases {
        assert_eq!(to_anthropic(&messages), Err(expected));
    }
    // And the other way: blocks our messages cannot hold, in the order they came.
    let wire: Vec<(Value, &str)> = vec![
        (
            json!([{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]),
            "image",
        ),
        (
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "boom", "is_error": true}]}]),
            "is_error",
        ),
        (
            json!([{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "thinking", "thinking": "t", "signature": "s"}]}]),
            "thinking after",
        ),
        (
            json!([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}, {"type": "text", "text": "a"}]}]),
            "text after tool_use",
        ),
        (
            json!([{"role": "assistant", "content": [{"type": "text", "text": "a", "citations": [{"type": "char_location"}]}]}]),
            "`text` block",
        ),
        (
            json!([{"role": "assistant", "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}]}]),
            "server_tool_use",
        ),
    ];
    for (json, what) in wire {
        let messages: Vec<AnthropicMessage> = serde_json::from_value(json).unwrap();
        match from_anthropic(&[], &messages) {
            Err(AnthropicError::Unsupported {
                index: 0,
                what: got,
            }) => {
                assert!(got.contains(what), "{got} / {what}")
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    // A thinking block edited into another kind, or without its signature, does not load.
    for bad in [
        json!({"type": "thinking", "thinking": "t"}),
        json!({"type": "redacted_thinking", "thinking": "t", "signature": "s"}),
    ] {
        assert!(serde_json::from_value::<ContentBlock>(bad).is_err());
    }
}

#[test]
fn consecutive_turns_merge_and_thinking_stays_first() {
    let thinking = OpaquePart::anthropic_thinking("plan", "c2ln");
    let fold = format!("{MARKER_PREFIX}folded ...");
    let messages = vec![
        Message::system("s"),
        Message::developer("d"),
        Message::user("a"),
        Message::user("b"),
        Message::assistant(fold.clone()),
        Message::assistant_with_tools("", vec![ToolCall::new("c1", "f", json!({}))])
            .with_opaque([thinking.clone()]),
        Message::tool_result("c1", "r"),
        Message::user("next"),
    ];
    let conversation = to_anthropic(&messages).unwrap();
    assert_eq!(conversation.system.len(), 2);
    let roles: Vec<AnthropicRole> = conversation.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            AnthropicRole::User,
            AnthropicRole::Assistant,
            AnthropicRole::User
        ]
    );
    let kinds: Vec<String> = conversation.messages[1]
        .content
        .iter()
        .map(|b| b.kind())
        .collect();
    assert_eq!(kinds, ["thinking", "text", "tool_use"]);
    let kinds: Vec<String> = conversation.messages[2]
        .content
        .iter()
        .map(|b| b.kind())
        .collect();
    assert_eq!(kinds, ["tool_result", "text"]);
    check_anthropic(&conversation.messages).unwrap();
}

#[test]
fn the_rules_checker_refuses_each_broken_rule() {
    let parse = |v: Value| -> Vec<AnthropicMessage> { serde_json::from_value(v).unwrap() };
    let use_a = json!({"type": "tool_use", "id": "a", "name": "f", "input": {}});
    let result_a = json!({"type": "tool_result", "tool_use_id": "a", "content": "r"});
    let text = json!({"type": "text", "text": "t"});
    let think = json!({"type": "thinking", "thinking": "t", "signature": "s"});
    let cases = [
        (json!([]), AnthropicRuleError::Empty),
        (
            json!([{"role": "assistant", "content": "hi"}]),
            AnthropicRuleError::FirstNotUser,
        ),
        (
            json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
            AnthropicRuleError::SameRoleTwice { index: 1 },
        ),
        (
            json!([{"role": "user", "content": []}]),
            AnthropicRuleError::EmptyContent { index: 0 },
        ),
        (
            json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": [use_a]}]),
            AnthropicRuleError::UnansweredToolUse {
                index: 1,
                id: "a".into(),
            },
        ),
        (
            json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": [use_a]}, {"role": "user", "content": [text]}]),
            AnthropicRuleError::UnansweredToolUse {
                index: 1,
                id: "a".into(),
            },
        ),
        (
            json!([{"role": "user", "content": [result_a]}]),
            AnthropicRuleError::ResultWithoutToolUse {
                index: 0,
                id: "a".into(),
            },
        ),
        (
            json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": [use_a]}, {"role": "user", "content": [text, result_a]}]),
            AnthropicRuleError::ResultNotFirst { index: 2 },
        ),
        (
            json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": [text, think]}]),
            AnthropicRuleError::ThinkingNotFirst { index: 1 },
        ),
        (
            json!([{"role": "user", "content": [think]}]),
            AnthropicRuleError::ThinkingNotFirst { index: 0 },
        ),
        (
            json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": [use_a, use_a]}]),
            AnthropicRuleError::DuplicateToolUseId {
                index: 1,
                id: "a".into(),
            },
        ),
    ];
    for (messages, expected) in cases {
        assert_eq!(
            check_anthropic(&parse(messages.clone())),
            Err(expected),
            "{messages}"
        );
    }
}

// --- properties ---------------------------------------------------------------------------

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z ]{0,30}",
        1 => "[αβ日本🦀\"\\\n ]{1,20}",
        1 => Just(format!("{MARKER_PREFIX}spilled store://sha256:{}⟧", "ab".repeat(32))),
    ]
}

/// Object arguments, some as a model writes them (huge integers, repeated keys, spacing).
fn arguments() -> impl Strategy<Value = ToolArguments> {
    prop_oneof![
        2 => prop::collection::btree_map("[a-z]{1,5}", text(), 0..3)
            .prop_map(|m| ToolArguments::from(json!(m))),
        1 => ("[a-z]{1,4}", "[1-9][0-9]{19,40}", "[ \n]{0,2}").prop_map(|(k, n, ws)| {
            ToolArguments::from_text(format!(r#"{{"{k}":{n},{ws}"{k}" : "dup"}}"#)).unwrap()
        }),
    ]
}

fn opaque() -> impl Strategy<Value = Vec<OpaquePart>> {
    let part = prop_oneof![
        ("[a-z .]{0,40}", "[A-Za-z0-9+/=]{8,40}")
            .prop_map(|(t, s)| OpaquePart::anthropic_thinking(t, s)),
        "[A-Za-z0-9+/=]{8,40}".prop_map(OpaquePart::anthropic_redacted_thinking),
    ];
    prop::collection::vec(part, 0..3)
}

/// A transcript in the shape Anthropic carries one-to-one: system first, then user turns
/// (one or more user messages) each answered by one assistant message and its results.
fn carried() -> impl Strategy<Value = Vec<Message>> {
    let call = ("[a-z_]{1,8}", arguments(), text());
    let turn = (
        prop::collection::vec(text(), 1..3),
        text(),
        opaque(),
        prop::collection::vec(call, 0..3),
    );
    (
        prop::collection::vec(text(), 0..2),
        prop::collection::vec(turn, 1..6),
    )
        .prop_map(|(system, turns)| {
            let mut out: Vec<Message> = system.into_iter().map(Message::system).collect();
            let mut next = 0;
            for (users, reply, parts, calls) in turns {
                out.extend(users.into_iter().map(Message::user));
                let mut made = Vec::new();
                let mut results = Vec::new();
                for (tool, args, result) in calls {
                    next += 1;
                    let id = format!("toolu_{next}");
                    made.push(ToolCall::new(&id, tool, args));
                    results.push(Message::tool_result(id, result));
                }
                out.push(Message::assistant_with_tools(reply, made).with_opaque(parts));
                out.extend(results);
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn ours_to_anthropic_and_back_through_json_is_the_identity(messages in carried()) {
        let conversation = to_anthropic(&messages).unwrap();
        let request = AnthropicRequest {
            model: "claude".into(),
            max_tokens: 1024,
            system: conversation.system.clone(),
            messages: conversation.messages.clone(),
            tools: None,
            tool_choice: None,
            thinking: None,
            temperature: None,
        };
        let json = serde_json::to_string(&request).unwrap();
        let received: AnthropicRequest = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&received, &request);
        let back = from_anthropic(&received.system, &received.messages).unwrap();
        prop_assert_eq!(&back, &messages);
        // Every thinking block on the wire is one of ours, byte-for-byte.
        for part in messages.iter().flat_map(|m| &m.opaque) {
            prop_assert!(json.contains(part.block()));
        }
        if messages.iter().any(|m| m.role != Role::System) {
            prop_assert_eq!(check_anthropic(&received.messages), Ok(()));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_compacted_request_passes_the_anthropic_rules(
        messages in carried(),
        percent in 10usize..110,
        summarize in any::<bool>(),
    ) {
        let chat = Transcript::from_messages(messages.clone()).unwrap();
        if let Some(compacted) = compact_share(chat, percent, summarize) {
            let sent = compacted.messages();
            let conversation = to_anthropic(&sent).unwrap();
            prop_assert_eq!(check_anthropic(&conversation.messages), Ok(()));
            // Each assistant turn sent keeps its thinking blocks unchanged (or was folded whole).
            let wire = serde_json::to_string(&conversation.messages).unwrap();
            for message in sent.iter().filter(|m| !m.opaque.is_empty()) {
                // (its text may carry the verbatim escape: it imitates a marker)
                prop_assert!(messages
                    .iter()
                    .any(|m| m.opaque == message.opaque && m.tool_calls == message.tool_calls));
                for part in &message.opaque {
                    prop_assert!(wire.contains(part.block()));
                }
            }
        }
    }
}
