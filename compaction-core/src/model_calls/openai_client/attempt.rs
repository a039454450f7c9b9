//! One call of [`OpenAiClient`](crate::openai::OpenAiClient): its attempts, whole or streamed,
//! and what each ended in (the reply, a failure worth a retry, a final error), retried as the
//! client's settings say.

use crate::integrations::error_text::ErrorText;
use crate::integrations::http::client::{HttpsClient, Transport};
use crate::integrations::http::guard::insecure_host;
use crate::integrations::http::retry::{error_message, with_retries, Attempt};
use crate::integrations::http::wait::retry_after;
use crate::model_calls::client::{ClientCore, Settings};
use crate::model_calls::openai_client::error::OpenAiClientError;
use crate::model_calls::openai_stream::{ChatStreamAssembler, ChatStreamError};
#[cfg(feature = "openai-responses")]
use crate::model_calls::responses_stream::{ResponsesStreamAssembler, ResponsesStreamError};
use async_openai::types::chat::CreateChatCompletionResponse;
use hyper::header::HeaderMap;
use serde::de::DeserializeOwned;

type Outcome<T> = Attempt<T, OpenAiClientError>;

/// The headers of every request (the key as a bearer token, when there is one).
type Headers = Vec<(&'static str, String)>;

/// The client, its headers and the URL checked, before the first attempt.
fn prepare(core: &ClientCore<()>, url: &str) -> Result<(HttpsClient, Headers), OpenAiClientError> {
    let settings = &core.settings;
    let key = Some(settings.api_key.as_str()).filter(|k| !k.is_empty());
    if key.is_some() {
        // Checked before any connection: the key never goes in the clear to a host not trusted.
        if let Some(host) = insecure_host(url, &settings.insecure_http_hosts) {
            return Err(OpenAiClientError::InsecureTransport { host });
        }
    }
    let client = core
        .connection()
        .map_err(|reason| OpenAiClientError::Transport { reason })?;
    let headers = key
        .map(|key| vec![("authorization", format!("Bearer {key}"))])
        .unwrap_or_default();
    Ok((client, headers))
}

/// An exchange with no answer: a refused connection is retried (nothing was sent).
fn no_answer<T>(settings: &Settings<()>, client: &HttpsClient, failure: Transport) -> Outcome<T> {
    match failure {
        Transport::Connect(reason) => {
            let server = settings.base_url.clone();
            let reason = settings.error_text().excerpt(&reason);
            Attempt::Transient(OpenAiClientError::Connect { server, reason }, None)
        }
        Transport::Timeout => Attempt::Fatal(OpenAiClientError::Timeout {
            after: client.timeout(),
        }),
        Transport::Other(reason) => {
            let reason = settings.error_text().excerpt(&reason);
            Attempt::Fatal(OpenAiClientError::Transport { reason })
        }
    }
}

/// An error status: 429 and 5xx are retried after what `retry-after` asks; any other is final.
fn error_status<T>(
    settings: &Settings<()>,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
) -> Outcome<T> {
    let text = String::from_utf8_lossy(body);
    let error = OpenAiClientError::Http {
        status,
        message: settings.error_text().excerpt(&error_message(&text)),
    };
    match status == 429 || (500..600).contains(&status) {
        true => Attempt::Transient(error, retry_after(headers)),
        false => Attempt::Fatal(error),
    }
}

/// One call whose answer is one JSON reply: its attempts, retried as the settings say.
pub(super) async fn call<T: DeserializeOwned>(
    core: ClientCore<()>,
    url: String,
    body: Vec<u8>,
) -> Result<T, OpenAiClientError> {
    let settings = &core.settings;
    let (client, headers) = prepare(&core, &url)?;
    let attempt = || async {
        let answer = match client.post_json(&url, &headers, body.clone()).await {
            Ok(answer) => answer,
            Err(failure) => return no_answer(settings, &client, failure),
        };
        if !(200..300).contains(&answer.status) {
            return error_status(settings, answer.status, &answer.headers, &answer.body);
        }
        let text = String::from_utf8_lossy(&answer.body);
        let reply = serde_json::from_str::<T>(&text);
        match reply.map_err(|e| (without_usage(&text), e)) {
            Ok(reply) | Err((Some(reply), _)) => Attempt::Answer(reply),
            Err((None, e)) => {
                let body = settings.error_text().excerpt(&format!("{e}: {text}"));
                Attempt::Fatal(OpenAiClientError::Malformed { body })
            }
        }
    };
    with_retries(settings.max_retries, settings.max_backoff, attempt).await
}

/// A streamed reply's assembler, as the streamed call drives it.
pub(super) trait Assemble: Sized + Send {
    /// The reply it makes.
    type Reply: Send;
    /// Its error.
    type Error;
    /// An assembler whose errors go through `text`.
    fn scrubbing(text: ErrorText) -> Self;
    /// Reads the next bytes.
    fn push(&mut self, bytes: &[u8]) -> Result<(), Self::Error>;
    /// The reply, once whole.
    fn finish(self) -> Result<Self::Reply, Self::Error>;
    /// Whether the same request may well succeed (the stream ended early, say).
    fn retryable(error: &Self::Error) -> bool;
    /// The client's error for it.
    fn error(error: Self::Error) -> OpenAiClientError;
}

impl Assemble for ChatStreamAssembler {
    type Reply = CreateChatCompletionResponse;
    type Error = ChatStreamError;
    fn scrubbing(text: ErrorText) -> Self {
        ChatStreamAssembler::scrubbing(text)
    }
    fn push(&mut self, bytes: &[u8]) -> Result<(), ChatStreamError> {
        self.push_sse(bytes)
    }
    fn finish(self) -> Result<CreateChatCompletionResponse, ChatStreamError> {
        ChatStreamAssembler::finish(self)
    }
    fn retryable(error: &ChatStreamError) -> bool {
        error.is_retryable()
    }
    fn error(source: ChatStreamError) -> OpenAiClientError {
        OpenAiClientError::Stream { source }
    }
}

#[cfg(feature = "openai-responses")]
impl Assemble for ResponsesStreamAssembler {
    type Reply = async_openai::types::responses::Response;
    type Error = ResponsesStreamError;
    fn scrubbing(text: ErrorText) -> Self {
        ResponsesStreamAssembler::scrubbing(text)
    }
    fn push(&mut self, bytes: &[u8]) -> Result<(), ResponsesStreamError> {
        self.push_sse(bytes)
    }
    fn finish(self) -> Result<Self::Reply, ResponsesStreamError> {
        ResponsesStreamAssembler::finish(self)
    }
    fn retryable(error: &ResponsesStreamError) -> bool {
        error.is_retryable()
    }
    fn error(source: ResponsesStreamError) -> OpenAiClientError {
        OpenAiClientError::ResponsesStream { source }
    }
}

/// One streamed call: its attempts, each read event by event into a fresh `A`. Nothing is
/// handed out before the whole reply, so a stream that broke, ended early or that the server
/// ended with a server-side error is made again from the start, within the same retries.
pub(super) async fn call_stream<A: Assemble>(
    core: ClientCore<()>,
    url: String,
    body: Vec<u8>,
) -> Result<A::Reply, OpenAiClientError> {
    let settings = &core.settings;
    let (client, headers) = prepare(&core, &url)?;
    let attempt = || async {
        let mut answer = match client.post_stream(&url, &headers, body.clone()).await {
            Ok(answer) => answer,
            Err(failure) => return no_answer(settings, &client, failure),
        };
        if !(200..300).contains(&answer.status) {
            let (status, head) = (answer.status, answer.headers.clone());
            let body = answer.rest().await.unwrap_or_default();
            return error_status(settings, status, &head, &body);
        }
        let mut assembler = A::scrubbing(settings.error_text().clone());
        loop {
            match answer.next().await {
                Ok(Some(bytes)) => {
                    if let Err(source) = assembler.push(&bytes) {
                        return stream_failed::<A>(source);
                    }
                }
                Ok(None) => break,
                Err(Transport::Timeout) => {
                    let after = client.timeout();
                    return Attempt::Fatal(OpenAiClientError::Timeout { after });
                }
                Err(Transport::Connect(reason) | Transport::Other(reason)) => {
                    let reason = settings.error_text().excerpt(&reason);
                    return Attempt::Transient(OpenAiClientError::Interrupted { reason }, None);
                }
            }
        }
        match assembler.finish() {
            Ok(reply) => Attempt::Answer(reply),
            Err(source) => stream_failed::<A>(source),
        }
    };
    with_retries(settings.max_retries, settings.max_backoff, attempt).await
}

/// A stream that did not assemble: retried from the start when it may succeed, else final.
fn stream_failed<A: Assemble>(source: A::Error) -> Outcome<A::Reply> {
    let retry = A::retryable(&source);
    let error = A::error(source);
    if retry {
        Attempt::Transient(error, None)
    } else {
        Attempt::Fatal(error)
    }
}

/// The reply of `text` read without its `usage` block, when only that block was in another
/// shape than async-openai's (a compatible server's, or OpenAI's documented examples without
/// `input_tokens_details`): the bill's details are not a reason to lose the model's reply.
fn without_usage<T: DeserializeOwned>(text: &str) -> Option<T> {
    let mut reply: serde_json::Value = serde_json::from_str(text).ok()?;
    reply.as_object_mut()?.remove("usage")?;
    serde_json::from_value(reply).ok()
}
