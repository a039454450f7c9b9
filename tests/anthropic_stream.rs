//! Anthropic's streamed replies assembled (issue 31 item 1, feature `anthropic-types`): the
//! example streams of Anthropic's streaming guide (basic text, tool use with
//! `input_json_delta`, extended thinking with `thinking_delta` and `signature_delta`, a server
//! tool with a raw result block), recorded under `fixtures/anthropic/stream_*.sse`, give the
//! reply of the matching non-streamed `*.json` byte for byte once serialized, however the
//! bytes are split; hostile streams (cut, reordered, gaps, unknown deltas, provider errors)
//! are typed errors, never a panic and never a wrong reply.

use compaction::anthropic::{
    from_anthropic_response, AnthropicResponse, AnthropicStreamError, ContentBlock, StreamAssembler,
};
use proptest::prelude::*;

/// (name, recorded stream, the non-streamed reply).
const RECORDED: [(&str, &str, &str); 4] = [
    (
        "text",
        include_str!("../fixtures/anthropic/stream_text.sse"),
        include_str!("../fixtures/anthropic/stream_text.json"),
    ),
    (
        "tool_use",
        include_str!("../fixtures/anthropic/stream_tool_use.sse"),
        include_str!("../fixtures/anthropic/stream_tool_use.json"),
    ),
    (
        "thinking",
        include_str!("../fixtures/anthropic/stream_thinking.sse"),
        include_str!("../fixtures/anthropic/stream_thinking.json"),
    ),
    (
        "server_tool",
        include_str!("../fixtures/anthropic/stream_server_tool.sse"),
        include_str!("../fixtures/anthropic/stream_server_tool.json"),
    ),
];

fn serialized(response: &AnthropicResponse) -> String {
    serde_json::to_string(response).expect("a response serializes")
}

fn expected(json: &str) -> AnthropicResponse {
    serde_json::from_str(json).expect("the recorded non-streamed reply parses")
}

/// The `data:` payload of each event of a recorded stream.
fn data_lines(sse: &str) -> Vec<&str> {
    sse.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect()
}

/// A recorded stream with one event's data replaced (`from` by `to`, once).
fn edited(sse: &str, from: &str, to: &str) -> String {
    assert!(sse.contains(from), "{from}");
    sse.replacen(from, to, 1)
}

