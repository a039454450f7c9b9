//! [`AnthropicClient`]: Anthropic's Messages API on the crate's own HTTPS transport (rustls on
//! `ring`, a runtime of its own so any executor can await it), with bounded retries of 429,
//! 529, other 5xx and refused connections, honouring `retry-after`; whole replies (`send`) or
//! streamed ones assembled exactly (`stream`).

mod attempt;
mod error;
mod settings;

pub use error::AnthropicClientError;

use crate::integrations::anthropic::wire::{AnthropicRequest, AnthropicResponse};
use crate::integrations::http::guard::insecure_host;
use crate::integrations::http::retry::with_retries;
use crate::integrations::http::summary::env;
use crate::model_calls::anthropic_client::attempt::{send_once, stream_once};
use crate::model_calls::anthropic_client::settings::{headers, Betas};
use crate::model_calls::client::{on_runtime, ClientCore};
use std::time::Duration;

/// The server when neither [`AnthropicClient::base_url`] nor `ANTHROPIC_BASE_URL` names one.
const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// A client of Anthropic's Messages API (`POST {base_url}/v1/messages`) for an agent's model
/// calls: the request a [`SessionRequest`](crate::SessionRequest) gives
/// ([`anthropic_request`](crate::SessionRequest::anthropic_request)), the reply
/// [`Session::push_response`](crate::Session::push_response) takes.
///
/// ```no_run
/// use compaction::anthropic::{AnthropicClient, AnthropicRequest};
///
/// # async fn call(request: AnthropicRequest) -> Result<(), Box<dyn std::error::Error>> {
/// let client = AnthropicClient::from_env()?; // ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL)
/// let reply = client.send(&request).await?; // or `client.stream(&request)`: the same reply
/// println!("{:?}", reply.stop_reason);
/// # Ok(())
/// # }
/// ```
///
/// What a call does:
///
/// - a 429, a 529 (`overloaded_error`), another 5xx, or a connection refused before anything
///   was sent is retried up to [`max_retries`](Self::max_retries) times (default 3), waiting
///   what `retry-after` asks, else an exponential backoff from 250 ms; a server asking for more
///   than [`max_backoff`](Self::max_backoff) (default 30 s) ends the call at once;
/// - [`stream`](Self::stream) sends `"stream": true` and assembles the events with
///   [`StreamAssembler`](crate::anthropic::StreamAssembler) into the reply
///   [`send`](Self::send) would return; since it hands nothing out before the whole reply, a
///   stream that failed where the same request may succeed (an `error` event of an overload,
///   a server error or a rate limit; a connection cut; a stream that ended before
///   `message_stop`) is made again from the start, at any event, within the same retries;
/// - anything else is an [`AnthropicClientError`] at once: another 4xx (its status, the
///   provider's error type and message), a timeout, a 2xx that is not a reply, a malformed
///   stream. [`AnthropicClientError::is_retryable`] says whether calling again later may
///   succeed.
///
/// The key goes as `x-api-key` over `https://`, or over plain `http://` only to loopback
/// written as such (`127.0.0.0/8`, `::1`, `localhost`) or a host opted in with
/// [`allow_insecure_http_to`](Self::allow_insecure_http_to); it is never in `Debug` or an
/// error. Cheap to clone: clones share the connection pool.
#[derive(Clone)]
pub struct AnthropicClient {
    core: ClientCore<Betas>,
}

impl std::fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("AnthropicClient");
        self.core.settings.debug_fields(&mut out);
        out.field("betas", &self.core.settings.wire.0)
            .finish_non_exhaustive()
    }
}

impl AnthropicClient {
    /// A client with `api_key`, on `https://api.anthropic.com`: a 10-minute timeout per call
    /// (a long reply takes minutes), 3 retries, waits of at most 30 s.
    pub fn new(api_key: impl Into<String>) -> Self {
        AnthropicClient {
            core: ClientCore::new(api_key.into(), ANTHROPIC_BASE_URL, Betas::default()),
        }
    }

    /// A client with the key from `ANTHROPIC_API_KEY` and the server from
    /// `ANTHROPIC_BASE_URL` (else `https://api.anthropic.com`);
    /// [`AnthropicClientError::MissingKey`] without a key.
    pub fn from_env() -> Result<Self, AnthropicClientError> {
        let key = env("ANTHROPIC_API_KEY").ok_or(AnthropicClientError::MissingKey)?;
        let client = AnthropicClient::new(key);
        Ok(match env("ANTHROPIC_BASE_URL") {
            Some(url) => client.base_url(url),
            None => client,
        })
    }

    /// The server's base URL, without the version: requests go to `{url}/v1/messages`.
    pub fn base_url(self, url: impl Into<String>) -> Self {
        let core = self.core.base_url(url);
        AnthropicClient { core }
    }

