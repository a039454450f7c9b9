//! The async-openai message adapter (feature `openai-types`): conversions both ways round-trip,
//! also through the wire JSON; what our messages cannot carry is a typed error; the request of a
//! compacted transcript always validates (no orphaned call or result).

use compaction::openai::async_openai::types::chat::{
    ChatCompletionMessageCustomToolCall, ChatCompletionMessageToolCall,
    ChatCompletionMessageToolCalls, ChatCompletionRequestAssistantMessage,
    ChatCompletionRequestAssistantMessageContent, ChatCompletionRequestFunctionMessage,
    ChatCompletionRequestMessage, ChatCompletionRequestMessageContentPartImage,
    ChatCompletionRequestMessageContentPartText, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestSystemMessageContentPart,
    ChatCompletionRequestToolMessage, ChatCompletionRequestToolMessageContent,
    ChatCompletionRequestUserMessage, ChatCompletionRequestUserMessageContent,
    ChatCompletionRequestUserMessageContentPart, ChatCompletionResponseMessage, CustomTool,
    FunctionCall, ImageUrl, Role as OpenAiRole,
};
use compaction::openai::{
    from_openai_message, from_openai_messages, from_openai_response_message,
    resolve_pointer_chat_tool, to_openai_message, tool_call_from_openai, OpenAiMessageError,
};
use compaction::pointer_tool::resolve_pointer_tool;
use compaction::transcript::{OpaquePart, ToolArguments, MARKER_PREFIX, VERBATIM_ESCAPE};
use compaction::{
    Compactable, Compactor, Extractive, Message, Tokenizer, ToolCall, Transcript, TranscriptError,
};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Text with unicode, empties and imitations of our markers.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z ]{0,30}",
        1 => Just(String::new()),
        1 => "[αβ日本🦀\"\\\n ]{1,20}",
        1 => (50usize..1500).prop_map(|n| "log line\n".repeat(n / 9)),
        1 => Just(format!("{MARKER_PREFIX}spilled store://sha256:{}⟧", "ab".repeat(32))),
        1 => Just(format!("{VERBATIM_ESCAPE}{MARKER_PREFIX}tombstone")),
    ]
}

/// Tool-call arguments: any JSON value (floats included), or text a model wrote that a
/// parse-and-print round trip would change (integers beyond 64 bits, repeated keys, spacing):
/// all must come back byte-for-byte.
fn arguments() -> impl Strategy<Value = ToolArguments> {
    prop_oneof![
        3 => json_value().prop_map(ToolArguments::from),
        1 => hostile_arguments_text()
            .prop_map(|text| ToolArguments::from_text(text).expect("the strategy writes JSON")),
    ]
}

