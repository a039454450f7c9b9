//! One summarizer call on the wire: the attempts, the bounded backoff honouring `Retry-After`,
//! and every failure mapped to a typed [`SummarizerError`], on a runtime of its own.
//!
//! async-openai's client is given a bare tower service (its documented middleware hook) in
//! place of its default executor, so its own retry layer never runs: this module's loop is the
//! only one, and the service records each answer's status and `Retry-After` for it.

use super::settings::Settings;
use crate::summaries::SummarizerError;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::types::chat::{
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
    CreateChatCompletionRequest, CreateChatCompletionResponse, FinishReason,
};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

/// The longest body excerpt an error carries.
const EXCERPT_CHARS: usize = 200;
/// The first wait of the exponential backoff (doubled per retry) when the server names none.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

/// One summary to fetch, owned so it can run as a task.
pub(super) struct Job {
    pub(super) settings: Arc<Settings>,
    pub(super) http: reqwest::Client,
    pub(super) field: String,
    pub(super) text: String,
    pub(super) target: usize,
}

/// The HTTP client of one summarizer: rustls on `ring`, the per-request timeout.
pub(super) fn http_client(timeout: Duration) -> Result<reqwest::Client, String> {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing the race to another thread installing one is fine: there is one now.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// The process-wide runtime the requests run on, built on first use and never shut down (so a
/// summarizer dropped inside any async context is fine).
fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("compaction-openai")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the summarizer's HTTP runtime: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Aborts the task when the caller stops waiting for it (a cancelled compaction sends no more).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `job` on the summarizer runtime; the future resolves under any executor.
pub(super) async fn run(job: Job) -> Result<String, SummarizerError> {
    let field = job.field.clone();
    let runtime = runtime().map_err(|message| SummarizerError::failed(&field, message))?;
    let mut task = AbortOnDrop(runtime.spawn(summarize(job)));
    match (&mut task.0).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(SummarizerError::failed(
            &field,
            format!("request task ended: {e}"),
        )),
    }
}

/// The call: one attempt, and once more with a tighter prompt when the answer is over target.
async fn summarize(job: Job) -> Result<String, SummarizerError> {
    let mut previous = None;
    loop {
        let (content, finish) = send_with_retries(&job, previous).await?;
        if content.trim().is_empty() {
            return Err(SummarizerError::Empty { field: job.field });
        }
        let tokens = job.settings.counter.count(&content);
        // A summary the server cut at its limit is a cut summary, even when it fits.
        let cut = finish == Some(FinishReason::Length);
        if tokens <= job.target && !cut {
            return Ok(content);
        }
        if previous.is_some() {
            return Err(SummarizerError::OverLong {
                field: job.field,
                tokens,
                target: job.target,
            });
        }
        previous = Some(tokens.max(job.target + 1));
    }
}

/// One answer's status and `Retry-After`, as the tower service saw them.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    status: Option<u16>,
    retry_after: Option<Duration>,
}

/// What one attempt ended in.
enum Attempt {
    Answer(String, Option<FinishReason>),
    /// 429, 5xx or a refused connection: worth another try after the wait, if any.
    Transient(SummarizerError, Option<Duration>),
    Fatal(SummarizerError),
}

async fn send_with_retries(
    job: &Job,
    previous: Option<usize>,
) -> Result<(String, Option<FinishReason>), SummarizerError> {
    let settings = &job.settings;
    let mut backoff = FIRST_BACKOFF;
    let mut retries = 0;
    loop {
        match attempt(job, previous).await {
            Attempt::Answer(content, finish) => return Ok((content, finish)),
            Attempt::Fatal(error) => return Err(error),
            Attempt::Transient(error, asked) => {
                if retries >= settings.max_retries {
                    return Err(error);
                }
                let wait = asked.unwrap_or(backoff);
                if wait > settings.max_backoff {
                    return Err(error);
                }
                tokio::time::sleep(wait).await;
                backoff = backoff.saturating_mul(2);
                retries += 1;
            }
        }
    }
}

async fn attempt(job: &Job, previous: Option<usize>) -> Attempt {
    let settings = &job.settings;
    let seen = Arc::new(Mutex::new(Seen::default()));
    // `OpenAIConfig::new` also reads OPENAI_ORG_ID / OPENAI_PROJECT_ID from the environment.
    let config = OpenAIConfig::new()
        .with_api_base(settings.base_url.clone())
        .with_api_key(settings.api_key.clone().unwrap_or_default());
    let client = async_openai::Client::build(job.http.clone(), config).with_http_service(Probe {
        http: job.http.clone(),
        seen: Arc::clone(&seen),
    });
    let request = CreateChatCompletionRequest {
        model: settings.model.clone(),
        messages: vec![
            ChatCompletionRequestSystemMessage::from(settings.instructions.as_str()).into(),
            ChatCompletionRequestUserMessage::from(prompt(
                &job.field, &job.text, job.target, previous,
            ))
            .into(),
        ],
        max_completion_tokens: Some(u32::try_from(job.target).unwrap_or(u32::MAX)),
        ..CreateChatCompletionRequest::default()
    };
    let result = client.chat().create(request).await;
    let seen = *seen.lock().unwrap_or_else(PoisonError::into_inner);
    match result {
        Ok(response) => answer(&job.field, response),
        Err(error) => classify(job, error, seen),
    }
}

