//! Streamed Responses API replies (features `openai-responses` and `openai`): the recorded
//! event streams (a reasoning item and a function call; a text message), split at every byte,
//! assemble into the `Response` the non-streamed call returns; their text and arguments
//! deltas make the items when `response.completed` carries none; `response.failed`,
//! `response.incomplete` and `error` end the stream with a typed error that says whether to try
//! again; and `OpenAiClient::responses_stream` on the loopback server, a cut stream made again.

use compaction::block_on;
use compaction::openai::async_openai::types::responses::Response;
use compaction::openai::{
    OpenAiClient, OpenAiClientError, ResponsesStreamAssembler, ResponsesStreamError,
};
use compaction_fixtures::openai_server::{FakeOpenAi, Reply};
use serde_json::{json, Value};
use std::time::Duration;

const TOOL_SSE: &str = include_str!("../fixtures/openai/responses_stream_tool_call.sse");
const TOOL_JSON: &str = include_str!("../fixtures/openai/responses_output.json");
const TEXT_SSE: &str = include_str!("../fixtures/openai/responses_stream_text.sse");
const TEXT_JSON: &str = include_str!("../fixtures/openai/responses_stream_text.json");
const KEY: &str = "sk-test-responses-0123456789";

/// The non-streamed reply, as `responses` reads it (a `usage` block not in async-openai's
/// shape left out).
fn whole(json: &str) -> Value {
    let mut reply: Value = serde_json::from_str(json).unwrap();
    let read = serde_json::from_value::<Response>(reply.clone()).or_else(|_| {
        reply.as_object_mut().unwrap().remove("usage");
        serde_json::from_value::<Response>(reply)
    });
    serde_json::to_value(read.unwrap()).unwrap()
}

fn assemble(parts: &[&str]) -> Result<Value, ResponsesStreamError> {
    let mut assembler = ResponsesStreamAssembler::new();
    for part in parts {
        assembler.push_sse(part)?;
    }
    Ok(serde_json::to_value(assembler.finish()?).unwrap())
}

#[test]
fn each_recorded_stream_split_at_every_byte_is_the_whole_reply() {
    for (sse, json) in [(TOOL_SSE, TOOL_JSON), (TEXT_SSE, TEXT_JSON)] {
        let expected = whole(json);
        for at in 0..=sse.len() {
            if !sse.is_char_boundary(at) {
                continue;
            }
            let got = assemble(&[&sse[..at], &sse[at..]]).unwrap();
            assert_eq!(got, expected, "split at byte {at}");
        }
    }
}

/// A server whose `response.completed` carries no output (a slim one): the items are the
/// added items with their text and arguments deltas applied, byte for byte.
#[test]
fn the_deltas_make_the_items_when_completed_carries_none() {
    for (sse, json) in [(TOOL_SSE, TOOL_JSON), (TEXT_SSE, TEXT_JSON)] {
        let slim: String = sse
            .split("\n\n")
            .filter(|event| !event.contains("response.output_item.done"))
            .map(|event| {
                if event.contains("\"response.completed\"") {
                    let data = event.split_once("data: ").unwrap().1;
                    let mut value: Value = serde_json::from_str(data).unwrap();
                    value["response"]["output"] = json!([]);
                    format!("event: response.completed\ndata: {value}")
                } else {
                    event.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        let got = assemble(&[&slim]).unwrap();
        let expected = whole(json);
        // The added items' own status (`in_progress`) stays: only their text is the deltas'.
        for (item, want) in got["output"]
            .as_array()
            .unwrap()
            .iter()
            .zip(expected["output"].as_array().unwrap())
        {
            assert_eq!(item["arguments"], want["arguments"]);
            assert_eq!(item["content"][0]["text"], want["content"][0]["text"]);
            assert_eq!(item["encrypted_content"], want["encrypted_content"]);
        }
    }
}

#[test]
fn an_ended_response_is_a_typed_error_that_says_whether_to_try_again() {
    let created = TOOL_SSE.split("\n\n").next().unwrap();
    let cases = [
        (
            json!({"type": "response.failed", "response": {"status": "failed",
                "error": {"code": "server_error", "message": "try again"}}}),
            true,
        ),
        (
            json!({"type": "response.incomplete", "response": {"status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"}}}),
            false,
        ),
        (
            json!({"type": "error", "code": "invalid_prompt", "message": "no"}),
            false,
        ),
    ];
    for (end, retryable) in cases {
        let stream = format!("{created}\n\ndata: {end}\n\n");
        let error = assemble(&[&stream]).unwrap_err();
        assert!(
            matches!(error, ResponsesStreamError::Ended { .. }),
            "{error:?}"
        );
        assert_eq!(error.is_retryable(), retryable, "{error:?}");
    }
    // Cut before `response.completed`, and an unknown event type skipped.
    let cut = &TOOL_SSE[..TOOL_SSE.find("event: response.completed").unwrap()];
    assert_eq!(assemble(&[cut]), Err(ResponsesStreamError::Incomplete));
    assert!(ResponsesStreamError::Incomplete.is_retryable());
    let future = format!(
        "data: {}\n\n{TOOL_SSE}",
        json!({"type": "response.future_thing"})
    );
    assert_eq!(assemble(&[&future]).unwrap(), whole(TOOL_JSON));
}

#[test]
fn responses_stream_returns_what_responses_returns_and_makes_a_cut_stream_again() {
    let server = FakeOpenAi::start([
        Reply::Sse(TOOL_SSE[..TOOL_SSE.len() / 2].to_owned()),
        Reply::Sse(TOOL_SSE.to_owned()),
    ])
    .unwrap();
    let client = OpenAiClient::new(KEY)
        .base_url(server.base_url())
        .timeout(Duration::from_secs(5))
        .max_backoff(Duration::from_secs(1));
    let body = json!({"model": "o4-mini", "input": "Why does the test fail?"});
    let reply = block_on(client.responses_stream(&body)).unwrap();
    assert_eq!(serde_json::to_value(reply).unwrap(), whole(TOOL_JSON));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].path, "/v1/responses");
    assert_eq!(requests[1].json()["stream"], true);

    // The server fails the response echoing the key: final, the key scrubbed.
    let created = TOOL_SSE.split("\n\n").next().unwrap();
    let failed = json!({"type": "response.failed", "response": {"status": "failed",
        "error": {"code": "invalid_prompt", "message": format!("bad key {KEY}")}}});
    let server =
        FakeOpenAi::start([Reply::Sse(format!("{created}\n\ndata: {failed}\n\n"))]).unwrap();
    let client = client.base_url(server.base_url());
    let error = block_on(client.responses_stream(&body)).unwrap_err();
    assert!(
        matches!(error, OpenAiClientError::ResponsesStream { .. }),
        "{error:?}"
    );
    assert!(!error.is_retryable());
    assert!(!format!("{error} {error:?}").contains(KEY), "{error:?}");
}