/// JSON text that is not what `serde_json` prints for its value.
fn hostile_arguments_text() -> impl Strategy<Value = String> {
    let ws = "[ \t\r\n]{0,2}";
    let big = "-?[1-9][0-9]{19,40}";
    (ws, "[a-z]{1,4}", big, ws, big, "[a-z]{0,3}", ws).prop_map(|(a, key, n, b, m, s, c)| {
        format!(r#"{a}{{"{key}":{n},{b}"{key}":"{s}", "x" : [{m}, 1.10, 1E400]}}{c}"#)
    })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,5}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn name() -> impl Strategy<Value = Option<String>> {
    prop_oneof![3 => Just(None), 1 => "[a-z_]{1,8}".prop_map(Some)]
}

#[derive(Debug, Clone)]
enum Turn {
    Pinned(bool, String, Option<String>),
    User(String, Option<String>),
    Assistant(String, Option<String>, Vec<(String, ToolArguments, String)>),
}

/// A valid transcript: every role, names where the wire allows them, 0-4 parallel calls.
fn transcript() -> impl Strategy<Value = Transcript> {
    let call = ("[a-z_]{1,10}", arguments(), text());
    let turn = prop_oneof![
        1 => (any::<bool>(), text(), name()).prop_map(|(d, t, n)| Turn::Pinned(d, t, n)),
        3 => (text(), name()).prop_map(|(t, n)| Turn::User(t, n)),
        4 => (text(), name(), prop::collection::vec(call, 0..=4))
            .prop_map(|(t, n, c)| Turn::Assistant(t, n, c)),
    ];
    prop::collection::vec(turn, 0..16).prop_map(|turns| {
        let mut chat = Transcript::new();
        let mut next = 0;
        for turn in turns {
            let named = |m: Message, n: Option<String>| match n {
                Some(n) => m.with_name(n),
                None => m,
            };
            match turn {
                Turn::Pinned(developer, t, n) => chat.push(named(
                    if developer {
                        Message::developer(t)
                    } else {
                        Message::system(t)
                    },
                    n,
                )),
                Turn::User(t, n) => chat.push(named(Message::user(t), n)),
                Turn::Assistant(t, n, calls) => {
                    let mut made = Vec::new();
                    let mut results = Vec::new();
                    for (tool, args, result) in calls {
                        next += 1;
                        let id = format!("call_{next}");
                        made.push(ToolCall::new(&id, tool, args));
                        results.push(Message::tool_result(id, result));
                    }
                    chat.push(named(Message::assistant_with_tools(t, made), n));
                    chat.extend(results);
                }
            }
        }
        chat
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn ours_to_openai_and_back_through_the_wire_is_the_identity(chat in transcript()) {
        let request = chat.to_openai_messages().expect("a valid transcript converts");
        prop_assert_eq!(request.len(), chat.len());
        // Back directly, and through the JSON a server receives.
        let back = Transcript::from_openai_messages(&request).expect("converts back");
        prop_assert_eq!(&back, &chat);
        let wire = serde_json::to_string(&request).unwrap();
        let received: Vec<ChatCompletionRequestMessage> = serde_json::from_str(&wire).unwrap();
        prop_assert_eq!(&received, &request);
        prop_assert_eq!(Transcript::from_openai_messages(&received).unwrap(), chat);
        // And async-openai's side comes back unchanged too.
        prop_assert_eq!(back.to_openai_messages().unwrap(), request);
    }
}

#[derive(Compactable, Serialize, Deserialize)]
struct Agent {
    #[protected]
    customer: String,
    #[transcript(keep_recent = 1)]
    chat: Transcript,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_request_of_a_compacted_transcript_always_validates(
        chat in transcript(),
        percent in 10usize..110,
        summarize in any::<bool>(),
    ) {
        let full = compaction::transcript::chat_tokens(chat.messages(), &Tokenizer::Heuristic);
        let budget = full * percent / 100 + 200;
        let builder = Compactor::builder().budget(budget).token_counter(Tokenizer::Heuristic);
        let builder = if summarize { builder.summarizer(Extractive) } else { builder };
        let compactor = builder.build().unwrap();
        let agent = Agent { customer: "cus_1".into(), chat };
        if let Ok(compacted) = compactor.compact_blocking(&agent) {
            let request = compacted.openai_messages();
            let messages = compacted.messages();
            prop_assert_eq!(request.len(), messages.len());
            // The converted request is a valid conversation with the same content.
            let back = Transcript::from_openai_messages(&request).expect("validates");
            prop_assert_eq!(back.messages(), &messages[..]);
            prop_assert!(matches!(request[0], ChatCompletionRequestMessage::System(_)));
        }
    }
}

fn text_part(text: &str) -> ChatCompletionRequestMessageContentPartText {
    ChatCompletionRequestMessageContentPartText {
        text: text.into(),
        prompt_cache_breakpoint: None,
    }
}

fn assistant(
    content: Option<&str>,
    calls: Vec<ChatCompletionMessageToolCalls>,
) -> ChatCompletionRequestAssistantMessage {
    ChatCompletionRequestAssistantMessage {
        content: content.map(|c| ChatCompletionRequestAssistantMessageContent::Text(c.into())),
        tool_calls: (!calls.is_empty()).then_some(calls),
        ..Default::default()
    }
}

fn function_call(id: &str, arguments: &str) -> ChatCompletionMessageToolCalls {
    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
        id: id.into(),
        function: FunctionCall {
            name: "read_file".into(),
            arguments: arguments.into(),
        },
    })
}

fn unsupported_what(result: Result<Message, OpenAiMessageError>) -> &'static str {
    match result {
        Err(OpenAiMessageError::Unsupported { what, .. }) => what,
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn what_our_messages_cannot_carry_is_refused_never_dropped() {
    let image = ChatCompletionRequestUserMessageContentPart::ImageUrl(
        ChatCompletionRequestMessageContentPartImage {
            image_url: ImageUrl {
                url: "https://example.com/a.png".into(),
                detail: None,
            },
            prompt_cache_breakpoint: None,
        },
    );
    let user = |parts| {
        ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Array(parts),
            name: None,
        })
    };
    let text = |t: &str| ChatCompletionRequestUserMessageContentPart::Text(text_part(t));
    assert_eq!(
        unsupported_what(from_openai_message(&user(vec![
            text("look"),
            image.clone()
        ]))),
        "an image part"
    );
    assert_eq!(
        unsupported_what(from_openai_message(&user(vec![text("a"), text("b")]))),
        "several content parts"
    );
    // One text part is plain text.
    assert_eq!(
        from_openai_message(&user(vec![text("look")])).unwrap(),
        Message::user("look")
    );
    let cached = ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
        content: ChatCompletionRequestSystemMessageContent::Array(vec![
            ChatCompletionRequestSystemMessageContentPart::Text(
                serde_json::from_value(
                    json!({"text": "rules", "prompt_cache_breakpoint": {"mode": "explicit"}}),
                )
                .unwrap(),
            ),
        ]),
        name: None,
    });
    assert_eq!(
        unsupported_what(from_openai_message(&cached)),
        "a prompt cache breakpoint"
    );
    let refusal = ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
        refusal: Some("I can't".into()),
        ..Default::default()
    });
    assert_eq!(unsupported_what(from_openai_message(&refusal)), "a refusal");
    let custom = ChatCompletionRequestMessage::Assistant(assistant(
        None,
        vec![ChatCompletionMessageToolCalls::Custom(
            ChatCompletionMessageCustomToolCall {
                id: "c1".into(),
                custom_tool: CustomTool {
                    name: "grep".into(),
                    input: "x".into(),
                },
            },
        )],
    ));
    assert_eq!(
        unsupported_what(from_openai_message(&custom)),
        "a custom tool call"
    );
    let function = ChatCompletionRequestMessage::Function(ChatCompletionRequestFunctionMessage {
        content: Some("old".into()),
        name: "f".into(),
    });
    assert!(matches!(
        from_openai_message(&function),
        Err(OpenAiMessageError::Unsupported {
            role: "function",
            ..
        })
    ));
    // The index names the message in a list.
    let list = vec![
        ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text("hi".into()),
            name: None,
        }),
        user(vec![image]),
    ];
    assert!(matches!(
        from_openai_messages(&list),
        Err(OpenAiMessageError::Unsupported {
            index: 1,
            role: "user",
            ..
        })
    ));
}

