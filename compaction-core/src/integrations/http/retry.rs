//! One summary request's attempts: what an exchange ended in (answer, worth retrying, final),
//! the bounded retry loop honouring `Retry-After` (read in `wait.rs`), and short excerpts for
//! error values.

use crate::integrations::http::client::{Answer, Transport};
use crate::integrations::http::wait::{retry_after, UNWAITABLE};
use crate::summaries::SummarizerError;
use std::future::Future;
use std::time::Duration;

/// The longest body excerpt an error carries.
const EXCERPT_CHARS: usize = 200;
/// The first wait of the exponential backoff (doubled per retry) when the server names none.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

/// What one attempt ended in (`E`: the caller's error, a summarizer's by default).
pub(crate) enum Attempt<T, E = SummarizerError> {
    Answer(T),
    /// 429, 5xx or a refused connection: worth another try after the wait, if any.
    Transient(E, Option<Duration>),
    Fatal(E),
}

/// Runs `attempt` until it answers or fails for good: a transient failure is retried up to
/// `max_retries` times, after what `Retry-After` asked for, else an exponential backoff from
/// 250 ms; a wait longer than `max_backoff` is not waited (the failure is returned at once).
pub(crate) async fn with_retries<T, E, F, Fut>(
    max_retries: u32,
    max_backoff: Duration,
    mut attempt: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Attempt<T, E>>,
{
    let mut backoff = FIRST_BACKOFF;
    let mut retries = 0;
    loop {
        match attempt().await {
            Attempt::Answer(answer) => return Ok(answer),
            Attempt::Fatal(error) => return Err(error),
            Attempt::Transient(error, asked) => {
                if retries >= max_retries {
                    return Err(error);
                }
                let wait = asked.unwrap_or(backoff);
                // A wait no clock holds ends the call even with `max_backoff(Duration::MAX)`.
                if wait > max_backoff || wait == UNWAITABLE {
                    return Err(error);
                }
                tokio::time::sleep(wait).await;
                backoff = backoff.saturating_mul(2);
                retries += 1;
            }
        }
    }
}

/// The exchange's outcome before its body is read as the provider's answer: a 2xx answer, or
/// the attempt a transport failure or an error status ends in. `server` names the server in a
/// connection error (never the key).
pub(crate) fn triage<T>(
    field: &str,
    server: &str,
    timeout: Duration,
    exchange: Result<Answer, Transport>,
) -> Result<Answer, Attempt<T>> {
    let answer = match exchange {
        Ok(answer) => answer,
        Err(Transport::Connect(reason)) => {
            let message = format!("cannot connect to {server}: {reason}");
            return Err(Attempt::Transient(
                SummarizerError::failed(field, message),
                None,
            ));
        }
        Err(Transport::Timeout) => {
            return Err(Attempt::Fatal(SummarizerError::Timeout {
                field: field.to_owned(),
                after: timeout,
            }))
        }
        Err(Transport::Other(reason)) => {
            let message = format!("HTTP error: {reason}");
            return Err(Attempt::Fatal(SummarizerError::failed(field, message)));
        }
    };
    let status = answer.status;
    if (200..300).contains(&status) {
        return Ok(answer);
    }
    let error = SummarizerError::Http {
        field: field.to_owned(),
        status,
        body: error_excerpt(&answer.body),
    };
    if status == 429 || (500..600).contains(&status) {
        Err(Attempt::Transient(error, retry_after(&answer.headers)))
    } else {
        Err(Attempt::Fatal(error))
    }
}

/// What an error answer says: the provider's `error.message` (OpenAI's and Anthropic's error
/// shapes both have one), with its `error.type` when there is one; else the start of the body.
fn error_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let parsed: Option<serde_json::Value> = serde_json::from_str(&text).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    match error
        .and_then(|e| e.get("message"))
        .and_then(|m| m.as_str())
    {
        Some(message) => match error.and_then(|e| e.get("type")).and_then(|t| t.as_str()) {
            Some(kind) => excerpt(&format!("{kind}: {message}")),
            None => excerpt(message),
        },
        None => excerpt(&text),
    }
}

/// A 2xx answer that is not a usable reply: `Malformed`, with the start of `text`.
pub(crate) fn malformed(field: &str, text: &str) -> SummarizerError {
    SummarizerError::Malformed {
        field: field.to_owned(),
        body: excerpt(text),
    }
}

/// A 2xx answer's body read as `T` (`what` names it), or `Malformed` with its start.
pub(crate) fn parse_answer<T: serde::de::DeserializeOwned>(
    field: &str,
    answer: &Answer,
    what: &str,
) -> Result<T, SummarizerError> {
    let body = String::from_utf8_lossy(&answer.body);
    serde_json::from_str(&body).map_err(|_| malformed(field, &format!("not {what}: {body}")))
}

/// The start of `text`, at most [`EXCERPT_CHARS`] characters, marked when cut.
pub(crate) fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((end, _)) => format!("{}… ({} bytes in all)", &text[..end], text.len()),
        None => text.to_owned(),
    }
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
    fn error_bodies_give_the_providers_message() {
        let openai = br#"{"error":{"message":"no such model","type":"invalid_request_error"}}"#;
        assert_eq!(
            error_excerpt(openai),
            "invalid_request_error: no such model"
        );
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_excerpt(anthropic), "overloaded_error: Overloaded");
        assert_eq!(error_excerpt(b"<html>502</html>"), "<html>502</html>");
    }
}
