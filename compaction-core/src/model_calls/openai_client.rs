//! [`OpenAiClient`]: an agent's model calls to an OpenAI-compatible server (chat completions, and
//! the Responses API with `openai-responses`) on the crate's own HTTPS transport, with bounded
//! retries of 429, 5xx and refused connections, honouring `retry-after`. The summarizers' call
//! made public for the agent's own turn, so a template needs no HTTP code of its own.

use crate::integrations::http::client::Transport;
use crate::integrations::http::guard::insecure_host;
use crate::integrations::http::retry::{error_message, with_retries, Attempt};
use crate::integrations::http::summary::env;
use crate::integrations::http::wait::retry_after;
use crate::model_calls::client::{on_runtime, ClientCore};
use async_openai::types::chat::CreateChatCompletionResponse;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::Duration;

/// The server when neither [`OpenAiClient::base_url`] nor `OPENAI_BASE_URL` names one.
const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// A client of an OpenAI-compatible server (OpenAI, Azure OpenAI, vLLM, llama.cpp, Ollama, the
/// loopback test server) for an agent's model calls: [`chat`](Self::chat) posts to
/// `{base_url}/chat/completions` and returns the completion
/// [`Session::push_response`](crate::Session::push_response) takes; `responses` (feature
/// `openai-responses`) posts to `{base_url}/responses`.
///
/// ```no_run
/// use compaction::openai::OpenAiClient;
/// use serde_json::json;
///
/// # async fn call() -> Result<(), Box<dyn std::error::Error>> {
/// let client = OpenAiClient::from_env(); // OPENAI_API_KEY, OPENAI_BASE_URL
/// let body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
/// let completion = client.chat(&body).await?;
/// println!("{:?}", completion.choices[0].message.content);
/// # Ok(())
/// # }
/// ```
///
/// The body is yours (async-openai's request type or JSON): the client adds nothing to it. A
/// 429, a 5xx or a connection refused before anything was sent is retried up to
/// [`max_retries`](Self::max_retries) times (default 3), waiting what `retry-after-ms` or
/// `retry-after` asks, else an exponential backoff from 250 ms; a server asking for more than
/// [`max_backoff`](Self::max_backoff) (default 30 s) ends the call at once. Anything else is an
/// [`OpenAiClientError`] at once. The key goes as `Authorization: Bearer` over `https://`, or
/// over plain `http://` only to loopback or a host opted in with
/// [`allow_insecure_http_to`](Self::allow_insecure_http_to); it is never in `Debug` or an
/// error. Your own async-openai client is not affected (this transport is the crate's own).
#[derive(Clone)]
pub struct OpenAiClient {
    /// No settings of the wire's own: the key (empty: none) goes as a bearer token.
    core: ClientCore<()>,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("OpenAiClient");
        self.core.settings.debug_fields(&mut out);
        out.finish_non_exhaustive()
    }
}

impl OpenAiClient {
    /// A client with `api_key` (empty: no `Authorization` header, for a local server), on
    /// `https://api.openai.com/v1`: a 10-minute timeout per call, 3 retries, waits of at most
    /// 30 s.
    pub fn new(api_key: impl Into<String>) -> Self {
        let mut api_key = api_key.into();
        if api_key.trim().is_empty() {
            api_key.clear();
        }
        OpenAiClient {
            core: ClientCore::new(api_key, OPENAI_BASE_URL, ()),
        }
    }

    /// A client with the key from `OPENAI_API_KEY` (none when unset: a local server needs
    /// none) and the server from `OPENAI_BASE_URL` (else `https://api.openai.com/v1`).
    pub fn from_env() -> Self {
        let client = OpenAiClient::new(env("OPENAI_API_KEY").unwrap_or_default());
        match env("OPENAI_BASE_URL") {
            Some(url) => client.base_url(url),
            None => client,
        }
    }

    /// The server's base URL, up to and including the API version (`http://host:8080/v1`).
    pub fn base_url(self, url: impl Into<String>) -> Self {
        let core = self.core.base_url(url);
        OpenAiClient { core }
    }

    /// Lets the key go over plain `http://` to `host` (as the base URL writes it), for a
    /// server on a network you trust. Call it once per host.
    pub fn allow_insecure_http_to(self, host: impl Into<String>) -> Self {
        let core = self.core.allow_insecure_http_to(host);
        OpenAiClient { core }
    }

    /// The longest one attempt may take, connection to last byte (default 10 minutes); past
    /// it the call is [`OpenAiClientError::Timeout`], not retried.
    pub fn timeout(self, timeout: Duration) -> Self {
        let core = self.core.timeout(timeout);
        OpenAiClient { core }
    }

    /// How many times a 429, a 5xx or a refused connection is retried (default 3).
    pub fn max_retries(self, retries: u32) -> Self {
        let core = self.core.max_retries(retries);
        OpenAiClient { core }
    }