#[test]
fn arguments_that_are_not_json_are_a_typed_error_with_the_call() {
    for raw in ["{\"path\": ", "", "path=a.rs"] {
        let message = ChatCompletionRequestMessage::Assistant(assistant(
            None,
            vec![function_call("c1", "{}"), function_call("c2", raw)],
        ));
        match from_openai_message(&message) {
            Err(OpenAiMessageError::ArgumentsNotJson { call_id, index, .. }) => {
                assert_eq!((call_id.as_str(), index), ("c2", 0));
            }
            other => panic!("{raw:?}: {other:?}"),
        }
    }
    let text = r#"{"path": "a.rs", "n": 0.1}"#;
    let call = tool_call_from_openai(&function_call("c3", text)).unwrap();
    assert_eq!(
        call,
        ToolCall::new("c3", "read_file", ToolArguments::from_text(text).unwrap())
    );
    assert_eq!(
        call.arguments.value().unwrap(),
        json!({"path": "a.rs", "n": 0.1})
    );
}

/// Issue 21.7: what the model wrote comes back byte-for-byte through the adapter, the
/// transcript, a compaction, a checkpoint and the request, whatever a JSON parser would make of
/// it.
#[test]
fn arguments_come_back_byte_for_byte_through_compaction_and_the_request() {
    let texts = [
        r#"{"amount_cents": 123456789012345678901234567890}"#,
        r#"{"path":"a.rs","path":"/etc/prod"}"#,
        "{\n  \"n\": 1.10,\n  \"e\": 1E400\n}\n",
    ];
    for text in texts {
        let reply = ChatCompletionResponseMessage {
            tool_calls: Some(vec![function_call("call_1", text)]),
            ..response_message()
        };
        let message = from_openai_response_message(&reply).unwrap();
        assert_eq!(message.tool_calls[0].arguments_text(), text);
        let mut chat = Transcript::new();
        chat.push(Message::user("refund it"));
        chat.push(message);
        chat.push(Message::tool_result("call_1", "done"));
        let compactor = Compactor::builder().budget(4_000).build().unwrap();
        let agent = Agent {
            customer: "cus_1".into(),
            chat,
        };
        let compacted = compactor.compact_blocking(&agent).unwrap();
        let loaded: compaction::Compacted<Agent> =
            serde_json::from_str(&serde_json::to_string(&compacted).unwrap()).unwrap();
        assert!(loaded.verify_seal());
        for request in [compacted.openai_messages(), loaded.openai_messages()] {
            let wire = serde_json::to_value(&request).unwrap();
            assert_eq!(
                wire[2]["tool_calls"][0]["function"]["arguments"], text,
                "{text}"
            );
        }
        let restored = compactor
            .rehydrate_blocking(&loaded, &compaction::NoReacquire)
            .unwrap();
        assert_eq!(restored.chat, agent.chat);
        assert_eq!(
            restored.chat.messages()[1].tool_calls[0].arguments_text(),
            text
        );
    }
}

