//! OpenAI Responses items (feature `openai-responses`): a recorded response's output and a
//! recorded input list read into our messages and back with every reasoning field and the
//! arguments' text unchanged; what either side cannot carry is a typed error; the item rules
//! refuse each broken rule; ours -> items -> JSON -> items -> ours is the identity on what the
//! format carries; every compacted request passes the item rules with its reasoning items
//! unchanged and still in front of the items of their own turn. Hostile reasoning blocks are in
//! `openai_responses_reasoning.rs`.

use compaction::openai::async_openai::types::responses::{
    InputItem, Item, OutputItem, ReasoningItem, ReasoningItemContent, ReasoningTextContent,
    SummaryPart, SummaryTextContent,
};
use compaction::openai::{
    check_responses_input, from_responses_input, from_responses_output,
    resolve_pointer_response_tool, to_responses_input, ResponsesError, ResponsesRuleError,
};
use compaction::transcript::{OpaqueKind, OpaquePart, ToolArguments};
use compaction::{Message, Role, ToolCall, Transcript};
use compaction_fixtures::compacted_chat::compact_share;
use proptest::prelude::*;
use serde_json::{json, Value};
use wire::{answered, object_arguments, text};

mod session_driver;
mod wire;

const OUTPUT: &str = include_str!("../fixtures/openai/responses_output.json");
const INPUT: &str = include_str!("../fixtures/openai/responses_input.json");

fn items(json: Value) -> Vec<InputItem> {
    serde_json::from_value(json).expect("input items")
}

fn reasoning_fields(json: &str) -> Value {
    let value: Value = serde_json::from_str(json).unwrap();
    let list = value.get("output").unwrap_or(&value).as_array().unwrap();
    list.iter()
        .find(|item| item["type"] == "reasoning")
        .unwrap()
        .clone()
}

#[test]
fn a_recorded_response_becomes_our_assistant_turn_with_its_reasoning_unchanged() {
    let response: Value = serde_json::from_str(OUTPUT).unwrap();
    let output: Vec<OutputItem> = serde_json::from_value(response["output"].clone()).unwrap();
    let turn = from_responses_output(&output).unwrap();
    assert_eq!(turn.len(), 1);
    let message = &turn[0];
    assert_eq!(message.role, Role::Assistant);
    assert_eq!(message.content, "");
    assert_eq!(message.opaque.len(), 1);
    assert_eq!(message.opaque[0].kind(), OpaqueKind::OpenAiReasoning);
    // Every field of the reasoning item as received (its bytes are async-openai's to write).
    let block: Value = serde_json::from_str(message.opaque[0].block()).unwrap();
    assert_eq!(block, reasoning_fields(OUTPUT));
    // The arguments as the model wrote them: spacing and the 30-digit integer intact.
    assert_eq!(
        message.tool_calls[0].arguments_text(),
        r#"{"path": "tests/math.rs", "max_bytes": 123456789012345678901234567890}"#
    );
    assert_eq!(message.tool_calls[0].id, "call_X3yHh2N1d5cKqLq1v3rVdA9m");

    // Replayed: the reasoning item first, then the call, every field as it came.
    let mut chat = vec![Message::user("Why does the test fail?")];
    chat.extend(turn);
    chat.push(Message::tool_result("call_X3yHh2N1d5cKqLq1v3rVdA9m", "5);"));
    let input = to_responses_input(&chat).unwrap();
    check_responses_input(&input).unwrap();
    let sent = serde_json::to_value(&input).unwrap();
    assert_eq!(sent[1], reasoning_fields(OUTPUT));
    assert_eq!(sent[2]["type"], "function_call");
    assert_eq!(
        sent[2]["arguments"],
        r#"{"path": "tests/math.rs", "max_bytes": 123456789012345678901234567890}"#
    );
    assert!(sent[2].get("id").is_none(), "the fc_ item id is not kept");
}