    /// The longest wait before a retry (default 30 s): a server asking for longer ends the
    /// call with its error.
    pub fn max_backoff(self, wait: Duration) -> Self {
        let core = self.core.max_backoff(wait);
        OpenAiClient { core }
    }

    /// Posts `request` (a chat completion request: async-openai's type or JSON) to
    /// `{base_url}/chat/completions` and returns the completion.
    pub async fn chat(
        &self,
        request: &impl Serialize,
    ) -> Result<CreateChatCompletionResponse, OpenAiClientError> {
        self.post("/chat/completions", request).await
    }

    /// Posts `request` (a Responses API request: async-openai's `CreateResponse` or JSON) to
    /// `{base_url}/responses` and returns the response; its `output` becomes our messages with
    /// [`from_responses_output`](crate::openai::from_responses_output).
    #[cfg(feature = "openai-responses")]
    pub async fn responses(
        &self,
        request: &impl Serialize,
    ) -> Result<async_openai::types::responses::Response, OpenAiClientError> {
        self.post("/responses", request).await
    }

    /// One call on the transport's runtime (any executor can await it; dropping it cancels).
    async fn post<T: DeserializeOwned + Send + 'static>(
        &self,
        path: &str,
        request: &impl Serialize,
    ) -> Result<T, OpenAiClientError> {
        let transport = |reason: String| OpenAiClientError::Transport { reason };
        let body = serde_json::to_vec(request)
            .map_err(|e| transport(format!("cannot serialize the request: {e}")))?;
        let url = format!("{}{path}", self.core.settings.base_url);
        on_runtime(call::<T>(self.core.clone(), url, body), transport).await
    }
}

/// One call: its attempts, retried as the settings say.
async fn call<T: DeserializeOwned>(
    core: ClientCore<()>,
    url: String,
    body: Vec<u8>,
) -> Result<T, OpenAiClientError> {
    let settings = &core.settings;
    let key = Some(settings.api_key.as_str()).filter(|k| !k.is_empty());
    if key.is_some() {
        // Checked before any connection: the key never goes in the clear to a host not trusted.
        if let Some(host) = insecure_host(&url, &settings.insecure_http_hosts) {
            return Err(OpenAiClientError::InsecureTransport { host });
        }
    }
    let client = core
        .connection()
        .map_err(|reason| OpenAiClientError::Transport { reason })?;
    let mut headers = Vec::new();
    if let Some(key) = key {
        headers.push(("authorization", format!("Bearer {key}")));
    }
    let attempt = || async {
        let answer = match client.post_json(&url, &headers, body.clone()).await {
            Ok(answer) => answer,
            Err(Transport::Connect(reason)) => {
                let server = settings.base_url.clone();
                let reason = settings.error_text().excerpt(&reason);
                return Attempt::Transient(OpenAiClientError::Connect { server, reason }, None);
            }
            Err(Transport::Timeout) => {
                let after = client.timeout();
                return Attempt::Fatal(OpenAiClientError::Timeout { after });
            }
            Err(Transport::Other(reason)) => {
                let reason = settings.error_text().excerpt(&reason);
                return Attempt::Fatal(OpenAiClientError::Transport { reason });
            }
        };
        let text = String::from_utf8_lossy(&answer.body);
        if !(200..300).contains(&answer.status) {
            let error = OpenAiClientError::Http {
                status: answer.status,
                message: settings.error_text().excerpt(&error_message(&text)),
            };
            return match answer.status == 429 || (500..600).contains(&answer.status) {
                true => Attempt::Transient(error, retry_after(&answer.headers)),
                false => Attempt::Fatal(error),
            };
        }
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

/// The reply of `text` read without its `usage` block, when only that block was in another
/// shape than async-openai's (a compatible server's, or OpenAI's documented examples without
/// `input_tokens_details`): the bill's details are not a reason to lose the model's reply.
fn without_usage<T: DeserializeOwned>(text: &str) -> Option<T> {
    let mut reply: serde_json::Value = serde_json::from_str(text).ok()?;
    reply.as_object_mut()?.remove("usage")?;
    serde_json::from_value(reply).ok()
}

/// Why [`OpenAiClient::chat`] or `OpenAiClient::responses` gave no reply. No variant,
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
            OpenAiClientError::Connect { .. } | OpenAiClientError::Timeout { .. } => true,
            OpenAiClientError::InsecureTransport { .. }
            | OpenAiClientError::Transport { .. }
            | OpenAiClientError::Malformed { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_in_no_debug_and_is_scrubbed_from_echoes() {
        let client = OpenAiClient::new("sk-secret-42").base_url("http://127.0.0.1:1/v1/");
        assert!(!format!("{client:?}").contains("sk-secret-42"));
        assert_eq!(client.core.settings.base_url, "http://127.0.0.1:1/v1");
        assert_eq!(
            client
                .core
                .settings
                .error_text()
                .excerpt("bad key sk-secret-42!"),
            "bad key <api key>!"
        );
        assert!(OpenAiClient::new("  ").core.settings.api_key.is_empty());
    }
}
