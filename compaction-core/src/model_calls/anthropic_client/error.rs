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
    /// A streamed answer that did not assemble: cut before `message_stop`, an `error` event,
    /// an event out of order. Retried from the start when
    /// [`AnthropicStreamError::is_retryable`] (an overload, a server error, a cut), after the
    /// retries.
    #[error("the streamed reply failed after {events} events: {source}")]
    Stream {
        /// Events read before the failure.
        events: usize,
        /// Why it failed.
        source: AnthropicStreamError,
    },
    /// The connection broke while the stream was read, after `events` events (retried from
    /// the start: `stream` hands nothing out before the whole reply, so nothing was used),
    /// after the retries.
    #[error("the stream broke after {events} events: {reason}")]
    Interrupted {
        /// Events read before the break.
        events: usize,
        /// Why.
        reason: String,
    },
}

impl AnthropicClientError {
    /// Whether the same call, made again later, may well succeed: a 429 or 5xx (529 included)
    /// after the client's own retries, no connection, a timeout (not retried by the client:
    /// the request may have been read, and a model call costs), a stream that broke or failed
    /// with an overload or server error. `false` for what fails the same way again: no key, an
    /// insecure URL, another 4xx, an answer that is not a reply, a malformed stream, an
    /// exchange that broke otherwise. docs/models.md has the table of what to do for each.
    pub fn is_retryable(&self) -> bool {
        match self {
            AnthropicClientError::Http { status, .. } => *status == 429 || *status >= 500,
            AnthropicClientError::Connect { .. }
            | AnthropicClientError::Timeout { .. }
            | AnthropicClientError::Interrupted { .. } => true,
            AnthropicClientError::Stream { source, .. } => source.is_retryable(),
            AnthropicClientError::MissingKey
            | AnthropicClientError::InsecureTransport { .. }
            | AnthropicClientError::Transport { .. }
            | AnthropicClientError::Malformed { .. } => false,
        }
    }
}
