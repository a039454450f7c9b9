//! `AnthropicSummarizer` against the scripted loopback server's Messages API route (real HTTP,
//! no network): the request it sends, retries honouring Retry-After, a 529, a timeout, a cut or
//! over-long answer asked once more, typed errors; and a compaction through it whose requests
//! carry no protected value, effect key or opaque reasoning part.

use compaction::anthropic::{AnthropicSummarizer, ClaudeEstimate};
use compaction::transcript::OpaquePart;
use compaction::{
    Compactable, Compactor, Effect, EffectLog, Message, Summarizer, SummarizerError,
    SummaryRequest, ToolCall, Transcript,
};
use compaction_fixtures::openai_server::{FakeOpenAi, Reply};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::{Duration, Instant};

const TEXT: &str = "step 1 ok\nstep 2 ok\nstep 3 failed: disk full on /var\n";

fn summarizer(server: &FakeOpenAi) -> AnthropicSummarizer {
    AnthropicSummarizer::new("claude-test")
        .base_url(server.root_url())
        .api_key("sk-ant-test")
        .timeout(Duration::from_secs(5))
        .max_retries(2)
        .max_backoff(Duration::from_secs(3))
}

async fn ask(s: &AnthropicSummarizer, target: usize) -> Result<String, SummarizerError> {
    s.summarize(SummaryRequest {
        field: "ci_log",
        text: TEXT,
        target_tokens: target,
    })
    .await
}

fn anthropic_error(status: u16, kind: &str, message: &str, retry_after: Option<&str>) -> Reply {
    Reply::Status {
        status,
        body: json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
        retry_after: retry_after.map(str::to_owned),
    }
}

#[tokio::test]
async fn success_sends_one_messages_request_with_the_target() {
    let fake = FakeOpenAi::start([Reply::summary("CI failed at step 3: disk full.")]).unwrap();
    assert_eq!(
        ask(&summarizer(&fake), 40).await.unwrap(),
        "CI failed at step 3: disk full."
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.api_key.as_deref(), Some("sk-ant-test"));
    assert_eq!(request.authorization, None);
    let body = request.json();
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 40);
    assert!(body["system"].as_str().unwrap().contains("summaries"));
    let user = body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(body["messages"][0]["role"], "user");
    assert!(user.contains("`ci_log`") && user.contains(TEXT));
}