/// `push_response` takes a Responses reply as it comes (no conversion of the caller's): its
/// output items become the assistant turn, reasoning kept; a reply whose calls come before
/// more turns, or with nothing in it, is refused and nothing is pushed.
#[test]
fn push_response_takes_a_responses_reply_whole_or_not_at_all() {
    use compaction::openai::async_openai::types::responses::Response;
    use compaction::session::{ResponseProblem, Session, SessionError};
    use compaction::{MemoryLedger, MemoryStore};
    let mut session = Session::builder("responses-agent")
        .compactor(session_driver::compactor(8_000))
        .store(MemoryStore::new())
        .ledger(MemoryLedger::new())
        .open_blocking(session_driver::fresh_agent)
        .unwrap();
    session.push(Message::user("Why does the test fail?"));
    session.next_request_blocking().unwrap();
    // The recorded reply's `usage` is OpenAI's documented example, not async-openai's shape
    // (the client drops it the same way).
    let response = |mut json: Value| -> Response {
        json.as_object_mut().unwrap().remove("usage");
        serde_json::from_value(json).unwrap()
    };
    let reply = response(serde_json::from_str(OUTPUT).unwrap());
    let before = session.transcript().len();

    // Calls, then a message after them: two turns, the first with calls. Refused whole.
    let mut late: Value = serde_json::from_str(OUTPUT).unwrap();
    let text = json!({"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Reading it.", "annotations": []}]});
    late["output"].as_array_mut().unwrap().push(text);
    let late = response(late);
    match session.push_response(&late) {
        Err(SessionError::InvalidResponse {
            problem: ResponseProblem::CallsBeforeMore { call_ids },
        }) => assert_eq!(call_ids, ["call_X3yHh2N1d5cKqLq1v3rVdA9m"]),
        other => panic!("{other:?}"),
    }
    let mut empty: Value = serde_json::from_str(OUTPUT).unwrap();
    empty["output"] = json!([]);
    let empty = response(empty);
    assert!(matches!(
        session.push_response(empty),
        Err(SessionError::Response(_))
    ));
    assert_eq!(session.transcript().len(), before, "nothing pushed");

    session.push_response(&reply).unwrap();
    let pushed = session.transcript().messages().last().unwrap();
    assert_eq!(pushed, &from_responses_output(&reply.output).unwrap()[0]);
    assert_eq!(pushed.opaque[0].kind(), OpaqueKind::OpenAiReasoning);
    assert_eq!(
        session.pending_calls()[0].id,
        "call_X3yHh2N1d5cKqLq1v3rVdA9m"
    );
}

#[test]
fn a_recorded_input_reads_into_a_valid_transcript_and_goes_back_the_same() {
    let input: Vec<InputItem> = serde_json::from_str(INPUT).unwrap();
    check_responses_input(&input).unwrap();
    let ours = from_responses_input(&input).unwrap();
    use Role::*;
    let roles: Vec<Role> = ours.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Developer, User, Assistant, Tool, User]);
    assert_eq!(ours[2].content, "Let me read the test.");
    assert_eq!(ours[2].opaque.len(), 1);
    assert_eq!(ours[2].tool_calls.len(), 1);
    Transcript::from_messages(ours.clone()).expect("a valid transcript");

    let back = serde_json::to_value(to_responses_input(&ours).unwrap()).unwrap();
    let recorded: Value = serde_json::from_str(INPUT).unwrap();
    // The same items in the same order: the reasoning item and the call field for field;
    // messages as plain text content (a one-part list becomes the string it holds).
    assert_eq!(back[2], recorded[2]);
    assert_eq!(back[4], recorded[4]);
    assert_eq!(back[5], recorded[5]);
    assert_eq!(
        back[1]["content"],
        "Why does the test in tests/math.rs fail?"
    );
    for (sent, was) in back
        .as_array()
        .unwrap()
        .iter()
        .zip(recorded.as_array().unwrap())
    {
        assert_eq!(
            sent.get("type").or(Some(&json!("message"))),
            was.get("type").or(Some(&json!("message")))
        );
        assert_eq!(sent.get("role"), was.get("role"));
    }
}

