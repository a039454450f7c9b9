//! OpenAI's streamed chat completions assembled (issue 31 item 1, feature `openai-types`): the
//! chunk streams of OpenAI's streaming guides (text deltas; a tool call's argument fragments by
//! `index`, then the usage chunk), recorded under `fixtures/openai/chat_stream_*.sse`, give the
//! completion of the matching non-streamed `*.json`, however the bytes are split; hostile
//! streams are typed errors, never a panic.

use compaction::openai::async_openai::types::chat::{
    ChatCompletionMessageToolCalls, CreateChatCompletionResponse,
    CreateChatCompletionStreamResponse,
};
use compaction::openai::{from_openai_response_message, ChatStreamAssembler, ChatStreamError};
use proptest::prelude::*;

const RECORDED: [(&str, &str, &str); 2] = [
    (
        "text",
        include_str!("../fixtures/openai/chat_stream_text.sse"),
        include_str!("../fixtures/openai/chat_stream_text.json"),
    ),
    (
        "tool_calls",
        include_str!("../fixtures/openai/chat_stream_tool_calls.sse"),
        include_str!("../fixtures/openai/chat_stream_tool_calls.json"),
    ),
];

fn serialized(response: &CreateChatCompletionResponse) -> String {
    serde_json::to_string(response).unwrap()
}

fn expected(json: &str) -> CreateChatCompletionResponse {
    serde_json::from_str(json).expect("the recorded completion parses")
}

fn chunks(sse: &str) -> Vec<&str> {
    sse.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .collect()
}

fn assemble(sse: &str) -> Result<CreateChatCompletionResponse, ChatStreamError> {
    let mut assembler = ChatStreamAssembler::new();
    assembler.push_sse(sse)?;
    assembler.finish()
}

#[test]
fn every_recorded_stream_gives_the_non_streamed_completion() {
    for (name, sse, json) in RECORDED {
        let expected = expected(json);
        let assembled = assemble(sse).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(serialized(&assembled), serialized(&expected), "{name}");
        // Chunk by chunk, as async-openai's `create_stream` yields them, or as JSON.
        let mut typed = ChatStreamAssembler::new();
        let mut text = ChatStreamAssembler::new();
        for chunk in chunks(sse) {
            let parsed: CreateChatCompletionStreamResponse = serde_json::from_str(chunk).unwrap();
            typed.push(&parsed).unwrap();
            text.push_json(chunk).unwrap();
        }
        assert_eq!(
            serialized(&typed.finish().unwrap()),
            serialized(&expected),
            "{name}"
        );
        assert_eq!(
            serialized(&text.finish().unwrap()),
            serialized(&expected),
            "{name}"
        );
    }
}

