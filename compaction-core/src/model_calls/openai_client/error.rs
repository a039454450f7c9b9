//! `OpenAiClientError`: why a call of [`OpenAiClient`](crate::openai::OpenAiClient) gave no
//! reply, and whether calling again may help.

use crate::model_calls::openai_stream::ChatStreamError;
use std::time::Duration;

/// Why [`OpenAiClient::chat`](crate::openai::OpenAiClient::chat), `chat_stream` or `responses`
/// gave no reply. No variant,
/// message or `Debug` output ever holds the API key: a server that echoes it back has it
/// replaced by `<api key>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenAiClientError {
    /// The key would go over plain `http://` to a host neither loopback nor opted in: nothing
    /// was sent.
    #[error(
        "refusing to send the API key over plain http to `{host}`: use https, or opt the host \
         in with .allow_insecure_http_to(\"{host}\") if its network is trusted"
    )]
    InsecureTransport {
        /// The host the URL names.
        host: String,
    },
    /// The server answered with an error status (after the retries, for 429 and 5xx).
    #[error("the server answered {status}: {message}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The provider's error type and message, else the start of the body.
        message: String,
    },
    /// No connection could be made, after the retries (nothing was sent).
    #[error("cannot connect to {server}: {reason}")]
    Connect {
        /// The base URL.
        server: String,
        /// Why.
        reason: String,
    },
    /// The call took longer than the client's timeout (not retried: the request may have
    /// been read).
    #[error("no whole answer within {after:?}")]
    Timeout {
        /// The timeout.
        after: Duration,
    },
    /// The exchange broke another way (a connection closed mid-request, an answer too
    /// large); not retried.
    #[error("HTTP error: {reason}")]
    Transport {
        /// Why.
        reason: String,
    },
    /// A 2xx answer that is not the reply asked for.
    #[error("the answer is not a reply of this API: {body}")]
    Malformed {
        /// What is wrong, with the start of the body.
        body: String,
    },
    /// A streamed answer ([`chat_stream`](crate::openai::OpenAiClient::chat_stream)) that did
    /// not assemble: chunks out of order, an error object in the stream, a stream that ended
    /// early (retried from the start first: nothing was handed out).
    #[error("the streamed reply failed: {source}")]
    Stream {
        /// Why it failed.
        source: ChatStreamError,
    },
    /// A streamed Responses reply
    /// ([`responses_stream`](crate::openai::OpenAiClient::responses_stream)) that did not
    /// assemble: an event that does not read, a response that failed or ended incomplete (after
    /// the retries, when the server's error was its own).
    #[cfg(feature = "openai-responses")]
    #[error("the streamed response failed: {source}")]
    ResponsesStream {
        /// Why it failed.
        source: crate::model_calls::responses_stream::ResponsesStreamError,
    },
    /// The connection broke while a stream was read, after the retries.
    #[error("the stream broke: {reason}")]
    Interrupted {
        /// Why.
        reason: String,
    },
}

impl OpenAiClientError {
    /// Whether the same call, made again later, may well succeed: a 429 or 5xx after the
    /// client's own retries, no connection, a timeout (not retried by the client: the request
    /// may have been read, and a model call costs). `false` for what fails the same way again:
    /// an insecure URL, another 4xx, an answer that is not a reply, an exchange that broke
    /// otherwise. docs/models.md has the table of what to do for each.
    pub fn is_retryable(&self) -> bool {
        match self {
            OpenAiClientError::Http { status, .. } => *status == 429 || *status >= 500,
            OpenAiClientError::Connect { .. }
            | OpenAiClientError::Timeout { .. }
            | OpenAiClientError::Interrupted { .. } => true,
            OpenAiClientError::Stream { source } => source.is_retryable(),
            #[cfg(feature = "openai-responses")]
            OpenAiClientError::ResponsesStream { source } => source.is_retryable(),
            OpenAiClientError::InsecureTransport { .. }
            | OpenAiClientError::Transport { .. }
            | OpenAiClientError::Malformed { .. } => false,
        }
    }
}