#[tokio::test]
async fn overloaded_and_rate_limited_answers_are_retried_then_typed() {
    let fake = FakeOpenAi::start([
        anthropic_error(529, "overloaded_error", "Overloaded", None),
        anthropic_error(429, "rate_limit_error", "slow down", Some("1")),
        Reply::summary("ok"),
    ])
    .unwrap();
    let started = Instant::now();
    assert_eq!(ask(&summarizer(&fake), 40).await.unwrap(), "ok");
    assert!(started.elapsed() >= Duration::from_millis(1000));
    assert_eq!(fake.request_count(), 3);

    let fake = FakeOpenAi::start([
        anthropic_error(529, "overloaded_error", "Overloaded", None),
        anthropic_error(529, "overloaded_error", "Overloaded", None),
        anthropic_error(529, "overloaded_error", "Overloaded", None),
    ])
    .unwrap();
    match ask(&summarizer(&fake), 40).await {
        Err(SummarizerError::Http {
            status: 529, body, ..
        }) => {
            assert_eq!(body, "overloaded_error: Overloaded")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.request_count(), 3, "1 + max_retries");
}

#[tokio::test]
async fn client_errors_timeouts_and_bad_answers_are_typed_and_not_retried() {
    let fake = FakeOpenAi::start([anthropic_error(
        400,
        "invalid_request_error",
        "max_tokens: too large",
        None,
    )])
    .unwrap();
    assert!(matches!(
        ask(&summarizer(&fake), 40).await,
        Err(SummarizerError::Http { status: 400, ref body, .. }) if body.contains("max_tokens: too large")
    ));
    assert_eq!(fake.request_count(), 1);

    let fake = FakeOpenAi::start([Reply::Slow {
        delay: Duration::from_secs(2),
        summary: "late".into(),
    }])
    .unwrap();
    let quick = summarizer(&fake).timeout(Duration::from_millis(300));
    assert!(matches!(
        ask(&quick, 40).await,
        Err(SummarizerError::Timeout { .. })
    ));
    assert_eq!(fake.request_count(), 1);

    for raw in [
        "not json".to_owned(),
        json!({"id": "m", "role": "assistant", "model": "x", "content": [], "stop_reason": "end_turn"}).to_string(),
        json!({"id": "m", "role": "assistant", "model": "x", "content": [{"type": "text", "text": "no"}], "stop_reason": "refusal"}).to_string(),
    ] {
        let fake = FakeOpenAi::start([Reply::Raw(raw.clone())]).unwrap();
        assert!(matches!(ask(&summarizer(&fake), 40).await, Err(SummarizerError::Malformed { .. })), "{raw}");
        assert_eq!(fake.request_count(), 1);
    }
}

#[tokio::test]
async fn a_cut_or_over_long_answer_is_asked_once_more_then_over_long() {
    let long = "The CI run had many steps, all described here at length. ".repeat(20);
    let fake = FakeOpenAi::start([
        Reply::summary(long.clone()),
        Reply::summary("CI: disk full."),
    ])
    .unwrap();
    assert_eq!(ask(&summarizer(&fake), 30).await.unwrap(), "CI: disk full.");
    let second = fake.requests()[1].json();
    assert!(second["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("previous summary had"));

    let fake =
        FakeOpenAi::start([Reply::Truncated("CI".into()), Reply::Truncated("C".into())]).unwrap();
    assert!(matches!(
        ask(&summarizer(&fake), 30).await,
        Err(SummarizerError::OverLong { .. })
    ));
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_typed() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let s = AnthropicSummarizer::new("m")
        .base_url(format!("http://127.0.0.1:{port}"))
        .max_retries(1)
        .timeout(Duration::from_secs(2));
    assert!(matches!(
        ask(&s, 40).await,
        Err(SummarizerError::Failed { ref message, .. }) if message.contains("cannot connect")
    ));
}

#[derive(Compactable, Serialize, Deserialize)]
struct Agent {
    #[protected]
    customer: String,
    #[effect(idempotent = false)]
    refunds: EffectLog,
    #[transcript(keep_recent = 1)]
    chat: Transcript,
}

const CUSTOMER: &str = "cus_SECRET_4242";
const SIGNATURE: &str = "EqQBsignatureNeverToASummarizer==";
const THINKING: &str = "private chain of thought 7f3a";

#[test]
fn no_request_carries_protected_state_effect_records_or_opaque_parts() {
    let fake = FakeOpenAi::start([]).unwrap();
    let mut chat = Transcript::new();
    let mut refunds = EffectLog::new();
    for turn in 0..12 {
        chat.push(Message::user(format!("turn {turn}: refund the next order")));
        let key = format!("refund-key-{turn}");
        refunds
            .record(Effect::new(&key, "refund", format!("order-{turn}")))
            .unwrap();
        let call =
            ToolCall::new(format!("c{turn}"), "refund", json!({"order": turn})).with_effect(&key);
        let parts = [OpaquePart::anthropic_thinking(
            format!("{THINKING} {turn}"),
            SIGNATURE,
        )];
        chat.push(Message::assistant_with_tools("Refunding.", vec![call]).with_opaque(parts));
        chat.push(Message::tool_result(
            format!("c{turn}"),
            "refund accepted\n".repeat(60),
        ));
        chat.push(Message::assistant(format!("Turn {turn} done.")));
    }
    for key in (0..12).map(|t| format!("refund-key-{t}")) {
        refunds.begin(&key).unwrap();
        refunds.commit(&key).unwrap();
    }
    let agent = Agent {
        customer: CUSTOMER.into(),
        refunds,
        chat,
    };
    let compactor = Compactor::builder()
        .budget(2_500)
        .token_counter(ClaudeEstimate::default())
        .summarizer(summarizer(&fake).token_counter(ClaudeEstimate::default()))
        .build()
        .unwrap();
    let compacted = compactor.compact_blocking(&agent).unwrap();
    assert!(compacted.tokens() <= 2_500);
    let requests = fake.requests();
    assert!(!requests.is_empty(), "the summarizer was asked");
    for request in requests {
        for secret in [
            CUSTOMER,
            SIGNATURE,
            THINKING,
            "refund-key-",
            "redacted_thinking",
        ] {
            assert!(
                !request.body.contains(secret),
                "a request carried {secret:?}"
            );
        }
    }
}

/// `x-api-key` goes over plain http only to loopback or a host opted in by name; any other
/// host is refused before a connection (a `.invalid` name: nothing is contacted).
#[tokio::test]
async fn the_key_goes_over_plain_http_only_to_loopback_or_an_opted_in_host() {
    let refused = AnthropicSummarizer::new("claude-test")
        .base_url("http://example.invalid")
        .api_key("sk-ant-must-not-leak")
        .max_retries(0);
    let got = ask(&refused, 40).await;
    let Err(err @ SummarizerError::InsecureTransport { .. }) = got else {
        panic!("{got:?}");
    };
    let message = err.to_string();
    assert!(message.contains("https://example.invalid"), "{message}");
    assert!(
        message.contains(".allow_insecure_http_to(\"example.invalid\")"),
        "{message}"
    );
    assert!(!message.contains("sk-ant-must-not-leak"));

    let fake = FakeOpenAi::start([Reply::summary("a"), Reply::summary("b")]).unwrap();
    let port = fake.root_url().rsplit(':').next().unwrap().to_owned();
    assert!(ask(&summarizer(&fake), 40).await.is_ok(), "127.0.0.1");
    let opted = summarizer(&fake)
        .base_url(format!("http://127.1:{port}"))
        .allow_insecure_http_to("127.1");
    assert!(ask(&opted, 40).await.is_ok());
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests
        .iter()
        .all(|r| r.api_key.as_deref() == Some("sk-ant-test")));
}
