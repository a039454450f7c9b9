//! The key is in no error (issue 44 item 1; features `openai` and `anthropic`; real HTTP on
//! loopback): a server that echoes the key anywhere it can (an error body's message or type, a
//! body that is not JSON, a 2xx that does not parse and so lands in serde's reason, a streamed
//! `error` event, an SSE event's name, a delta or block type, a value in the wrong place, an
//! event after `message_stop`) at a random offset of random text, so that the key straddles the
//! 200-character cut of an excerpt as often as not. No error of either client
//! (`AnthropicClient::send`, `OpenAiClient::chat`), of either stream path (an error status on
//! `AnthropicClient::stream`, or its events once the stream began) and of either summarizer
//! holds the key or any 12-character run of it in its `Display` or its `Debug`.

use compaction::anthropic::{AnthropicClient, AnthropicRequest, AnthropicSummarizer};
use compaction::openai::{OpenAiClient, OpenAiSummarizer};
use compaction::{block_on, Summarizer, SummaryRequest};
use compaction_fixtures::openai_server::{FakeOpenAi, Reply};
use proptest::prelude::*;
use serde_json::json;
use std::fmt::Debug;
use std::time::Duration;

/// Shorter than any key below, longer than any run random text shares with one by chance.
const RUN: usize = 12;

/// Whether `text` holds `key` or any `RUN`-character run of it.
fn leaks(text: &str, key: &str) -> bool {
    let chars: Vec<char> = key.chars().collect();
    chars.windows(RUN).any(|run| {
        let run: String = run.iter().collect();
        text.contains(&run)
    })
}

fn assert_clean<E: std::fmt::Display + Debug>(what: &str, error: &E, key: &str) {
    let shown = format!("{error}\n{error:?}");
    assert!(!leaks(&shown, key), "{what}: the key leaks: {shown}");
}

/// Random text (quotes, backslashes, line breaks and multi-byte characters included) with the
/// key at a random offset: before it, 0 to 400 characters, so it falls before, across and
/// after the 200-character cut.
fn echoed() -> impl Strategy<Value = (String, String)> {
    let key = "sk-[A-Za-z0-9]{20,40}";
    let filler = "[a-z0-9 .,:;!?é日\"\\\\{}\n-]";
    let before = prop_oneof![
        proptest::collection::vec(proptest::string::string_regex(filler).unwrap(), 0..400),
        proptest::collection::vec(proptest::string::string_regex(filler).unwrap(), 170..230),
    ];
    let after = proptest::collection::vec(proptest::string::string_regex(filler).unwrap(), 0..300);
    (key, before, after).prop_map(|(key, before, after)| {
        let text = format!("{}{key}{}", before.concat(), after.concat());
        (key, text)
    })
}

