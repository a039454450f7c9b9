//! `OpenAiSummarizer` against a scripted OpenAI-compatible server on loopback (real HTTP, no
//! network): every scripted case (success, 429 with Retry-After, 5xx, a slow answer, malformed
//! JSON, an over-long then a good summary, a 400 with a body, refused connections) ends in its
//! documented outcome, with a bounded request count and time.

use compaction::openai::OpenAiSummarizer;
use compaction::{
    Compactable, CompactionError, Compactor, Summarizer, SummarizerError, SummaryRequest, Tokenizer,
};
use compaction_fixtures::openai_server::{FakeOpenAi, Reply};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

const TEXT: &str = "step 1 ok\nstep 2 ok\nstep 3 failed: disk full on /var\n";

fn server(script: impl IntoIterator<Item = Reply>) -> FakeOpenAi {
    FakeOpenAi::start(script).expect("a loopback server starts")
}

fn summarizer(server: &FakeOpenAi) -> OpenAiSummarizer {
    OpenAiSummarizer::new("fake-model")
        .base_url(server.base_url())
        .api_key("sk-test-key")
        .timeout(Duration::from_secs(5))
        .max_retries(2)
        .max_backoff(Duration::from_secs(3))
}

async fn ask(s: &OpenAiSummarizer, target: usize) -> Result<String, SummarizerError> {
    s.summarize(SummaryRequest {
        field: "ci_log",
        text: TEXT,
        target_tokens: target,
    })
    .await
}

#[tokio::test]
async fn success_sends_one_chat_request_with_the_target() {
    let fake = server([Reply::summary("CI failed at step 3: disk full on /var.")]);
    let got = ask(&summarizer(&fake), 40).await;
    assert_eq!(got.unwrap(), "CI failed at step 3: disk full on /var.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.authorization.as_deref(), Some("Bearer sk-test-key"));
    let body = request.json();
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["max_completion_tokens"], 40);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["role"], "user");
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("`ci_log`") && user.contains("at most 40 tokens"));
    assert!(user.contains(TEXT), "{user}");
}

#[tokio::test]
async fn rate_limit_waits_what_retry_after_says_then_succeeds() {
    let fake = server([Reply::rate_limited("1"), Reply::summary("short")]);
    let started = Instant::now();
    let got = ask(&summarizer(&fake), 40).await;
    let elapsed = started.elapsed();
    assert_eq!(got.unwrap(), "short");
    assert_eq!(fake.request_count(), 2);
    assert!(elapsed >= Duration::from_secs(1), "waited only {elapsed:?}");
    assert!(elapsed < Duration::from_secs(4), "took {elapsed:?}");
}

