//! Streams that assemble every documented shape (issue 44 item 3; feature `anthropic-types`):
//! one recorded stream per shape under `fixtures/anthropic/stream_*.sse`, each giving the
//! non-streamed reply of the matching `*.json` byte for byte once serialized, whole, event by
//! event, and split in two at every byte offset: server-side compaction streamed with a
//! `compaction_delta` (the block replayed exactly as the whole reply gives it), a thinking block
//! whose start has no `signature` key, `redacted_thinking`, `citations_delta`, and a block type
//! nobody knows with delta types nobody knows (kept raw) among event types nobody knows, some
//! after `message_stop` (skipped). An event over the SSE decoder's size limit is a clear error.

use compaction::anthropic::{
    from_anthropic_response, AnthropicResponse, AnthropicStreamError, ContentBlock, StreamAssembler,
};
use compaction::transcript::OpaqueKind;

/// (name, recorded stream, the non-streamed reply).
const SHAPES: [(&str, &str, &str); 5] = [
    (
        "compaction",
        include_str!("../fixtures/anthropic/stream_compaction.sse"),
        include_str!("../fixtures/anthropic/stream_compaction.json"),
    ),
    (
        "thinking_unsigned",
        include_str!("../fixtures/anthropic/stream_thinking_unsigned.sse"),
        include_str!("../fixtures/anthropic/stream_thinking_unsigned.json"),
    ),
    (
        "redacted_thinking",
        include_str!("../fixtures/anthropic/stream_redacted_thinking.sse"),
        include_str!("../fixtures/anthropic/stream_redacted_thinking.json"),
    ),
    (
        "citations",
        include_str!("../fixtures/anthropic/stream_citations.sse"),
        include_str!("../fixtures/anthropic/stream_citations.json"),
    ),
    (
        "unknown",
        include_str!("../fixtures/anthropic/stream_unknown.sse"),
        include_str!("../fixtures/anthropic/stream_unknown.json"),
    ),
];

fn serialized(response: &AnthropicResponse) -> String {
    serde_json::to_string(response).expect("a response serializes")
}

fn expected(json: &str) -> String {
    let reply: AnthropicResponse = serde_json::from_str(json).expect("the reply parses");
    serialized(&reply)
}