/// Issue 21.6: a system or developer message between a call and its results never reaches
/// the wire: the adapter and the compactor refuse it, naming the message.
#[test]
fn a_message_between_a_call_and_its_results_is_refused_before_the_wire() {
    for between in [Message::system("late"), Message::developer("late")] {
        let chat: Transcript = vec![
            Message::user("x"),
            Message::assistant_with_tools("", vec![ToolCall::new("c1", "f", json!({}))]),
            between,
            Message::tool_result("c1", "r"),
        ]
        .into_iter()
        .collect();
        assert!(matches!(
            chat.to_openai_messages(),
            Err(OpenAiMessageError::Invalid(
                TranscriptError::BetweenCallAndResult { index: 2, .. }
            ))
        ));
        let compactor = Compactor::builder().budget(4_000).build().unwrap();
        let agent = Agent {
            customer: "cus_1".into(),
            chat,
        };
        assert!(matches!(
            compactor.compact_blocking(&agent),
            Err(compaction::CompactionError::InvalidTranscript {
                source: TranscriptError::BetweenCallAndResult { index: 2, .. },
                ..
            })
        ));
    }
}

/// Opaque parts have no place in a chat completions request: converting the message refuses,
/// the compacted request leaves them out (they stay in the checkpoint).
#[test]
fn opaque_parts_are_refused_by_the_chat_adapter_and_left_out_of_the_request() {
    let thinking = OpaquePart::anthropic_thinking("secret plan", "c2lnbmF0dXJl");
    let turn = Message::assistant("ok").with_opaque([thinking]);
    assert!(matches!(
        to_openai_message(&turn),
        Err(OpenAiMessageError::NotSendable {
            what: "opaque parts",
            ..
        })
    ));
    let chat: Transcript = vec![Message::user("x"), turn.clone()].into_iter().collect();
    let compactor = Compactor::builder().budget(4_000).build().unwrap();
    let agent = Agent {
        customer: "cus_1".into(),
        chat,
    };
    let compacted = compactor.compact_blocking(&agent).unwrap();
    let wire = serde_json::to_string(&compacted.openai_messages()).unwrap();
    assert!(
        !wire.contains("c2lnbmF0dXJl") && !wire.contains("secret plan"),
        "{wire}"
    );
    assert_eq!(compacted.messages()[2], turn);
}

#[allow(deprecated)] // the response message has a deprecated field
fn response_message() -> ChatCompletionResponseMessage {
    ChatCompletionResponseMessage {
        content: None,
        refusal: None,
        tool_calls: None,
        annotations: None,
        role: OpenAiRole::Assistant,
        function_call: None,
        audio: None,
    }
}