#[test]
fn the_arguments_are_the_fragments_byte_for_byte_and_the_session_takes_them() {
    let completion = assemble(RECORDED[1].1).unwrap();
    let message = &completion.choices[0].message;
    let Some(ChatCompletionMessageToolCalls::Function(call)) =
        message.tool_calls.as_ref().and_then(|c| c.first())
    else {
        panic!("a function call: {message:?}");
    };
    assert_eq!(call.function.arguments, r#"{"location":"Paris, France"}"#);
    let ours = from_openai_response_message(message).unwrap();
    assert_eq!(
        ours.tool_calls[0].arguments.as_str(),
        r#"{"location":"Paris, France"}"#
    );
    assert_eq!(completion.usage.as_ref().map(|u| u.total_tokens), Some(99));
}

proptest! {
    #[test]
    fn any_split_of_the_bytes_assembles_the_same_completion(
        which in 0..RECORDED.len(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..30),
    ) {
        let (_, sse, json) = RECORDED[which];
        let bytes = sse.as_bytes();
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        at.sort_unstable();
        let mut assembler = ChatStreamAssembler::new();
        let mut from = 0;
        for cut in at.into_iter().chain([bytes.len()]) {
            assembler.push_sse(&bytes[from..cut]).unwrap();
            from = cut;
        }
        prop_assert_eq!(serialized(&assembler.finish().unwrap()), serialized(&expected(json)));
    }
}

#[test]
fn a_cut_stream_is_incomplete() {
    for (name, sse, _) in RECORDED {
        let bytes = sse.as_bytes();
        for cut in 0..bytes.len() - 1 {
            let mut assembler = ChatStreamAssembler::new();
            let result = assembler
                .push_sse(&bytes[..cut])
                .and_then(|()| assembler.finish());
            assert!(
                matches!(result, Err(ChatStreamError::Incomplete { .. })),
                "{name} cut at {cut}: {result:?}"
            );
        }
    }
    // Typed chunks without the last (its finish reason): incomplete too.
    let mut assembler = ChatStreamAssembler::new();
    let all = chunks(RECORDED[0].1);
    for chunk in &all[..all.len() - 1] {
        assembler.push_json(chunk).unwrap();
    }
    assert!(matches!(
        assembler.finish(),
        Err(ChatStreamError::Incomplete { .. })
    ));
}

#[test]
fn hostile_chunks_are_typed_errors() {
    let tool = RECORDED[1].1;
    let first = r#"[{"index": 0, "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "function": {"arguments": "", "name": "get_weather"}, "type": "function"}]"#;
    // A call starting at index 2 (a gap), or without its id.
    let gap = tool.replacen(first, &first.replace(r#""index": 0"#, r#""index": 2"#), 1);
    assert!(matches!(
        assemble(&gap),
        Err(ChatStreamError::ToolCall { index: 2, .. })
    ));
    let no_id = tool.replacen(
        first,
        &first.replace(r#""call_DdmO9pD3xa9XTPNJ32zg2hcA""#, "null"),
        1,
    );
    assert!(matches!(
        assemble(&no_id),
        Err(ChatStreamError::ToolCall { index: 0, .. })
    ));
    // A chunk of another completion, one after [DONE], an error object mid-stream.
    let mixed = tool.replacen("chatcmpl-456", "chatcmpl-999", 3);
    assert!(matches!(
        assemble(&mixed),
        Err(ChatStreamError::MixedStreams { .. })
    ));
    let after = format!("{tool}{}", tool.lines().next().unwrap());
    let after = format!("{after}\n\n");
    assert_eq!(assemble(&after), Err(ChatStreamError::AfterDone));
    let error = tool.replacen(
        "data: [DONE]",
        r#"data: {"error":{"message":"The server had an error","type":"server_error"}}"#,
        1,
    );
    assert!(matches!(
        assemble(&error),
        Err(ChatStreamError::BadChunk { reason }) if reason.contains("server_error")
    ));
    let mut assembler = ChatStreamAssembler::new();
    // Bytes of another event after `[DONE]`, cut before its end: not a whole stream.
    let trailing = format!("{tool}data: {{\"id\"");
    assert!(matches!(
        assemble(&trailing),
        Err(ChatStreamError::Incomplete { .. })
    ));
    assert_eq!(
        assembler.push_sse(b"data: \xff\n\n"),
        Err(ChatStreamError::NotUtf8)
    );
}

#[test]
fn parallel_calls_interleaved_by_index_keep_their_exact_arguments() {
    let head = r#""id":"c","object":"chat.completion.chunk","created":1,"model":"m""#;
    let call = |index: u32, id: Option<&str>, name: Option<&str>, args: &str| {
        let id = id.map_or("null".to_owned(), |i| format!("\"{i}\""));
        let name = name.map_or("null".to_owned(), |n| format!("\"{n}\""));
        let args = serde_json::to_string(args).unwrap();
        format!(
            r#"{{{head},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{index},"id":{id},"type":"function","function":{{"name":{name},"arguments":{args}}}}}]}},"finish_reason":null}}]}}"#
        )
    };
    let hostile = r#"{"path": "⟦p17⟧ store://sha256:00", "n": 1.0000000000000000001}"#;
    let mut assembler = ChatStreamAssembler::new();
    assembler
        .push_json(&call(0, Some("call_a"), Some("read"), ""))
        .unwrap();
    assembler
        .push_json(&call(
            1,
            Some("call_b"),
            Some("resolve_pointer"),
            &hostile[..9],
        ))
        .unwrap();
    assembler
        .push_json(&call(0, None, None, r#"{"path": "a.rs"}"#))
        .unwrap();
    assembler
        .push_json(&call(1, None, None, &hostile[9..]))
        .unwrap();
    let end = format!(
        r#"{{{head},"choices":[{{"index":0,"delta":{{}},"finish_reason":"tool_calls"}}]}}"#
    );
    assembler.push_json(&end).unwrap();
    let completion = assembler.finish().unwrap();
    let calls: Vec<(String, String)> = completion.choices[0]
        .message
        .tool_calls
        .iter()
        .flatten()
        .map(|c| match c {
            ChatCompletionMessageToolCalls::Function(f) => {
                (f.id.clone(), f.function.arguments.clone())
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_a".to_owned(), r#"{"path": "a.rs"}"#.to_owned()),
            ("call_b".to_owned(), hostile.to_owned()),
        ]
    );
}
