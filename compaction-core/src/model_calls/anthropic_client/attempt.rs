//! One attempt of a Messages API call, whole or streamed, and what it ended in: the reply, a
//! failure worth a retry (429, 5xx, a refused connection; a stream cut or failed with an
//! overload or server error, at any event: `stream` hands nothing out before the whole reply),
//! or a final error.

use crate::integrations::anthropic::wire::AnthropicResponse;
use crate::integrations::http::client::{HttpsClient, Transport};
use crate::integrations::http::retry::Attempt;
use crate::integrations::http::wait::retry_after;
use crate::model_calls::anthropic_client::error::AnthropicClientError;
use crate::model_calls::anthropic_client::settings::Settings;
use crate::model_calls::anthropic_stream::{AnthropicStreamError, StreamAssembler};
use hyper::header::HeaderMap;
use serde::Deserialize;

type Outcome = Attempt<AnthropicResponse, AnthropicClientError>;

/// One whole exchange.
pub(super) async fn send_once(
    client: &HttpsClient,
    settings: &Settings,
    url: &str,
    headers: &[(&'static str, String)],
    body: Vec<u8>,
) -> Outcome {
    let answer = match client.post_json(url, headers, body).await {
        Ok(answer) => answer,
        Err(failure) => return transport(settings, client, failure),
    };
    if !(200..300).contains(&answer.status) {
        return status(settings, answer.status, &answer.headers, &answer.body);
    }
    match serde_json::from_slice::<AnthropicResponse>(&answer.body) {
        Ok(response) => Attempt::Answer(response),
        Err(e) => {
            let text = String::from_utf8_lossy(&answer.body);
            let body = settings.error_text().excerpt(&format!("{e}: {text}"));
            Attempt::Fatal(AnthropicClientError::Malformed { body })
        }
    }
}

/// One streamed exchange, its events assembled as they arrive.
pub(super) async fn stream_once(
    client: &HttpsClient,
    settings: &Settings,
    url: &str,
    headers: &[(&'static str, String)],
    body: Vec<u8>,
) -> Outcome {
    let mut answer = match client.post_stream(url, headers, body).await {
        Ok(answer) => answer,
        Err(failure) => return transport(settings, client, failure),
    };
    if !(200..300).contains(&answer.status) {
        let (code, head) = (answer.status, answer.headers.clone());
        let body = answer.rest().await.unwrap_or_default();
        return status(settings, code, &head, &body);
    }
    // Its errors (an `error` event's type and message, event names, serde's reasons) never
    // hold the key.
    let mut assembler = StreamAssembler::scrubbing(settings.error_text().clone());
    loop {
        let bytes = match answer.next().await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => break,
            Err(Transport::Timeout) => {
                let after = client.timeout();
                return Attempt::Fatal(AnthropicClientError::Timeout { after });
            }
            Err(failure) => {
                // Nothing of the reply was handed out (the caller gets it whole or not at
                // all): the call starts again from the first byte.
                // (`Interrupted` even before the first event: the error a caller gets after
                // the retries says, like every retried one, that calling again may help.)
                let reason = settings.error_text().excerpt(&describe(failure));
                let events = assembler.events();
                let error = AnthropicClientError::Interrupted { events, reason };
                return Attempt::Transient(error, None);
            }
        };
        if let Err(source) = assembler.push_sse(&bytes) {
            return stream_failed(assembler.events(), source);
        }
    }
    let events = assembler.events();
    match assembler.finish() {
        Ok(response) => Attempt::Answer(response),
        Err(source) => stream_failed(events, source),
    }
}

/// A stream that did not assemble (its error's text already scrubbed by the assembler):
/// retried from the start when the same request may well succeed (an overload, a server error
/// or a rate limit in an `error` event, a stream cut short), whatever it had sent before:
/// nothing of it was handed out. A malformed stream is final.
fn stream_failed(events: usize, source: AnthropicStreamError) -> Outcome {
    let retry = source.is_retryable();
    let error = AnthropicClientError::Stream { events, source };
    if retry {
        Attempt::Transient(error, None)
    } else {
        Attempt::Fatal(error)
    }
}

/// An exchange with no answer: a refused connection is retried (nothing was sent).
fn transport(settings: &Settings, client: &HttpsClient, failure: Transport) -> Outcome {
    match failure {
        Transport::Connect(reason) => Attempt::Transient(
            AnthropicClientError::Connect {
                server: settings.base_url.clone(),
                reason: settings.error_text().excerpt(&reason),
            },
            None,
        ),
        Transport::Timeout => Attempt::Fatal(AnthropicClientError::Timeout {
            after: client.timeout(),
        }),
        Transport::Other(reason) => Attempt::Fatal(AnthropicClientError::Transport {
            reason: settings.error_text().excerpt(&reason),
        }),
    }
}

fn describe(failure: Transport) -> String {
    match failure {
        Transport::Connect(reason) | Transport::Other(reason) => reason,
        Transport::Timeout => "timed out".to_owned(),
    }
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// An error status: 429 and 5xx (529 `overloaded_error` included) are retried after what
/// `retry-after` asks; any other is final.
fn status(settings: &Settings, status: u16, headers: &HeaderMap, body: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(body);
    let parsed = serde_json::from_str::<ErrorAnswer>(&text)
        .ok()
        .map(|a| a.error);
    let error_type = parsed.as_ref().and_then(|e| e.kind.as_deref());
    let message = parsed.as_ref().and_then(|e| e.message.as_deref());
    let scrub = settings.error_text();
    let error = AnthropicClientError::Http {
        status,
        error_type: error_type.map(|t| scrub.excerpt(t)),
        message: scrub.excerpt(message.unwrap_or(&text)),
    };
    if status == 429 || (500..600).contains(&status) {
        Attempt::Transient(error, retry_after(headers))
    } else {
        Attempt::Fatal(error)
    }
}
