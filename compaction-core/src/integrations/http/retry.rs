//! One summary request's attempts: what an exchange ended in (answer, worth retrying, final),
//! the bounded retry loop honouring `Retry-After` (read in `wait.rs`), and the error values of
//! a summarizer's answers (their text through `ErrorText`).

use crate::integrations::error_text::ErrorText;
use crate::integrations::http::client::{Answer, Transport};
use crate::integrations::http::wait::{retry_after, UNWAITABLE};
use crate::summaries::SummarizerError;
use std::future::Future;
use std::time::Duration;

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
/// connection error (never the key); every text of the server's goes through `text`.
pub(crate) fn triage<T>(
    field: &str,
    server: &str,
    timeout: Duration,
    text: &ErrorText,
    exchange: Result<Answer, Transport>,
) -> Result<Answer, Attempt<T>> {
    let answer = match exchange {
        Ok(answer) => answer,
        Err(Transport::Connect(reason)) => {
            let message = text.excerpt(&format!("cannot connect to {server}: {reason}"));
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
            let message = text.excerpt(&format!("HTTP error: {reason}"));
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
        body: text.excerpt(&error_message(&String::from_utf8_lossy(&answer.body))),
    };
    if status == 429 || (500..600).contains(&status) {
        Err(Attempt::Transient(error, retry_after(&answer.headers)))
    } else {
        Err(Attempt::Fatal(error))
    }
}

/// What an error answer says: the provider's `error.message` (OpenAI's and Anthropic's error
/// shapes both have one), with its `error.type` when there is one; else the body (whole: the
/// caller scrubs, then cuts). The summarizers' and `OpenAiClient`'s.
pub(crate) fn error_message(text: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(text).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let field = |name: &str| error.and_then(|e| e.get(name)).and_then(|m| m.as_str());
    match (field("type"), field("message")) {
        (Some(kind), Some(message)) => format!("{kind}: {message}"),
        (None, Some(message)) => message.to_owned(),
        _ => text.to_owned(),
    }
}

/// A 2xx answer that is not a usable reply: `Malformed`, with the start of `what` (through
/// `text`: the key replaced, then cut).
pub(crate) fn malformed(field: &str, text: &ErrorText, what: &str) -> SummarizerError {
    SummarizerError::Malformed {
        field: field.to_owned(),
        body: text.excerpt(what),
    }
}

/// A 2xx answer's body read as `T` (`what` names it), or `Malformed` with its start.
pub(crate) fn parse_answer<T: serde::de::DeserializeOwned>(
    field: &str,
    text: &ErrorText,
    answer: &Answer,
    what: &str,
) -> Result<T, SummarizerError> {
    let body = String::from_utf8_lossy(&answer.body);
    let not = |_| malformed(field, text, &format!("not {what}: {body}"));
    serde_json::from_str(&body).map_err(not)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_give_the_providers_message() {
        let openai = r#"{"error":{"message":"no such model","type":"invalid_request_error"}}"#;
        assert_eq!(
            error_message(openai),
            "invalid_request_error: no such model"
        );
        let anthropic =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_message(anthropic), "overloaded_error: Overloaded");
        assert_eq!(error_message("<html>502</html>"), "<html>502</html>");
    }
}