#[test]
fn every_recorded_stream_gives_the_non_streamed_reply_byte_for_byte() {
    for (name, sse, json) in RECORDED {
        let assembled = StreamAssembler::assemble(sse).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = expected(json);
        assert_eq!(serialized(&assembled), serialized(&expected), "{name}");
        assert_eq!(assembled, expected, "{name}");
        // Event by event, as an SDK or a log hands them over: the same reply.
        let mut assembler = StreamAssembler::new();
        for data in data_lines(sse) {
            assembler
                .push_event(data)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(assembler.is_complete(), "{name}");
        assert_eq!(
            serialized(&assembler.finish().unwrap()),
            serialized(&expected)
        );
    }
}

#[test]
fn the_recorded_blocks_are_what_the_session_takes() {
    let tool = StreamAssembler::assemble(RECORDED[1].1).unwrap();
    let ContentBlock::ToolUse { input, .. } = &tool.content[1] else {
        panic!("a tool_use block: {:?}", tool.content[1]);
    };
    // The joined fragments, byte for byte (the model's text, spaces included).
    assert_eq!(input.as_str(), r#"{"location": "San Francisco, CA"}"#);
    let message = from_anthropic_response(&tool).unwrap();
    assert_eq!(message.tool_calls[0].name, "get_weather");

    let thinking = StreamAssembler::assemble(RECORDED[2].1).unwrap();
    let message = from_anthropic_response(&thinking).unwrap();
    assert_eq!(
        message.opaque[0].block(),
        r#"{"type":"thinking","thinking":"I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\nThe remainder is 0, so GCD(1071, 462) = 21.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."}"#
    );
    assert_eq!(
        message.content,
        "The greatest common divisor of 1071 and 462 is **21**."
    );

    let server = StreamAssembler::assemble(RECORDED[3].1).unwrap();
    assert!(matches!(&server.content[1], ContentBlock::Other(raw)
        if raw.contains(r#""input":{"query": "weather NYC today"}"#)));
    assert_eq!(
        server.usage.input_tokens, 10682,
        "message_delta's usage is cumulative"
    );
    assert_eq!(server.usage.output_tokens, 510);
}

proptest! {
    #[test]
    fn any_split_of_the_bytes_assembles_the_same_reply(
        which in 0..RECORDED.len(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..40),
        crlf in any::<bool>(),
    ) {
        let (name, sse, json) = RECORDED[which];
        // The same stream with `\r\n` line ends, as a proxy may write it.
        let text = if crlf { sse.replace('\n', "\r\n") } else { sse.to_owned() };
        let bytes = text.as_bytes();
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        at.sort_unstable();
        let mut assembler = StreamAssembler::new();
        let mut from = 0;
        for cut in at.into_iter().chain([bytes.len()]) {
            assembler.push_sse(&bytes[from..cut]).unwrap();
            from = cut;
        }
        let assembled = assembler.finish().unwrap();
        prop_assert_eq!(serialized(&assembled), serialized(&expected(json)), "{}", name);
    }
}

#[test]
fn a_stream_cut_anywhere_is_incomplete_never_a_reply() {
    for (name, sse, _) in RECORDED {
        let bytes = sse.as_bytes();
        // Every prefix short of the final blank line is missing something.
        for cut in 0..bytes.len() - 1 {
            let mut assembler = StreamAssembler::new();
            let pushed = assembler.push_sse(&bytes[..cut]);
            let result = pushed.and_then(|()| assembler.finish());
            match result {
                Err(AnthropicStreamError::Incomplete { .. }) => {}
                other => panic!("{name} cut at {cut}: {other:?}"),
            }
        }
    }
}

#[test]
fn out_of_order_gapped_and_orphan_events_are_typed_errors() {
    let text = RECORDED[1].1;
    let start = r#"{"type":"content_block_start","index":1,"#;
    let gap = edited(text, start, r#"{"type":"content_block_start","index":2,"#);
    assert_eq!(
        StreamAssembler::assemble(gap),
        Err(AnthropicStreamError::OutOfOrder {
            expected: 1,
            found: 2
        })
    );
    let repeat = edited(text, start, r#"{"type":"content_block_start","index":0,"#);
    assert!(matches!(
        StreamAssembler::assemble(repeat),
        Err(AnthropicStreamError::OutOfOrder {
            expected: 1,
            found: 0
        })
    ));
    // A delta for a block never started.
    let orphan = edited(
        text,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        r#"{"type":"content_block_delta","index":7,"delta":{"type":"input_json_delta","partial_json":""}}"#,
    );
    assert!(matches!(
        StreamAssembler::assemble(orphan),
        Err(AnthropicStreamError::UnknownBlock { index: 7, .. })
    ));
    // Events in another order: a block's delta before its start, the start after the stop.
    let events = data_lines(text);
    let mut assembler = StreamAssembler::new();
    assembler.push_event(events[0]).unwrap();
    assert!(matches!(
        assembler.push_event(events[3]),
        Err(AnthropicStreamError::UnknownBlock { index: 0, .. })
    ));
    // The assembler stays failed: no reply comes out of a stream that went wrong.
    assert!(assembler.push_event(events[1]).is_err());
    assert!(assembler.finish().is_err());
    let mut before_start = StreamAssembler::new();
    assert!(matches!(
        before_start.push_event(events[1]),
        Err(AnthropicStreamError::BeforeStart { .. })
    ));
    // A delta after its block stopped, and anything but a ping after message_stop.
    let mut assembler = StreamAssembler::new();
    for data in &events[..5] {
        assembler.push_event(data).unwrap();
    }
    let stopped = r#"{"type":"content_block_stop","index":0}"#;
    assembler.push_event(stopped).unwrap();
    assert!(matches!(
        assembler.push_event(events[4]),
        Err(AnthropicStreamError::BlockStopped { index: 0, .. })
    ));
    let mut done = StreamAssembler::new();
    done.push_sse(RECORDED[0].1).unwrap();
    done.push_event(r#"{"type":"ping"}"#).unwrap();
    assert!(matches!(
        done.push_event(r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"}}"#),
        Err(AnthropicStreamError::AfterStop { .. })
    ));
    // A second message_start, and a block left open at message_stop.
    let twice = format!(
        "{}{}",
        RECORDED[0].1.split("event: content").next().unwrap(),
        RECORDED[0].1
    );
    assert_eq!(
        StreamAssembler::assemble(twice),
        Err(AnthropicStreamError::DuplicateStart)
    );
    let open = text.replace(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "",
    );
    assert!(matches!(
        StreamAssembler::assemble(open),
        Err(AnthropicStreamError::Incomplete { missing }) if missing.contains("block 1")
    ));
}

#[test]
fn a_provider_error_event_ends_the_stream_with_its_type_and_message() {
    let mut assembler = StreamAssembler::new();
    let head = RECORDED[0]
        .1
        .split("event: content_block_delta")
        .next()
        .unwrap();
    assembler.push_sse(head).unwrap();
    let error = "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";
    let expected = AnthropicStreamError::Provider {
        error_type: "overloaded_error".into(),
        message: "Overloaded".into(),
    };
    assert_eq!(assembler.push_sse(error), Err(expected.clone()));
    assert_eq!(assembler.finish(), Err(expected));
}

#[test]
fn deltas_the_block_cannot_take_or_nobody_knows_are_refused() {
    let text = RECORDED[1].1;
    let tool_delta = r#"{"type":"input_json_delta","partial_json":" CA\"}"}"#;
    let wrong = edited(text, tool_delta, r#"{"type":"text_delta","text":" CA"}"#);
    assert!(matches!(
        StreamAssembler::assemble(wrong),
        Err(AnthropicStreamError::DeltaMismatch { index: 1, .. })
    ));
    let unknown = edited(
        text,
        tool_delta,
        r#"{"type":"future_delta","bytes":"AAAA"}"#,
    );
    assert_eq!(
        StreamAssembler::assemble(unknown),
        Err(AnthropicStreamError::UnknownDelta {
            index: 1,
            delta: "future_delta".into()
        })
    );
    // The fragments joined are not one JSON object: cut, or a list.
    let cut = edited(
        text,
        tool_delta,
        r#"{"type":"input_json_delta","partial_json":" CA\""}"#,
    );
    assert!(matches!(
        StreamAssembler::assemble(cut),
        Err(AnthropicStreamError::ToolInput { index: 1, .. })
    ));
    // A thinking block whose signature never came is no thinking block.
    let unsigned = RECORDED[2]
        .1
        .replace(r#""signature": """#, r#""signature": null"#);
    let unsigned = unsigned.replace("event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"signature_delta\", \"signature\": \"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds...\"}}\n\n", "");
    assert!(matches!(
        StreamAssembler::assemble(unsigned),
        Err(AnthropicStreamError::Block { index: 0, .. })
    ));
    // An `event:` name other than the data's type, data that is not JSON, bytes not UTF-8.
    let renamed = edited(text, "event: message_stop", "event: message_delta");
    assert!(matches!(
        StreamAssembler::assemble(renamed),
        Err(AnthropicStreamError::BadEvent { .. })
    ));
    let garbage = edited(text, r#"{"type":"message_stop"}"#, "{not json");
    assert!(matches!(
        StreamAssembler::assemble(garbage),
        Err(AnthropicStreamError::BadEvent { .. })
    ));
    let mut assembler = StreamAssembler::new();
    assert_eq!(
        assembler.push_sse(b"event: ping\ndata: \xff\n\n"),
        Err(AnthropicStreamError::NotUtf8)
    );
}

#[test]
fn unknown_event_types_are_skipped_and_citations_appended() {
    let text = RECORDED[0].1.replace(
        "event: ping\n",
        "event: future_event\ndata: {\"type\":\"future_event\",\"x\":1}\n\nevent: ping\n",
    );
    let reply = StreamAssembler::assemble(text).unwrap();
    assert_eq!(reply.content, vec![ContentBlock::text("Hello!")]);

    let citation = r#"{"type":"char_location","cited_text":"The grass is green.","document_index":0,"document_title":"Example Document","start_char_index":0,"end_char_index":20}"#;
    let with_citation = RECORDED[0].1.replace(
        "event: content_block_stop",
        &format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"citations_delta\",\"citation\":{citation}}}}}\n\nevent: content_block_stop"
        ),
    );
    let reply = StreamAssembler::assemble(with_citation).unwrap();
    let ContentBlock::Other(raw) = &reply.content[0] else {
        panic!(
            "a text block with citations is kept raw: {:?}",
            reply.content[0]
        );
    };
    assert_eq!(
        raw,
        &format!(r#"{{"type":"text","text":"Hello!","citations":[{citation}]}}"#)
    );
}

#[test]
fn text_imitating_the_librarys_markers_is_kept_verbatim() {
    let hostile = "⟦tombstone p17⟧ store://sha256:0000 I can't help with that. \u{0}\u{202e}";
    let escaped = serde_json::to_string(hostile).unwrap();
    let text = RECORDED[0]
        .1
        .replace(r#""text": "Hello""#, &format!(r#""text": {escaped}"#));
    let reply = StreamAssembler::assemble(text).unwrap();
    assert_eq!(
        reply.content,
        vec![ContentBlock::text(format!("{hostile}!"))]
    );
}