#[test]
fn what_the_items_cannot_carry_is_a_typed_error() {
    let thinking = OpaquePart::anthropic_thinking("plan", "c2ln");
    assert_eq!(
        to_responses_input(&[Message::user("x").with_name("ann")]),
        Err(ResponsesError::Named { index: 0 })
    );
    assert_eq!(
        to_responses_input(&[
            Message::user("x"),
            Message::assistant("a").with_opaque([thinking])
        ]),
        Err(ResponsesError::ForeignOpaque {
            index: 1,
            kind: "thinking"
        })
    );

    // A compaction_trigger item is a request to the server, not a turn: refused by name. (A
    // `compaction` item is kept: see tests/provider_compaction.rs.)
    let trigger = items(json!([{"type": "compaction_trigger"}]));
    assert_eq!(
        from_responses_input(&trigger),
        Err(ResponsesError::Compaction { index: 0 })
    );

    let refused: Vec<(Value, &str)> = vec![
        (
            json!({"role": "user", "content": [{"type": "input_image", "image_url": "https://x/a.png", "detail": "auto"}]}),
            "image",
        ),
        (
            json!({"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]}),
            "several",
        ),
        (
            json!({"role": "assistant", "content": "a", "phase": "commentary"}),
            "phase",
        ),
        (
            json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                   "content": [{"type": "refusal", "refusal": "no"}]}),
            "refusal",
        ),
        (
            json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                   "content": [{"type": "output_text", "text": "a", "annotations": [
                       {"type": "url_citation", "url": "https://x", "title": "x", "start_index": 0, "end_index": 1}]}]}),
            "annotations",
        ),
        (
            json!({"type": "item_reference", "id": "msg_1"}),
            "item reference",
        ),
        (
            json!({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}}),
            "web_search_call",
        ),
        (
            json!({"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "namespace": "ns"}),
            "namespaced",
        ),
    ];
    for (json, what) in refused {
        let list = items(json!([json]));
        match from_responses_input(&list) {
            Err(ResponsesError::Unsupported {
                index: 0,
                what: got,
            }) => {
                assert!(got.contains(what), "{got} / {what}")
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    let cut = items(json!([
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{\"path\": \"a"}
    ]));
    assert!(matches!(
        from_responses_input(&cut),
        Err(ResponsesError::ArgumentsNotJson { index: 0, ref call_id, .. }) if call_id == "c"
    ));
    let no_call_id = items(json!([{"type": "function_call_output", "output": "x"}]));
    assert_eq!(
        from_responses_input(&no_call_id),
        Err(ResponsesError::OutputWithoutCallId { index: 0 })
    );
    // A reasoning item with a field the Responses API does not list cannot become a part.
    let odd = r#"{"type":"reasoning","summary":[],"encrypted_content":"e","signature":"forged"}"#;
    assert!(OpaquePart::from_block(OpaqueKind::OpenAiReasoning, odd).is_err());
}

#[test]
fn a_compacted_request_leaves_out_what_only_the_chat_keeps_and_keeps_reasoning_with_its_turn() {
    let reasoning = OpaquePart::openai_reasoning("rs_1", "gAAAAB-secret");
    let thinking = OpaquePart::anthropic_thinking("plan", "c2ln");
    let call = ToolCall::new("call_1", "read_file", json!({"path": "a.rs"}));
    let chat = Transcript::from_messages(vec![
        Message::user("read a.rs").with_name("ann"),
        Message::assistant_with_tools("", vec![call]).with_opaque([reasoning.clone(), thinking]),
        Message::tool_result("call_1", "fn main() {}"),
        Message::user("thanks"),
    ])
    .unwrap();
    let compacted = compact_share(chat, 200, false).expect("fits");
    let input = compacted.responses_input();
    assert_eq!(check_responses_input(&input), Ok(()));
    let sent = serde_json::to_string(&input).unwrap();
    // The reasoning item, then its call, then the result; no Anthropic thinking, no name.
    let reasoning_at = sent
        .find(reasoning.block())
        .expect("the reasoning item, as built");
    let call_at = sent.find(r#""call_id":"call_1""#).unwrap();
    assert!(reasoning_at < call_at, "{sent}");
    assert!(
        !sent.contains("c2ln") && !sent.contains("\"thinking\""),
        "{sent}"
    );
    assert!(!sent.contains("ann"), "{sent}");
    // Asked for as they are, the same messages are a typed error, not a silent drop.
    assert!(matches!(
        to_responses_input(&compacted.messages()),
        Err(ResponsesError::Named { .. } | ResponsesError::ForeignOpaque { .. })
    ));
}

#[test]
fn the_item_rules_refuse_each_broken_rule() {
    let call =
        |id: &str| json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"});
    let output = |id: &str| json!({"type": "function_call_output", "call_id": id, "output": "ok"});
    let reasoning =
        json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"});
    let user = json!({"role": "user", "content": "x"});
    let assistant = json!({"role": "assistant", "content": "a"});
    let cases: Vec<(Value, ResponsesRuleError)> = vec![
        (
            json!([user, call("c1"), user]),
            ResponsesRuleError::CallWithoutOutput {
                index: 1,
                call_id: "c1".into(),
            },
        ),
        (
            json!([user, call("c1"), call("c2"), output("c1")]),
            ResponsesRuleError::CallWithoutOutput {
                index: 2,
                call_id: "c2".into(),
            },
        ),
        (
            json!([user, output("c9")]),
            ResponsesRuleError::OutputWithoutCall {
                index: 1,
                call_id: "c9".into(),
            },
        ),
        (
            json!([user, call("c1"), output("c1"), call("c1"), output("c1")]),
            ResponsesRuleError::DuplicateCallId {
                index: 3,
                call_id: "c1".into(),
            },
        ),
        (
            json!([user, call("c1"), output("c1"), output("c1")]),
            ResponsesRuleError::DuplicateOutput {
                index: 3,
                call_id: "c1".into(),
            },
        ),
        (
            json!([user, reasoning, user]),
            ResponsesRuleError::ReasoningWithoutItem { index: 1 },
        ),
        (
            json!([user, reasoning, reasoning]),
            ResponsesRuleError::ReasoningWithoutItem { index: 1 },
        ),
        (
            json!([user, call("c1"), reasoning, output("c1")]),
            ResponsesRuleError::CallWithoutOutput {
                index: 1,
                call_id: "c1".into(),
            },
        ),
    ];
    for (list, expected) in cases {
        assert_eq!(
            check_responses_input(&items(list.clone())),
            Err(expected),
            "{list}"
        );
    }
    let fine = json!([
        user,
        reasoning,
        reasoning,
        assistant,
        call("c1"),
        call("c2"),
        output("c2"),
        output("c1"),
        user,
        reasoning,
        call("c3"),
        output("c3")
    ]);
    assert_eq!(check_responses_input(&items(fine)), Ok(()));
}

#[test]
fn the_pointer_tool_is_a_responses_function_tool() {
    let tool = serde_json::to_value(resolve_pointer_response_tool()).unwrap();
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["name"], "resolve_pointer");
    assert_eq!(tool["parameters"]["type"], "object");
}

// --- properties ---------------------------------------------------------------------------

/// Arguments as a model writes them (huge integers, repeated keys, spacing, non-objects).
fn arguments() -> impl Strategy<Value = ToolArguments> {
    prop_oneof![
        3 => object_arguments(),
        1 => Just(ToolArguments::from(json!([1, "two"]))),
    ]
}

/// A reasoning item as the API returns one: summary parts, sometimes reasoning text, an
/// encrypted blob, an id, a status.
fn reasoning() -> impl Strategy<Value = OpaquePart> {
    (
        prop::option::of("rs_[a-f0-9]{8,24}"),
        prop::collection::vec(text(), 0..3),
        prop::option::of(prop::collection::vec(text(), 0..2)),
        prop::option::of("[A-Za-z0-9+/=_-]{8,60}"),
    )
        .prop_map(|(id, summary, content, encrypted)| {
            let item = ReasoningItem {
                id,
                summary: summary
                    .into_iter()
                    .map(|text| SummaryPart::SummaryText(SummaryTextContent { text }))
                    .collect(),
                content: content.map(|parts| {
                    parts
                        .into_iter()
                        .map(|text| {
                            ReasoningItemContent::ReasoningText(ReasoningTextContent { text })
                        })
                        .collect()
                }),
                encrypted_content: encrypted,
                status: None,
            };
            let block = serde_json::to_string(&Item::Reasoning(item)).unwrap();
            OpaquePart::from_block(OpaqueKind::OpenAiReasoning, block).unwrap()
        })
}

/// A transcript in a shape the Responses items carry one-to-one: system and developer
/// messages, user turns each answered by one or two assistant messages (reasoning, text,
/// calls) and the calls' results.
fn carried() -> impl Strategy<Value = Vec<Message>> {
    let call = ("[a-z_]{1,8}", arguments(), text());
    // Often empty: a reply that only reasons or only calls.
    let reply = (
        prop_oneof![2 => Just(String::new()), 3 => text()],
        prop::collection::vec(reasoning(), 0..3),
        prop::collection::vec(call, 0..3),
    );
    let turn = (
        prop::collection::vec(text(), 1..3),
        prop::collection::vec(reply, 1..3),
        prop::option::of(text()),
    );
    (
        prop::collection::vec(text(), 0..2),
        prop::collection::vec(turn, 1..6),
    )
        .prop_map(|(system, turns)| {
            let mut out: Vec<Message> = system.into_iter().map(Message::system).collect();
            let mut next = 0;
            for (users, replies, developer) in turns {
                out.extend(users.into_iter().map(Message::user));
                for (reply, parts, calls) in replies {
                    let (made, results) = answered(calls, "call_", &mut next);
                    out.push(Message::assistant_with_tools(reply, made).with_opaque(parts));
                    out.extend(results);
                }
                out.extend(developer.map(Message::developer));
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn ours_to_items_and_back_through_json_is_the_identity(messages in carried()) {
        let input = to_responses_input(&messages).unwrap();
        let json = serde_json::to_string(&input).unwrap();
        let received: Vec<InputItem> = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&received, &input);
        let back = from_responses_input(&received).unwrap();
        prop_assert_eq!(&back, &messages);
        prop_assert_eq!(check_responses_input(&received), Ok(()));
        // Every reasoning item on the wire is one of ours, field for field, and (read from
        // the wire, so in async-openai's own bytes) byte for byte.
        let sent: Vec<Value> = serde_json::from_str(&json).unwrap();
        for part in messages.iter().flat_map(|m| &m.opaque) {
            let block: Value = serde_json::from_str(part.block()).unwrap();
            prop_assert!(sent.contains(&block));
            prop_assert!(json.contains(part.block()), "{} not in {}", part.block(), json);
        }
    }

    #[test]
    fn what_the_items_cannot_carry_is_refused_not_dropped(
        messages in carried(),
        pick in any::<prop::sample::Index>(),
        foreign in any::<bool>(),
    ) {
        let mut messages = messages;
        let at = pick.index(messages.len());
        let expected = if foreign {
            // Anthropic thinking on an assistant message (or a name where there is none).
            match messages.iter().position(|m| m.role == Role::Assistant) {
                Some(i) => {
                    messages[i].opaque.push(OpaquePart::anthropic_thinking("t", "c2ln"));
                    ResponsesError::ForeignOpaque { index: i, kind: "thinking" }
                }
                None => {
                    messages[at].name = Some("ann".into());
                    ResponsesError::Named { index: at }
                }
            }
        } else {
            messages[at].name = Some("ann".into());
            ResponsesError::Named { index: at }
        };
        prop_assert_eq!(to_responses_input(&messages), Err(expected));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_compacted_request_passes_the_item_rules(
        messages in carried(),
        percent in 10usize..110,
        summarize in any::<bool>(),
    ) {
        let chat = Transcript::from_messages(messages.clone()).unwrap();
        if let Some(compacted) = compact_share(chat, percent, summarize) {
            let input = compacted.responses_input();
            prop_assert_eq!(check_responses_input(&input), Ok(()));
            // Read back, each assistant turn with reasoning is a turn of the source whole: the
            // same reasoning items, unchanged, in front of the same calls.
            let json = serde_json::to_string(&input).unwrap();
            let received: Vec<InputItem> = serde_json::from_str(&json).unwrap();
            let sent = from_responses_input(&received).unwrap();
            // The items carry the request whole: the messages come back, call effects aside
            // (our bookkeeping, never sent).
            let mut expected = compacted.messages();
            for call in expected.iter_mut().flat_map(|m| &mut m.tool_calls) {
                call.effect = None;
            }
            prop_assert_eq!(&sent, &expected);
            for message in sent.iter().filter(|m| !m.opaque.is_empty()) {
                prop_assert!(messages
                    .iter()
                    .any(|m| m.opaque == message.opaque && m.tool_calls == message.tool_calls));
            }
        }
    }
}
