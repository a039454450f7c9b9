//! `AnthropicClient` against the scripted loopback server's Messages API route (issue 31 item
//! 1, feature `anthropic`; real HTTP, no network): whole and streamed replies equal to the
//! recorded non-streamed one, 429 / 529 / 5xx / refused connections retried honouring
//! `retry-after`, a failed stream retried from the start when the same request may succeed,
//! typed errors that never hold the key and say whether a call may succeed again.

use compaction::anthropic::{
    from_anthropic_response, AnthropicClient, AnthropicClientError, AnthropicRequest,
    AnthropicResponse, AnthropicStreamError, StreamAssembler,
};
use compaction_fixtures::openai_server::{FakeOpenAi, Reply};
use serde_json::json;
use std::time::{Duration, Instant};

const KEY: &str = "sk-ant-test-key-0123456789";
const TOOL_SSE: &str = include_str!("../fixtures/anthropic/stream_tool_use.sse");
const TOOL_JSON: &str = include_str!("../fixtures/anthropic/stream_tool_use.json");
const THINKING_SSE: &str = include_str!("../fixtures/anthropic/stream_thinking.sse");

fn client(server: &FakeOpenAi) -> AnthropicClient {
    AnthropicClient::new(KEY)
        .base_url(server.root_url())
        .timeout(Duration::from_secs(5))
        .max_retries(3)
        .max_backoff(Duration::from_secs(2))
}

/// A request with a tool input whose bytes a `Value` round trip would change.
fn request() -> AnthropicRequest {
    serde_json::from_value(json!({
        "model": "claude-opus-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "What is the weather like in San Francisco?"}],
    }))
    .unwrap()
}

fn recorded() -> AnthropicResponse {
    serde_json::from_str(TOOL_JSON).unwrap()
}

fn text(response: &AnthropicResponse) -> String {
    serde_json::to_string(response).unwrap()
}

fn anthropic_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::Status {
        status,
        body: json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
        retry_after: None,
    }
}

#[test]
fn send_retries_429_529_and_5xx_then_returns_the_reply() {
    let server = FakeOpenAi::start([
        Reply::overloaded(Some("0")),
        Reply::rate_limited("0"),
        anthropic_error(500, "api_error", "Internal server error"),
        Reply::Raw(TOOL_JSON.to_owned()),
    ])
    .unwrap();
    let reply = compaction::block_on(client(&server).send(&request())).unwrap();
    assert_eq!(text(&reply), text(&recorded()));
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for sent in &requests {
        assert_eq!(sent.path, "/v1/messages");
        assert_eq!(sent.api_key.as_deref(), Some(KEY));
        assert_eq!(sent.body, serde_json::to_string(&request()).unwrap());
    }
    // What the session takes.
    let message = from_anthropic_response(&reply).unwrap();
    assert_eq!(
        message.tool_calls[0].arguments.as_str(),
        r#"{"location": "San Francisco, CA"}"#
    );
}