#[test]
fn every_shape_gives_the_non_streamed_reply_whole_and_event_by_event() {
    for (name, sse, json) in SHAPES {
        let whole = StreamAssembler::assemble(sse).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(serialized(&whole), expected(json), "{name}");
        let mut events = StreamAssembler::new();
        for data in sse.lines().filter_map(|l| l.strip_prefix("data: ")) {
            events
                .push_event(data)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert_eq!(
            serialized(&events.finish().unwrap()),
            expected(json),
            "{name}"
        );
    }
}

#[test]
fn every_shape_split_at_every_byte_gives_the_same_reply() {
    for (name, sse, json) in SHAPES {
        let expected = expected(json);
        let bytes = sse.as_bytes();
        for cut in 0..=bytes.len() {
            let mut assembler = StreamAssembler::new();
            assembler
                .push_sse(&bytes[..cut])
                .and_then(|()| assembler.push_sse(&bytes[cut..]))
                .unwrap_or_else(|e| panic!("{name} cut at {cut}: {e}"));
            let reply = assembler
                .finish()
                .unwrap_or_else(|e| panic!("{name} at {cut}: {e}"));
            assert_eq!(serialized(&reply), expected, "{name} cut at {cut}");
        }
    }
}

#[test]
fn the_streamed_blocks_are_what_the_session_keeps() {
    // The compaction block: an opaque part of its turn, its text the whole reply's block.
    let reply = StreamAssembler::assemble(SHAPES[0].1).unwrap();
    let message = from_anthropic_response(&reply).unwrap();
    assert_eq!(message.opaque[0].kind(), OpaqueKind::AnthropicCompaction);
    // The recorded reply's block, byte for byte (its fields in the reply's order).
    let block = message.opaque[0].block();
    assert!(
        block.starts_with(r#"{"type":"compaction","content":"The user"#),
        "{block}"
    );
    assert!(SHAPES[0].2.contains(&format!("[{block},")), "{block}");
    assert_eq!(message.content, "Next I will deploy to staging.");

    // A thinking block started without `signature`: signed, as the whole reply has it.
    let reply = StreamAssembler::assemble(SHAPES[1].1).unwrap();
    let message = from_anthropic_response(&reply).unwrap();
    assert_eq!(message.opaque[0].kind(), OpaqueKind::AnthropicThinking);
    assert!(message.opaque[0]
        .block()
        .ends_with(r#","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}"#));

    let reply = StreamAssembler::assemble(SHAPES[2].1).unwrap();
    let message = from_anthropic_response(&reply).unwrap();
    let kinds: Vec<OpaqueKind> = message.opaque.iter().map(|p| p.kind()).collect();
    assert_eq!(
        kinds,
        [
            OpaqueKind::AnthropicRedactedThinking,
            OpaqueKind::AnthropicThinking
        ]
    );

    let reply = StreamAssembler::assemble(SHAPES[4].1).unwrap();
    assert!(
        matches!(&reply.content[0], ContentBlock::Other(raw) if raw.contains("part one, part two")),
        "{:?}",
        reply.content[0]
    );
}

#[test]
fn a_thinking_start_without_signature_needs_its_signature_delta() {
    // Without the signature delta the block is not a thinking block: refused, never unsigned.
    let unsigned = SHAPES[1].1.replace(
        "\"type\":\"signature_delta\"",
        "\"type\":\"thinking_delta\"",
    );
    let unsigned = unsigned.replace("\"signature\":\"EqQB", "\"thinking\":\"EqQB");
    assert!(matches!(
        StreamAssembler::assemble(unsigned),
        Err(AnthropicStreamError::Block { index: 0, .. })
    ));
    // A delta that is not the block's own still is refused on a block this library models.
    let wrong = SHAPES[0].1.replace(
        "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Next I will \"}}",
        "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"compaction_delta\",\"content\":\"x\"}}",
    );
    assert!(matches!(
        StreamAssembler::assemble(wrong),
        Err(AnthropicStreamError::DeltaMismatch { index: 1, .. })
    ));
}

#[test]
fn an_event_over_the_size_limit_is_a_clear_error() {
    let sse = SHAPES[0].1;
    // The compaction event is the longest: a limit under it refuses the stream, whole or split.
    let mut small = StreamAssembler::new().max_event_bytes(256);
    let error = small.push_sse(sse).unwrap_err();
    assert_eq!(error, AnthropicStreamError::EventTooLarge { limit: 256 });
    assert!(error.to_string().contains("256"), "{error}");
    let mut split = StreamAssembler::new().max_event_bytes(256);
    let refused = sse
        .as_bytes()
        .chunks(7)
        .map(|c| split.push_sse(c))
        .find(Result::is_err);
    assert_eq!(
        refused,
        Some(Err(AnthropicStreamError::EventTooLarge { limit: 256 }))
    );
    assert!(StreamAssembler::new()
        .max_event_bytes(1024)
        .push_sse(sse)
        .is_ok());

    // The default: 4 MiB. A 3 MiB text delta passes, a 5 MiB one is refused before it is read
    // whole.
    let start = sse.split("event: content_block_start").next().unwrap();
    let delta = |mib: usize| {
        format!(
            "{start}event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\nevent: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{}\"}}}}\n\n",
            "a".repeat(mib << 20)
        )
    };
    assert!(StreamAssembler::new().push_sse(delta(3)).is_ok());
    assert_eq!(
        StreamAssembler::new().push_sse(delta(5)),
        Err(AnthropicStreamError::EventTooLarge { limit: 4 << 20 })
    );
}

#[test]
fn an_unknown_delta_on_an_unknown_block_appends_replaces_and_adds() {
    // Many small deltas on one string (appended in place), a member replaced by a value that
    // is not a string, and one the start did not have (added after the others).
    let head = SHAPES[4]
        .1
        .split("event: content_block_start")
        .next()
        .unwrap();
    let mut sse = format!(
        "{head}event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"future_block\",\"label\":\"\",\"n\":1}}}}\n\n"
    );
    let delta = |members: &str| {
        format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"future_delta\",{members}}}}}\n\n")
    };
    for _ in 0..2000 {
        sse.push_str(&delta(r#""label":"ab""#));
    }
    sse.push_str(&delta(r#""n":[2],"extra":"new""#));
    sse.push_str(concat!(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ));
    let reply = StreamAssembler::assemble(&sse).unwrap();
    let ContentBlock::Other(raw) = &reply.content[0] else {
        panic!("{:?}", reply.content[0]);
    };
    let expected = format!(
        r#"{{"type":"future_block","label":"{}","n":[2],"extra":"new"}}"#,
        "ab".repeat(2000)
    );
    assert_eq!(raw, &expected);
}