    /// Lets the key go over plain `http://` to `host` (as the base URL writes it), for a
    /// server on a network you trust. Call it once per host.
    pub fn allow_insecure_http_to(self, host: impl Into<String>) -> Self {
        let core = self.core.allow_insecure_http_to(host);
        AnthropicClient { core }
    }

    /// The longest one call's attempt may take, connection to last byte (default 10
    /// minutes); past it the call is [`AnthropicClientError::Timeout`], not retried.
    pub fn timeout(self, timeout: Duration) -> Self {
        let core = self.core.timeout(timeout);
        AnthropicClient { core }
    }

    /// How many times a 429, a 5xx or a refused connection is retried (default 3).
    pub fn max_retries(self, retries: u32) -> Self {
        let core = self.core.max_retries(retries);
        AnthropicClient { core }
    }

    /// The longest wait before a retry (default 30 s): a server asking for longer ends the
    /// call with its error.
    pub fn max_backoff(self, wait: Duration) -> Self {
        let core = self.core.max_backoff(wait);
        AnthropicClient { core }
    }

    /// Adds a beta flag to every request's `anthropic-beta` header (e.g.
    /// `"compact-2026-01-12"` for server-side compaction).
    pub fn beta(self, flag: impl Into<String>) -> Self {
        let flag = flag.into();
        let core = self.core.with(|s| s.wire.0.push(flag));
        AnthropicClient { core }
    }

    /// Sends `request` and returns the whole reply.
    pub async fn send(
        &self,
        request: &AnthropicRequest,
    ) -> Result<AnthropicResponse, AnthropicClientError> {
        let body = serde_json::to_vec(request).map_err(|e| AnthropicClientError::Transport {
            reason: format!("cannot serialize the request: {e}"),
        })?;
        self.run(body, false).await
    }

    /// Sends `request` with `"stream": true` and returns the reply its events make, the
    /// same [`send`](Self::send) returns (see [`StreamAssembler`](crate::anthropic::StreamAssembler)).
    pub async fn stream(
        &self,
        request: &AnthropicRequest,
    ) -> Result<AnthropicResponse, AnthropicClientError> {
        let body = serde_json::to_string(request).map_err(|e| AnthropicClientError::Transport {
            reason: format!("cannot serialize the request: {e}"),
        })?;
        // The request's own bytes (tool inputs exactly as the model wrote them), with the flag
        // first: the request type has no `stream` field, so nothing is repeated.
        let body = match body.strip_prefix('{') {
            Some(rest) if rest.trim_start().starts_with('}') => "{\"stream\":true}".to_owned(),
            Some(rest) => format!("{{\"stream\":true,{rest}"),
            None => body,
        };
        self.run(body.into_bytes(), true).await
    }

    /// Runs the call on the transport's runtime, so the future resolves under any executor;
    /// dropping it cancels the call.
    async fn run(
        &self,
        body: Vec<u8>,
        stream: bool,
    ) -> Result<AnthropicResponse, AnthropicClientError> {
        let call = call(self.core.clone(), body, stream);
        on_runtime(call, |reason| AnthropicClientError::Transport { reason }).await
    }
}

/// One call: its attempts, retried as the client's settings say.
async fn call(
    core: ClientCore<Betas>,
    body: Vec<u8>,
    stream: bool,
) -> Result<AnthropicResponse, AnthropicClientError> {
    let settings = &core.settings;
    let url = format!("{}/v1/messages", settings.base_url);
    // Checked before any connection: the key never goes in the clear to a host not trusted.
    if let Some(host) = insecure_host(&url, &settings.insecure_http_hosts) {
        return Err(AnthropicClientError::InsecureTransport { host });
    }
    let client = core
        .connection()
        .map_err(|reason| AnthropicClientError::Transport { reason })?;
    let headers = headers(settings);
    let attempt = || async {
        let body = body.clone();
        if stream {
            stream_once(&client, settings, &url, &headers, body).await
        } else {
            send_once(&client, settings, &url, &headers, body).await
        }
    };
    with_retries(settings.max_retries, settings.max_backoff, attempt).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_in_no_debug_and_is_scrubbed_from_echoes() {
        let client = AnthropicClient::new("sk-ant-secret").base_url("http://127.0.0.1:1/");
        assert!(!format!("{client:?}").contains("sk-ant-secret"));
        assert_eq!(client.core.settings.base_url, "http://127.0.0.1:1");
        assert_eq!(
            client
                .core
                .settings
                .error_text()
                .excerpt("bad key sk-ant-secret!"),
            "bad key <api key>!"
        );
        let headers = headers(&client.beta("a").beta("b").core.settings);
        assert!(headers.contains(&("anthropic-beta", "a,b".to_owned())));
    }
}