fn answer(field: &str, response: CreateChatCompletionResponse) -> Attempt {
    let Some(choice) = response.choices.into_iter().next() else {
        return Attempt::Fatal(malformed(field, "the answer has no choice"));
    };
    if let Some(refusal) = choice.message.refusal.filter(|r| !r.trim().is_empty()) {
        return Attempt::Fatal(malformed(
            field,
            &format!("the model refused: {}", excerpt(&refusal)),
        ));
    }
    match choice.message.content {
        Some(content) => Attempt::Answer(content, choice.finish_reason),
        None => Attempt::Fatal(malformed(field, "the answer has no text content")),
    }
}

fn classify(job: &Job, error: OpenAIError, seen: Seen) -> Attempt {
    let field = job.field.clone();
    let status = seen.status;
    let http = |body: &str| SummarizerError::Http {
        field: field.clone(),
        status: status.unwrap_or_default(),
        body: excerpt(body),
    };
    let retryable = status.is_some_and(|s| s == 429 || (500..600).contains(&s));
    let successful = status.is_some_and(|s| (200..300).contains(&s));
    match error {
        OpenAIError::Reqwest(e) if e.is_timeout() => Attempt::Fatal(SummarizerError::Timeout {
            field,
            after: job.settings.timeout,
        }),
        OpenAIError::Reqwest(e) if e.is_connect() => Attempt::Transient(
            SummarizerError::failed(
                &field,
                format!(
                    "cannot connect to {}: {}",
                    job.settings.base_url,
                    e.without_url()
                ),
            ),
            None,
        ),
        OpenAIError::Reqwest(e) => Attempt::Fatal(SummarizerError::failed(
            &field,
            format!("HTTP error: {}", e.without_url()),
        )),
        OpenAIError::ApiError(api) => {
            let error = SummarizerError::Http {
                field: field.clone(),
                status: api.status_code.as_u16(),
                body: excerpt(&api.api_error.to_string()),
            };
            transient_if(retryable, error, seen.retry_after)
        }
        // A 2xx whose body is not a chat completion; or an error status with a body that is
        // not the OpenAI error shape (async-openai reports both as a deserialization error).
        OpenAIError::JSONDeserialize(_, body) if successful => {
            Attempt::Fatal(malformed(&field, &format!("not a chat completion: {body}")))
        }
        OpenAIError::JSONDeserialize(_, body) => {
            transient_if(retryable, http(&body), seen.retry_after)
        }
        other => Attempt::Fatal(SummarizerError::failed(&field, excerpt(&other.to_string()))),
    }
}

fn transient_if(retryable: bool, error: SummarizerError, wait: Option<Duration>) -> Attempt {
    if retryable {
        Attempt::Transient(error, wait)
    } else {
        Attempt::Fatal(error)
    }
}

fn malformed(field: &str, body: &str) -> SummarizerError {
    SummarizerError::Malformed {
        field: field.to_owned(),
        body: excerpt(body),
    }
}

/// The start of `text`, at most [`EXCERPT_CHARS`] characters, marked when cut.
fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((end, _)) => format!("{}… ({} bytes in all)", &text[..end], text.len()),
        None => text.to_owned(),
    }
}

/// The wait a 429/503 answer asks for: `retry-after-ms` (OpenAI's), else `Retry-After` in
/// seconds (an HTTP date is not read: the backoff applies).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    number("retry-after").map(|s| Duration::from_secs_f64(s.min(1e9)))
}

/// The transport async-openai sends through: plain reqwest, recording status and wait.
#[derive(Clone)]
struct Probe {
    http: reqwest::Client,
    seen: Arc<Mutex<Seen>>,
}

type ProbeFuture = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send>>;

impl tower::Service<HttpRequestFactory> for Probe {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = ProbeFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        let seen = Arc::clone(&self.seen);
        Box::pin(async move {
            let request = request.build().await?;
            let response = http.execute(request).await.map_err(OpenAIError::Reqwest)?;
            *seen.lock().unwrap_or_else(PoisonError::into_inner) = Seen {
                status: Some(response.status().as_u16()),
                retry_after: retry_after(response.headers()),
            };
            Ok(response)
        })
    }
}

/// The user message of one attempt: the field, the target, and the text between markers. A
/// second attempt (the first answer was over its target) asks for less, stated plainly.
fn prompt(field: &str, text: &str, target: usize, previous: Option<usize>) -> String {
    let mut out = format!("Summarize the field `{field}` in at most {target} tokens.");
    if let Some(tokens) = previous {
        let tighter = (target * 2 / 3).max(1);
        out.push_str(&format!(
            " Your previous summary had {tokens} tokens, over the limit: reply in at most \
             {tighter} tokens this time, keeping only what matters most."
        ));
    }
    out.push_str("\n\n<<<TEXT\n");
    out.push_str(text);
    out.push_str("\nTEXT>>>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_is_short_and_says_it_was_cut() {
        assert_eq!(excerpt("  short body "), "short body");
        let long = "é".repeat(1000);
        let cut = excerpt(&long);
        assert!(cut.chars().count() < EXCERPT_CHARS + 40, "{cut}");
        assert!(cut.ends_with("(2000 bytes in all)"), "{cut}");
    }

    #[test]
    fn retry_after_reads_milliseconds_then_seconds() {
        let mut headers = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        headers.remove("retry-after-ms");
        headers.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", "-3".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn tighter_prompt_asks_for_less() {
        let first = prompt("log", "body", 90, None);
        let second = prompt("log", "body", 90, Some(140));
        assert!(first.contains("at most 90 tokens") && !first.contains("previous"));
        assert!(second.contains("140 tokens") && second.contains("at most 60 tokens"));
        assert!(second.ends_with("<<<TEXT\nbody\nTEXT>>>"));
    }
}