fn request() -> AnthropicRequest {
    serde_json::from_value(json!({
        "model": "claude-test", "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }))
    .unwrap()
}

fn ask() -> SummaryRequest<'static> {
    SummaryRequest {
        field: "ci_log",
        text: "step 3 failed",
        target_tokens: 40,
    }
}

fn status(code: u16, body: String) -> Reply {
    Reply::Status {
        status: code,
        body,
        retry_after: None,
    }
}

/// The error bodies and 2xx answers a server could echo `text` in, for one HTTP exchange.
fn answers(text: &str) -> Vec<Reply> {
    let error = |kind: &str, message: &str| {
        json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
    };
    vec![
        status(400, error("invalid_request_error", text)),
        status(401, error(text, "bad key")),
        status(403, text.to_owned()),
        Reply::Raw(text.to_owned()),
        // A reply whose value is in the wrong place: serde's reason quotes it.
        Reply::Raw(json!({"id": 5, "model": text, "choices": text, "content": text}).to_string()),
        Reply::Raw(json!({"choices": [{"index": 0, "message": {"role": "assistant", "refusal": text}, "finish_reason": "stop"}], "id": "c", "object": "chat.completion", "created": 1, "model": "m"}).to_string()),
        Reply::Raw(json!({"id": "m", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": "end_turn", "stop_sequence": null, "usage": text}).to_string()),
    ]
}

const START: &str = r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}"#;
const TEXT_START: &str =
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
const STOP: &str = r#"{"type":"content_block_stop","index":0}"#;
const END: &str = r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}"#;
const MESSAGE_STOP: &str = r#"{"type":"message_stop"}"#;

/// A stream of these events' data, each under its own `type` as its `event:` name.
fn sse(events: &[String]) -> String {
    let mut out = String::new();
    for data in events {
        let name = serde_json::from_str::<serde_json::Value>(data)
            .ok()
            .and_then(|v| v["type"].as_str().map(str::to_owned))
            .filter(|name| !name.contains(['\n', '\r']))
            .unwrap_or_else(|| "x".to_owned());
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    out
}

/// The streams a server could echo `text` in, once the stream began (or first of all).
fn streams(text: &str) -> Vec<Reply> {
    let t = serde_json::to_string(text).unwrap();
    let one_line: String = text.replace(['\n', '\r'], " ");
    let began = |more: &[String]| {
        let mut events = vec![START.to_owned()];
        events.extend_from_slice(more);
        Reply::Sse(sse(&events))
    };
    let whole = [
        TEXT_START.to_owned(),
        STOP.to_owned(),
        END.to_owned(),
        MESSAGE_STOP.to_owned(),
    ];
    let error = format!(r#"{{"type":"error","error":{{"type":{t},"message":{t}}}}}"#);
    vec![
        // A streamed error, first and after the reply began.
        Reply::Sse(sse(std::slice::from_ref(&error))),
        began(&[TEXT_START.to_owned(), error]),
        // An `event:` name other than its data's type.
        Reply::Sse(format!("event: {one_line}\ndata: {START}\n\n")),
        // A delta type nobody knows, a delta the block cannot take, a block start that does
        // not read, a block that is not one whole (thinking never signed), a value of the
        // wrong kind in the message.
        began(&[
            TEXT_START.to_owned(),
            format!(r#"{{"type":"content_block_delta","index":0,"delta":{{"type":{t}}}}}"#),
        ]),
        began(&[
            format!(r#"{{"type":"content_block_start","index":0,"content_block":{{"type":{t}}}}}"#),
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#.to_owned(),
        ]),
        began(&[format!(
            r#"{{"type":"content_block_start","index":{t},"content_block":{{"type":"text","text":""}}}}"#
        )]),
        began(&[
            format!(r#"{{"type":"content_block_start","index":0,"content_block":{{"type":"thinking","thinking":{t}}}}}"#),
            STOP.to_owned(),
            END.to_owned(),
            MESSAGE_STOP.to_owned(),
        ]),
        began(&[
            format!(r#"{{"type":"message_delta","delta":{{"usage":{t}}}}}"#),
            MESSAGE_STOP.to_owned(),
        ]),
        // After message_stop: an event with a type, and a known one that does not read.
        began(&[whole.to_vec(), vec![format!(r#"{{"type":{t}}}"#)]].concat()),
        began(
            &[
                whole.to_vec(),
                vec![format!(r#"{{"type":"content_block_start","index":{t}}}"#)],
            ]
            .concat(),
        ),
    ]
}

fn cases() -> ProptestConfig {
    ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn no_client_error_holds_the_key((key, text) in echoed()) {
        let server = FakeOpenAi::start([]).unwrap();
        let anthropic = AnthropicClient::new(key.clone())
            .base_url(server.root_url())
            .max_retries(0)
            .timeout(Duration::from_secs(5));
        let openai = OpenAiClient::new(key.clone())
            .base_url(server.base_url())
            .max_retries(0)
            .timeout(Duration::from_secs(5));
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        for (n, reply) in answers(&text).into_iter().enumerate() {
            // Every answer is an error on every path (so every check below runs), but the
            // refusal (6th): a chat completion that reads.
            server.push([reply.clone()]);
            let error = block_on(anthropic.send(&request())).expect_err("send");
            assert_clean("AnthropicClient::send", &error, &key);
            server.push([reply.clone()]);
            let error = block_on(anthropic.stream(&request())).expect_err("stream");
            assert_clean("AnthropicClient::stream (status)", &error, &key);
            server.push([reply]);
            match block_on(openai.chat(&body)) {
                Err(error) => assert_clean("OpenAiClient::chat", &error, &key),
                Ok(_) => prop_assert_eq!(n, 5, "answer {} read as a chat completion", n),
            }
        }
    }

    #[test]
    fn no_stream_error_holds_the_key((key, text) in echoed()) {
        let server = FakeOpenAi::start([]).unwrap();
        let client = AnthropicClient::new(key.clone())
            .base_url(server.root_url())
            .max_retries(0)
            .timeout(Duration::from_secs(5));
        for (n, reply) in streams(&text).into_iter().enumerate() {
            server.push([reply]);
            let result = block_on(client.stream(&request()));
            // The last stream ends after message_stop with a known event that does not read.
            if n != 8 {
                prop_assert!(result.is_err(), "stream {} assembled", n);
            }
            if let Err(error) = result {
                assert_clean(&format!("AnthropicClient::stream (events, {n})"), &error, &key);
            }
        }
    }

    #[test]
    fn no_summarizer_error_holds_the_key((key, text) in echoed()) {
        let server = FakeOpenAi::start([]).unwrap();
        let openai = OpenAiSummarizer::new("m")
            .base_url(server.base_url())
            .api_key(key.clone())
            .max_retries(0);
        let anthropic = AnthropicSummarizer::new("claude-test")
            .base_url(server.root_url())
            .api_key(key.clone())
            .max_retries(0);
        for reply in answers(&text) {
            server.push([reply.clone()]);
            let result = block_on(openai.summarize(ask()));
            prop_assert!(result.is_err());
            if let Err(error) = result {
                assert_clean("OpenAiSummarizer", &error, &key);
            }
            server.push([reply]);
            let result = block_on(anthropic.summarize(ask()));
            prop_assert!(result.is_err());
            if let Err(error) = result {
                assert_clean("AnthropicSummarizer", &error, &key);
            }
        }
    }
}