#[test]
fn a_wait_is_what_retry_after_asks() {
    let server =
        FakeOpenAi::start([Reply::overloaded(Some("1")), Reply::Raw(TOOL_JSON.into())]).unwrap();
    let started = Instant::now();
    compaction::block_on(client(&server).send(&request())).unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    // Asking for more than max_backoff ends the call at once, with the provider's error.
    let server =
        FakeOpenAi::start([Reply::overloaded(Some("60")), Reply::Raw(TOOL_JSON.into())]).unwrap();
    let error = compaction::block_on(client(&server).send(&request())).unwrap_err();
    assert_eq!(
        error,
        AnthropicClientError::Http {
            status: 529,
            error_type: Some("overloaded_error".into()),
            message: "Overloaded".into(),
        }
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn retries_are_bounded_and_other_4xx_are_not_retried() {
    let server = FakeOpenAi::start((0..10).map(|_| Reply::overloaded(Some("0")))).unwrap();
    let error = compaction::block_on(client(&server).max_retries(2).send(&request())).unwrap_err();
    assert!(
        matches!(error, AnthropicClientError::Http { status: 529, .. }),
        "{error}"
    );
    assert_eq!(server.request_count(), 3);

    // A 400 that echoes the key: the error names the provider's type and message, never the key.
    let echo = format!("x-api-key {KEY} is not valid for model claude-opus-5");
    let server = FakeOpenAi::start([anthropic_error(400, "invalid_request_error", &echo)]).unwrap();
    let error = compaction::block_on(client(&server).send(&request())).unwrap_err();
    let AnthropicClientError::Http {
        status,
        error_type,
        message,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!(
        (*status, error_type.as_deref()),
        (400, Some("invalid_request_error"))
    );
    assert!(
        message.contains("<api key>") && message.contains("claude-opus-5"),
        "{message}"
    );
    assert!(!format!("{error} {error:?}").contains(KEY));
    assert_eq!(server.request_count(), 1);

    // A 200 that is not a reply.
    let server = FakeOpenAi::start([Reply::Raw("<html>maintenance</html>".into())]).unwrap();
    let error = compaction::block_on(client(&server).send(&request())).unwrap_err();
    assert!(
        matches!(error, AnthropicClientError::Malformed { .. }),
        "{error}"
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn stream_sends_stream_true_and_assembles_what_send_returns() {
    let server = FakeOpenAi::start([
        anthropic_error(503, "api_error", "unavailable"),
        Reply::Sse(TOOL_SSE.to_owned()),
    ])
    .unwrap();
    let reply = compaction::block_on(client(&server).stream(&request())).unwrap();
    assert_eq!(text(&reply), text(&recorded()));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The request's own bytes, with the flag first.
    let plain = serde_json::to_string(&request()).unwrap();
    assert_eq!(
        requests[1].body,
        format!("{{\"stream\":true,{}", &plain[1..])
    );

    let server = FakeOpenAi::start([Reply::Sse(THINKING_SSE.to_owned())]).unwrap();
    let reply = compaction::block_on(client(&server).stream(&request())).unwrap();
    assert_eq!(reply, StreamAssembler::assemble(THINKING_SSE).unwrap());
}

/// An `error` event of `kind`, as Anthropic streams it after the 200.
fn error_event(kind: &str) -> String {
    let data = json!({"type": "error", "error": {"type": kind, "message": "went wrong"}});
    format!("event: error\ndata: {data}\n\n")
}

/// `stream` hands nothing out before the whole reply: a stream that failed where the same
/// request may succeed (an overload or server error event, a cut connection) is made again
/// from the start, at any event, within `max_retries`; a stream that is wrong in itself (the
/// provider refused the request, a malformed event) is an error at once.
#[test]
fn a_failed_stream_is_retried_from_the_start_when_it_may_succeed() {
    let began = TOOL_SSE.find("event: content_block_start").unwrap();
    let late = TOOL_SSE.find("event: message_delta").unwrap();
    let retried = [
        // The streamed 529 as the first thing sent.
        error_event("overloaded_error"),
        // The same after the reply began, and a server error late in the stream.
        format!("{}{}", &TOOL_SSE[..began], error_event("overloaded_error")),
        format!("{}{}", &TOOL_SSE[..late], error_event("api_error")),
        // The connection closed before `message_stop`, mid-event too.
        TOOL_SSE[..late].to_owned(),
        TOOL_SSE[..late + 9].to_owned(),
    ];
    for failed in retried {
        let server =
            FakeOpenAi::start([Reply::Sse(failed.clone()), Reply::Sse(TOOL_SSE.to_owned())])
                .unwrap();
        let reply = compaction::block_on(client(&server).stream(&request()))
            .unwrap_or_else(|e| panic!("{e:?} after {failed:?}"));
        assert_eq!(text(&reply), text(&recorded()));
        assert_eq!(server.request_count(), 2, "{failed:?}");
    }

    // Every attempt overloaded mid-stream: the last error, retryable, after 1 + 3 requests.
    let overloaded = format!("{}{}", &TOOL_SSE[..began], error_event("overloaded_error"));
    let server = FakeOpenAi::start(vec![Reply::Sse(overloaded); 4]).unwrap();
    let error = compaction::block_on(client(&server).stream(&request())).unwrap_err();
    assert!(
        matches!(
            &error,
            AnthropicClientError::Stream {
                events: 2,
                source: AnthropicStreamError::Provider { .. }
            }
        ),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert_eq!(server.request_count(), 4);

    // A request the provider refuses, and a malformed event: final at once, not retryable.
    for wrong in [
        format!(
            "{}{}",
            &TOOL_SSE[..began],
            error_event("invalid_request_error")
        ),
        format!(
            "{}event: content_block_start\ndata: {{\"type\": 7}}\n\n",
            &TOOL_SSE[..began]
        ),
    ] {
        let server =
            FakeOpenAi::start([Reply::Sse(wrong.clone()), Reply::Sse(TOOL_SSE.to_owned())])
                .unwrap();
        let error = compaction::block_on(client(&server).stream(&request())).unwrap_err();
        assert!(
            matches!(&error, AnthropicClientError::Stream { .. }),
            "{error:?}"
        );
        assert!(!error.is_retryable(), "{error:?}");
        assert_eq!(server.request_count(), 1, "{wrong:?}");
    }
}

/// `is_retryable` on the errors of whole calls: a 429 or 5xx after the retries, yes; another
/// 4xx, an answer that is not a reply, an insecure URL, no.
#[test]
fn errors_say_whether_the_call_may_succeed_again() {
    let cases = [
        (anthropic_error(429, "rate_limit_error", "slow down"), true),
        (anthropic_error(500, "api_error", "oops"), true),
        (anthropic_error(400, "invalid_request_error", "no"), false),
        (anthropic_error(401, "authentication_error", "who"), false),
        (Reply::Raw("{\"not\": \"a reply\"}".into()), false),
    ];
    for (reply, retryable) in cases {
        let server = FakeOpenAi::start(vec![reply; 4]).unwrap();
        let error = compaction::block_on(client(&server).send(&request())).unwrap_err();
        assert_eq!(error.is_retryable(), retryable, "{error:?}");
    }
    let insecure = AnthropicClient::new(KEY).base_url("http://api.example.invalid");
    let error = compaction::block_on(insecure.send(&request())).unwrap_err();
    assert!(!error.is_retryable());
    assert!(!AnthropicClientError::MissingKey.is_retryable());
}

#[test]
fn refused_connections_are_retried_then_reported_and_plain_http_needs_loopback() {
    // A port with nobody listening: every attempt is refused before anything was sent.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = AnthropicClient::new(KEY)
        .base_url(format!("http://127.0.0.1:{port}"))
        .max_retries(1)
        .max_backoff(Duration::from_secs(1));
    let started = Instant::now();
    let error = compaction::block_on(client.send(&request())).unwrap_err();
    assert!(
        matches!(error, AnthropicClientError::Connect { .. }),
        "{error}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(240),
        "one backoff waited"
    );
    assert!(!format!("{error} {error:?}").contains(KEY));

    let insecure = AnthropicClient::new(KEY).base_url("http://api.example.invalid");
    assert_eq!(
        compaction::block_on(insecure.stream(&request())),
        Err(AnthropicClientError::InsecureTransport {
            host: "api.example.invalid".into()
        })
    );
}

#[test]
fn from_env_reads_the_key_and_refuses_without_one() {
    // The only test of this binary that reads these variables.
    std::env::remove_var("ANTHROPIC_API_KEY");
    assert_eq!(
        AnthropicClient::from_env().unwrap_err(),
        AnthropicClientError::MissingKey
    );
    std::env::set_var("ANTHROPIC_API_KEY", KEY);
    let client = AnthropicClient::from_env().unwrap();
    std::env::remove_var("ANTHROPIC_API_KEY");
    assert!(!format!("{client:?}").contains(KEY));
}
