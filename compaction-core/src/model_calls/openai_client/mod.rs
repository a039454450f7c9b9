//! [`OpenAiClient`]: an agent's model calls to an OpenAI-compatible server (chat completions, and
//! the Responses API with `openai-responses`) on the crate's own HTTPS transport, with bounded
//! retries of 429, 5xx and refused connections, honouring `retry-after`. The summarizers' call
//! made public for the agent's own turn, so a template needs no HTTP code of its own.

mod attempt;
mod error;

pub use error::OpenAiClientError;

use crate::integrations::http::summary::env;
use crate::model_calls::client::{on_runtime, ClientCore};
use crate::model_calls::openai_client::attempt::{call, call_stream};
use crate::model_calls::openai_stream::ChatStreamAssembler;
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

    /// Posts `request` with `"stream": true` (and `stream_options.include_usage`, unless the
    /// request sets its own) to `{base_url}/chat/completions` and returns the completion its
    /// chunks make, the same [`chat`](Self::chat) returns (see
    /// [`ChatStreamAssembler`](crate::openai::ChatStreamAssembler)). Nothing is handed out
    /// before the whole reply, so a stream that broke or ended early is made again from the
    /// start, within the same retries as a 429 or 5xx.
    pub async fn chat_stream(
        &self,
        request: &impl Serialize,
    ) -> Result<CreateChatCompletionResponse, OpenAiClientError> {
        let transport = |reason: String| OpenAiClientError::Transport { reason };
        let body = streamed(request, true)?;
        let url = format!("{}/chat/completions", self.core.settings.base_url);
        let call = call_stream::<ChatStreamAssembler>(self.core.clone(), url, body);
        on_runtime(call, transport).await
    }

    /// Posts `request` (a Responses API request) with `"stream": true` to
    /// `{base_url}/responses` and returns the `Response` its events make, the same
    /// [`responses`](Self::responses) returns (see
    /// [`ResponsesStreamAssembler`](crate::openai::ResponsesStreamAssembler)). A stream that
    /// broke, ended early, or that the server ended with a server-side error is made again from
    /// the start, within the same retries.
    #[cfg(feature = "openai-responses")]
    pub async fn responses_stream(
        &self,
        request: &impl Serialize,
    ) -> Result<async_openai::types::responses::Response, OpenAiClientError> {
        use crate::model_calls::responses_stream::ResponsesStreamAssembler;
        let transport = |reason: String| OpenAiClientError::Transport { reason };
        let body = streamed(request, false)?;
        let url = format!("{}/responses", self.core.settings.base_url);
        let call = call_stream::<ResponsesStreamAssembler>(self.core.clone(), url, body);
        on_runtime(call, transport).await
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

/// `request` as a streamed call's body: `"stream": true` set, and for chat completions
/// `stream_options.include_usage` unless the request sets its own (the usage chunk).
fn streamed(request: &impl Serialize, usage: bool) -> Result<Vec<u8>, OpenAiClientError> {
    let transport = |reason: String| OpenAiClientError::Transport { reason };
    let mut body = serde_json::to_value(request)
        .map_err(|e| transport(format!("cannot serialize the request: {e}")))?;
    let Some(fields) = body.as_object_mut() else {
        return Err(transport("the request is not a JSON object".into()));
    };
    fields.insert("stream".into(), serde_json::Value::Bool(true));
    if usage {
        fields
            .entry("stream_options")
            .or_insert_with(|| serde_json::json!({"include_usage": true}));
    }
    serde_json::to_vec(&body).map_err(|e| transport(format!("cannot serialize the request: {e}")))
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