#[test]
fn our_messages_that_cannot_be_sent_are_refused() {
    let mut tool = Message::tool_result("c1", "x");
    tool.tool_call_id = None;
    assert!(matches!(
        to_openai_message(&tool),
        Err(OpenAiMessageError::ToolMessageWithoutCallId { index: 0 })
    ));
    let named_tool = Message::tool_result("c1", "x").with_name("reader");
    let mut user_with_calls = Message::user("x");
    user_with_calls.tool_calls = vec![ToolCall::new("c1", "t", json!({}))];
    let mut user_with_call_id = Message::user("x");
    user_with_call_id.tool_call_id = Some("c1".into());
    for (message, field) in [
        (named_tool, "name"),
        (user_with_calls, "tool_calls"),
        (user_with_call_id, "tool_call_id"),
    ] {
        match to_openai_message(&message) {
            Err(OpenAiMessageError::NotSendable { what, .. }) => assert_eq!(what, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    // An orphaned result is refused before it reaches a provider.
    let orphan: Transcript = vec![Message::user("x"), Message::tool_result("nope", "y")]
        .into_iter()
        .collect();
    assert!(matches!(
        orphan.to_openai_messages(),
        Err(OpenAiMessageError::Invalid(
            TranscriptError::ResultWithoutCall { index: 1, .. }
        ))
    ));
    let orphan_request = vec![ChatCompletionRequestMessage::Tool(
        ChatCompletionRequestToolMessage {
            content: ChatCompletionRequestToolMessageContent::Text("y".into()),
            tool_call_id: "nope".into(),
        },
    )];
    assert!(matches!(
        Transcript::from_openai_messages(&orphan_request),
        Err(OpenAiMessageError::Invalid(_))
    ));
}

#[test]
fn a_call_only_message_is_sent_without_content_and_the_effect_key_stays_local() {
    let call = ToolCall::new("c1", "write_file", json!({"path": "a"})).with_effect("w1");
    let sent = to_openai_message(&Message::assistant_with_tools("", vec![call])).unwrap();
    let wire = serde_json::to_value(&sent).unwrap();
    assert_eq!(wire["role"], "assistant");
    assert!(wire.get("content").is_none(), "{wire}");
    assert_eq!(
        wire["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"a"}"#
    );
    assert!(!wire.to_string().contains("w1"));
    let plain = serde_json::to_value(to_openai_message(&Message::assistant("")).unwrap()).unwrap();
    assert_eq!(plain["content"], "");
}

#[test]
#[allow(deprecated)] // the response message has a deprecated field; Default fills it
fn the_models_reply_becomes_our_assistant_message() {
    let reply = ChatCompletionResponseMessage {
        content: None,
        refusal: None,
        tool_calls: Some(vec![function_call(
            "call_9",
            r#"{"pointer": "store://sha256:00"}"#,
        )]),
        annotations: None,
        role: OpenAiRole::Assistant,
        function_call: None,
        audio: None,
    };
    let message = from_openai_response_message(&reply).unwrap();
    let arguments = ToolArguments::from_text(r#"{"pointer": "store://sha256:00"}"#).unwrap();
    assert_eq!(
        message,
        Message::assistant_with_tools("", vec![ToolCall::new("call_9", "read_file", arguments)])
    );
    let refused = ChatCompletionResponseMessage {
        refusal: Some("no".into()),
        ..reply
    };
    assert!(matches!(
        from_openai_response_message(&refused),
        Err(OpenAiMessageError::Unsupported {
            what: "a refusal",
            ..
        })
    ));
}

#[test]
fn the_pointer_tool_as_async_openai_type_is_the_same_json() {
    assert_eq!(
        serde_json::to_value(resolve_pointer_chat_tool()).unwrap(),
        resolve_pointer_tool()
    );
}

#[test]
fn array_content_from_the_wire_is_one_text_part_or_refused() {
    let wire = json!([
        {"role": "developer", "content": [{"type": "text", "text": "d"}]},
        {"role": "user", "content": [{"type": "text", "text": "u"}], "name": "ann"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}], "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}
        ]},
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "t"}]},
    ]);
    let request: Vec<ChatCompletionRequestMessage> = serde_json::from_value(wire).unwrap();
    let chat = Transcript::from_openai_messages(&request).unwrap();
    let expected = [
        Message::developer("d"),
        Message::user("u").with_name("ann"),
        Message::assistant_with_tools("a", vec![ToolCall::new("c", "f", json!({"x": 1}))]),
        // `{"x":1}` on the wire is what `json!` prints: the texts are equal.
        Message::tool_result("c", "t"),
    ];
    assert_eq!(chat.messages(), &expected[..]);
    for (message, what) in [
        (
            json!({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}}]}),
            "an audio part",
        ),
        (
            json!({"role": "user", "content": [{"type": "file", "file": {"file_id": "f1"}}]}),
            "a file part",
        ),
        (
            json!({"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}),
            "a refusal part",
        ),
        (
            json!({"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
            "several content parts",
        ),
    ] {
        let message: ChatCompletionRequestMessage = serde_json::from_value(message).unwrap();
        assert_eq!(unsupported_what(from_openai_message(&message)), what);
    }
}
