//! Waits that cannot panic (issue 44 item 2; features `openai` and `anthropic`; real HTTP on
//! loopback): a 429 or 529 whose `retry-after-ms` or `Retry-After` asks for a wait no clock
//! can hold (`1e300`, `inf`, `NaN`, negative) ends the call at once with its typed error,
//! after one request, as docs/models.md says of a wait over `max_backoff`; never a panic in the
//! transport's thread re-raised in the caller. The same for both clients and both summarizers,
//! and `Retry-After` as an HTTP-date is waited (a date past is no wait, one far ahead is
//! refused).

use compaction::anthropic::{
    AnthropicClient, AnthropicClientError, AnthropicRequest, AnthropicSummarizer,
};
use compaction::openai::{OpenAiClient, OpenAiClientError, OpenAiSummarizer};
use compaction::{block_on, Summarizer, SummarizerError, SummaryRequest};
use compaction_fixtures::openai_server::{FakeOpenAi, Reply};
use serde_json::json;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Values of `retry-after-ms` no wait can be made of: each must end the call at once.
const UNWAITABLE_MS: [&str; 6] = ["1e300", "inf", "-inf", "NaN", "-5", "1e20"];
/// Values of `Retry-After` (seconds, or a date) that cannot be waited.
const UNWAITABLE_S: [&str; 4] = ["1e300", "-1", "NaN", "Fri, 31 Dec 9999 23:59:59 GMT"];
/// Longer than any of these calls may take: a call that waited (or sent again) would not fit.
const PROMPT: Duration = Duration::from_secs(2);

fn status(code: u16, header: &str, value: &str) -> Reply {
    let body = if code == 529 {
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    } else {
        json!({"error": {"message": "Rate limit reached", "type": "requests"}})
    };
    Reply::StatusWith {
        status: code,
        body: body.to_string(),
        headers: vec![(header.to_owned(), value.to_owned())],
    }
}

/// Every (header, value) that must end a call at once.
fn unwaitable() -> Vec<(&'static str, &'static str)> {
    let ms = UNWAITABLE_MS.iter().map(|v| ("retry-after-ms", *v));
    ms.chain(UNWAITABLE_S.iter().map(|v| ("retry-after", *v)))
        .collect()
}

fn request() -> AnthropicRequest {
    serde_json::from_value(json!({
        "model": "claude-test",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }))
    .unwrap()
}

fn ask() -> SummaryRequest<'static> {
    SummaryRequest {
        field: "ci_log",
        text: "step 3 failed: disk full on /var",
        target_tokens: 40,
    }
}

/// Runs `call` against a server answering `reply` first, then a good reply: asserts it ended
/// promptly, after exactly one request, and returns its outcome.
fn once<T>(reply: Reply, call: impl FnOnce(&FakeOpenAi) -> T) -> T {
    let server = FakeOpenAi::start([reply]).unwrap();
    let started = Instant::now();
    let outcome = call(&server);
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    assert_eq!(server.request_count(), 1, "no second request");
    outcome
}

#[test]
fn anthropic_client_fails_at_once_on_a_wait_it_cannot_make() {
    for (header, value) in unwaitable() {
        let error = once(status(529, header, value), |server| {
            let client = AnthropicClient::new("sk-ant-test")
                .base_url(server.root_url())
                .max_backoff(Duration::from_secs(30));
            block_on(client.send(&request())).unwrap_err()
        });
        assert!(
            matches!(error, AnthropicClientError::Http { status: 529, .. }),
            "{header}: {value}: {error:?}"
        );
        let error = once(status(429, header, value), |server| {
            let client = AnthropicClient::new("sk-ant-test").base_url(server.root_url());
            block_on(client.stream(&request())).unwrap_err()
        });
        assert!(
            matches!(error, AnthropicClientError::Http { status: 429, .. }),
            "{header}: {value}: {error:?}"
        );
    }
}

#[test]
fn openai_client_fails_at_once_on_a_wait_it_cannot_make() {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    for (header, value) in unwaitable() {
        let error = once(status(429, header, value), |server| {
            let client = OpenAiClient::new("sk-test").base_url(server.base_url());
            block_on(client.chat(&body)).unwrap_err()
        });
        assert!(
            matches!(error, OpenAiClientError::Http { status: 429, .. }),
            "{header}: {value}: {error:?}"
        );
    }
}

#[test]
fn summarizers_fail_at_once_on_a_wait_they_cannot_make() {
    for (header, value) in unwaitable() {
        let error = once(status(429, header, value), |server| {
            let summarizer = OpenAiSummarizer::new("m")
                .base_url(server.base_url())
                .api_key("sk-test");
            block_on(summarizer.summarize(ask())).unwrap_err()
        });
        assert!(
            matches!(error, SummarizerError::Http { status: 429, .. }),
            "{header}: {value}: {error:?}"
        );
        let error = once(status(529, header, value), |server| {
            let summarizer = AnthropicSummarizer::new("claude-test")
                .base_url(server.root_url())
                .api_key("sk-ant-test");
            block_on(summarizer.summarize(ask())).unwrap_err()
        });
        assert!(
            matches!(error, SummarizerError::Http { status: 529, .. }),
            "{header}: {value}: {error:?}"
        );
    }
}

/// `SystemTime` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), written here so the test
/// does not share the parser it checks.
fn http_date(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        months[(month - 1) as usize],
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[test]
fn retry_after_as_an_http_date_is_waited() {
    let good = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1},
    })
    .to_string();
    // Two seconds ahead, written to the second: a wait of more than one second.
    let ahead = http_date(SystemTime::now() + Duration::from_secs(2));
    let past = http_date(SystemTime::now() - Duration::from_secs(3600));
    assert!(past.ends_with(" GMT") && past.len() == 29, "{past}");
    for (date, at_least) in [(ahead, Duration::from_millis(900)), (past, Duration::ZERO)] {
        let server =
            FakeOpenAi::start([status(529, "retry-after", &date), Reply::Raw(good.clone())])
                .unwrap();
        let client = AnthropicClient::new("sk-ant-test")
            .base_url(server.root_url())
            .max_backoff(Duration::from_secs(5));
        let started = Instant::now();
        block_on(client.send(&request())).unwrap();
        let waited = started.elapsed();
        assert!(waited >= at_least, "{date}: {waited:?}");
        assert!(waited < Duration::from_secs(4), "{date}: {waited:?}");
        assert_eq!(server.request_count(), 2);
    }
}