#[tokio::test]
async fn retry_after_longer_than_max_backoff_fails_at_once() {
    let fake = server([Reply::rate_limited("120"), Reply::summary("never asked")]);
    let started = Instant::now();
    let got = ask(&summarizer(&fake), 40).await;
    assert!(
        matches!(got, Err(SummarizerError::Http { status: 429, ref body, .. }) if body.contains("Rate limit")),
        "{got:?}"
    );
    assert_eq!(fake.request_count(), 1);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn server_errors_are_retried_up_to_the_limit_then_typed() {
    let fake = server((0..5).map(|_| Reply::Status {
        status: 500,
        body: "upstream exploded".to_owned(),
        retry_after: None,
    }));
    let started = Instant::now();
    let got = ask(&summarizer(&fake), 40).await;
    match got {
        Err(SummarizerError::Http {
            field,
            status,
            body,
        }) => {
            assert_eq!((field.as_str(), status), ("ci_log", 500));
            assert!(body.contains("upstream exploded"), "{body}");
        }
        other => panic!("expected Http 500, got {other:?}"),
    }
    // One try and max_retries (2) retries, with the backoff between them (250 ms, 500 ms).
    assert_eq!(fake.request_count(), 3);
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(700), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
}

#[tokio::test]
async fn server_error_then_success_recovers() {
    let fake = server([Reply::error(503, "overloaded"), Reply::summary("fine")]);
    assert_eq!(ask(&summarizer(&fake), 40).await.unwrap(), "fine");
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn slow_answer_past_the_timeout_is_a_timeout_not_retried() {
    let fake = server([Reply::Slow {
        delay: Duration::from_secs(3),
        summary: "too late".to_owned(),
    }]);
    let s = summarizer(&fake).timeout(Duration::from_millis(300));
    let started = Instant::now();
    let got = ask(&s, 40).await;
    assert!(
        matches!(got, Err(SummarizerError::Timeout { ref field, after }) if field == "ci_log" && after == Duration::from_millis(300)),
        "{got:?}"
    );
    assert_eq!(fake.request_count(), 1);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn malformed_answers_are_typed_with_an_excerpt() {
    let complete_but_empty = serde_json::json!({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []
    });
    for (raw, expect) in [
        ("this is not json {".to_owned(), "this is not json"),
        (complete_but_empty.to_string(), "no choice"),
    ] {
        let fake = server([Reply::Raw(raw)]);
        let got = ask(&summarizer(&fake), 40).await;
        assert!(
            matches!(got, Err(SummarizerError::Malformed { ref body, .. }) if body.contains(expect)),
            "{got:?}"
        );
        assert_eq!(fake.request_count(), 1, "malformed answers are not retried");
    }
}

#[tokio::test]
async fn over_long_summary_is_asked_once_more_tighter() {
    let long =
        "The CI run had many steps and all of them are described here at length. ".repeat(20);
    let fake = server([
        Reply::summary(long.clone()),
        Reply::summary("CI: disk full."),
    ]);
    let got = ask(&summarizer(&fake), 30).await;
    assert_eq!(got.unwrap(), "CI: disk full.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].json();
    let user = second["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("previous summary had") && user.contains("at most 20 tokens"));
    assert_eq!(second["max_completion_tokens"], 30);

    // Over long twice: OverLong with the counted tokens, after exactly two requests.
    let fake = server([Reply::summary(long.clone()), Reply::summary(long.clone())]);
    let got = ask(&summarizer(&fake), 30).await;
    let tokens = compaction::TokenCounter::count(&Tokenizer::O200kBase, &long);
    assert!(
        matches!(got, Err(SummarizerError::OverLong { tokens: t, target: 30, .. }) if t == tokens),
        "{got:?}"
    );
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn an_answer_cut_at_the_server_limit_is_never_accepted() {
    let fake = server([
        Reply::Truncated("CI failed at".to_owned()),
        Reply::Truncated("CI".to_owned()),
    ]);
    let got = ask(&summarizer(&fake), 30).await;
    assert!(
        matches!(got, Err(SummarizerError::OverLong { .. })),
        "{got:?}"
    );
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn client_error_is_typed_with_status_and_body_and_not_retried() {
    let fake = server([Reply::error(400, "model `fake-model` does not exist")]);
    let got = ask(&summarizer(&fake), 40).await;
    let error = got.unwrap_err();
    match &error {
        SummarizerError::Http { status, body, .. } => {
            assert_eq!(*status, 400);
            assert!(body.contains("does not exist"), "{body}");
        }
        other => panic!("expected Http 400, got {other:?}"),
    }
    assert!(error
        .to_string()
        .contains(".evict_on_summarizer_error(true)"));
    assert_eq!(fake.request_count(), 1);

    // A 4xx whose body is not the OpenAI error shape keeps its status too.
    let fake = server([Reply::Status {
        status: 404,
        body: "<html>no such route</html>".to_owned(),
        retry_after: None,
    }]);
    let got = ask(&summarizer(&fake), 40).await;
    assert!(
        matches!(got, Err(SummarizerError::Http { status: 404, ref body, .. }) if body.contains("no such route")),
        "{got:?}"
    );
}

#[tokio::test]
async fn empty_answer_is_empty_never_a_summary() {
    let fake = server([Reply::summary("  \n")]);
    let got = ask(&summarizer(&fake), 40).await;
    assert!(matches!(got, Err(SummarizerError::Empty { .. })), "{got:?}");
}

#[tokio::test]
async fn refused_connection_is_retried_then_typed() {
    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let s = OpenAiSummarizer::new("m")
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .max_retries(1)
        .timeout(Duration::from_secs(2));
    let started = Instant::now();
    let got = ask(&s, 40).await;
    assert!(
        matches!(got, Err(SummarizerError::Failed { ref message, .. }) if message.contains("cannot connect")),
        "{got:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[derive(Compactable, Serialize, Deserialize, Clone, Debug, Default)]
struct Ticket {
    #[protected]
    customer_id: String,
    #[redundant(summarize)]
    ci_log: String,
}

fn ticket() -> Ticket {
    Ticket {
        customer_id: "cust-7f3a9c".to_owned(),
        ci_log: TEXT.repeat(60),
    }
}

/// Through the engine, from a plain thread (no async runtime): the summary lands in the
/// window; a failing server ends compaction with the typed error, never its text as a summary.
#[test]
fn compactor_uses_the_summary_and_refuses_on_failure() {
    let fake = server([
        Reply::summary("CI: 60 runs, step 3 failed (disk full)."),
        Reply::error(400, "ERROR-TEXT-MUST-NOT-BE-A-SUMMARY"),
    ]);
    let compactor = |s: OpenAiSummarizer, evict: bool| {
        Compactor::builder()
            .budget(400)
            .token_counter(Tokenizer::O200kBase)
            .summarizer(s)
            .evict_on_summarizer_error(evict)
            .build()
            .unwrap()
    };
    let compacted = compactor(summarizer(&fake), false)
        .compact_blocking(&ticket())
        .expect("compacts with the summary");
    assert!(compacted
        .render()
        .contains("CI: 60 runs, step 3 failed (disk full)."));
    assert!(compacted.render().contains("cust-7f3a9c"));

    let err = compactor(summarizer(&fake), false)
        .compact_blocking(&ticket())
        .expect_err("a 400 ends compaction");
    assert!(
        matches!(
            err,
            CompactionError::Summarizer(SummarizerError::Http { status: 400, .. })
        ),
        "{err:?}"
    );

    fake.push([Reply::error(400, "ERROR-TEXT-MUST-NOT-BE-A-SUMMARY")]);
    let evicted = compactor(summarizer(&fake), true)
        .compact_blocking(&ticket())
        .expect("the opt-in evicts instead");
    assert!(!evicted.render().contains("ERROR-TEXT"));
    assert!(evicted.render().contains("cust-7f3a9c"));
    assert_eq!(fake.request_count(), 3);
}

/// The key goes over plain http only to loopback: any other host is refused before a
/// connection is made (a `.invalid` name: nothing is ever resolved or contacted), with the
/// error naming what to write instead; names that merely look like loopback are not loopback.
#[tokio::test]
async fn a_key_never_goes_over_plain_http_to_another_host() {
    for url in [
        "http://example.invalid/v1",
        "HTTP://Example.Invalid:8080/v1",
        "http://127.0.0.1.example.invalid/v1",
        "http://localhost.example.invalid/v1",
        "http://127.0.0.1@example.invalid/v1",
        "http://[::ffff:10.0.0.1]/v1",
    ] {
        let s = summarizer(&server([]))
            .base_url(url)
            .api_key("sk-must-not-leak")
            .max_retries(0);
        let started = Instant::now();
        let got = ask(&s, 40).await;
        let Err(err @ SummarizerError::InsecureTransport { .. }) = got else {
            panic!("{url}: {got:?}");
        };
        assert!(started.elapsed() < Duration::from_secs(1), "{url}");
        let message = err.to_string();
        assert!(
            message.contains("https://") && message.contains(".allow_insecure_http_to(\""),
            "{message}"
        );
        assert!(!message.contains("sk-must-not-leak"), "{message}");
    }
}

/// Loopback in every written form is allowed (the fixture listens on 127.0.0.1).
#[tokio::test]
async fn a_key_goes_over_plain_http_to_loopback() {
    let fake = server([Reply::summary("one"), Reply::summary("two")]);
    let port = fake.base_url().split(':').nth(2).unwrap().to_owned(); // "PORT/v1"
    for host in ["127.0.0.1", "localhost"] {
        let s = summarizer(&fake).base_url(format!("http://{host}:{port}"));
        assert!(ask(&s, 40).await.is_ok(), "{host}");
    }
    let requests = fake.requests();
    assert!(requests
        .iter()
        .all(|r| r.authorization.as_deref() == Some("Bearer sk-test-key")));
}

/// The opt-in by name lets the key go to that host only. `127.1` is loopback to the resolver
/// but not written as loopback, so it needs the opt-in, and then reaches the fixture.
#[tokio::test]
async fn the_opt_in_by_name_allows_that_host_only() {
    let fake = server([Reply::summary("fine")]);
    let port = fake.base_url().split(':').nth(2).unwrap().to_owned();
    let url = format!("http://127.1:{port}");
    let refused = ask(&summarizer(&fake).base_url(&url), 40).await;
    assert!(
        matches!(refused, Err(SummarizerError::InsecureTransport { ref host, .. }) if host == "127.1"),
        "{refused:?}"
    );
    let other = summarizer(&fake)
        .base_url(&url)
        .allow_insecure_http_to("example.invalid");
    assert!(matches!(
        ask(&other, 40).await,
        Err(SummarizerError::InsecureTransport { .. })
    ));
    assert_eq!(fake.request_count(), 0, "nothing was sent");
    let allowed = summarizer(&fake)
        .base_url(&url)
        .allow_insecure_http_to("127.1");
    assert_eq!(ask(&allowed, 40).await.unwrap(), "fine");
    assert_eq!(
        fake.requests()[0].authorization.as_deref(),
        Some("Bearer sk-test-key")
    );
    // Without a key there is nothing to protect: plain http needs no opt-in.
    fake.push([Reply::summary("keyless")]);
    if std::env::var("OPENAI_API_KEY").is_err() {
        let keyless = OpenAiSummarizer::new("m").base_url(&url);
        assert_eq!(ask(&keyless, 40).await.unwrap(), "keyless");
        assert_eq!(fake.requests()[1].authorization, None);
    }
}
