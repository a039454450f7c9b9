//! `AnthropicClientError`: why a Messages API call gave no reply.

use crate::model_calls::anthropic_stream::AnthropicStreamError;
use std::time::Duration;

/// Why [`AnthropicClient::send`](crate::anthropic::AnthropicClient::send) or
/// [`stream`](crate::anthropic::AnthropicClient::stream) gave no reply. No variant, message
/// or `Debug` output ever holds the API key: a server that echoes it back has it replaced by
/// `<api key>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnthropicClientError {
    /// [`AnthropicClient::from_env`](crate::anthropic::AnthropicClient::from_env) found no
    /// `ANTHROPIC_API_KEY`.
    #[error("no API key: set ANTHROPIC_API_KEY, or give the key to AnthropicClient::new")]
    MissingKey,
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
    /// The API answered with an error status (after the retries, for 429, 529 and other 5xx).
    #[error("the Messages API answered {status}: {}{message}", error_type.as_deref().map(|t| format!("{t}: ")).unwrap_or_default())]
    Http {
        /// The HTTP status.
        status: u16,
        /// The provider's error type (`invalid_request_error`, `overloaded_error`, ...).
        error_type: Option<String>,
        /// The provider's message, else the start of the body (at most 200 characters).
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
    /// A 2xx answer that is not a Messages API reply.
    #[error("the answer is not a Messages API reply: {body}")]
    Malformed {
        /// What is wrong, with the start of the body.
        body: String,
    },
    /// A streamed answer that did not assemble: cut before `message_stop`, an `error` event
    /// after the reply began, an event out of order. Never retried once an event was read.
    #[error("the streamed reply failed after {events} events: {source}")]
    Stream {
        /// Events read before the failure.
        events: usize,
        /// Why it failed.
        source: AnthropicStreamError,
    },
    /// The connection broke while the stream was read, after `events` events: not retried,
    /// since part of the reply was already read.
    #[error("the stream broke after {events} events: {reason}")]
    Interrupted {
        /// Events read before the break.
        events: usize,
        /// Why.
        reason: String,
    },
}
