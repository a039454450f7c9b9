//! [`AnthropicSummarizer`]: a [`Summarizer`] on Anthropic's Messages API, on the shared HTTPS
//! transport (rustls on `ring`), with bounded retries and typed failures; and
//! [`ClaudeEstimate`], a token counter with the margin Claude's tokenizer needs over `o200k`.

use crate::integrations::anthropic::estimate::ClaudeEstimate;
use crate::integrations::anthropic::wire::{AnthropicResponse, ContentBlock};
use crate::integrations::http::summary::{
    summarize_on, summarizer_builder, LazyClient, Settings, SummaryWire,
};
use crate::summaries::{Summarizer, SummarizerError, SummaryRequest};
use std::sync::Arc;

pub use crate::integrations::http::summary::DEFAULT_INSTRUCTIONS;

/// The server when neither [`AnthropicSummarizer::base_url`] nor `ANTHROPIC_BASE_URL` names one.
const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The API version every request names.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Summaries from Claude on Anthropic's Messages API, for
/// [`CompactorBuilder::summarizer`](crate::CompactorBuilder::summarizer).
///
/// ```no_run
/// use compaction::anthropic::{AnthropicSummarizer, ClaudeEstimate};
/// use compaction::Compactor;
///
/// // Key and server default to ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL.
/// let compactor = Compactor::builder()
///     .budget(120_000)
///     .token_counter(ClaudeEstimate::default())
///     .summarizer(AnthropicSummarizer::new("claude-haiku-4-5").token_counter(ClaudeEstimate::default()))
///     .build()?;
/// # Ok::<(), compaction::CompactionError>(())
/// ```
///
/// Each call sends `POST {base_url}/v1/messages` (`x-api-key`, `anthropic-version:
/// 2023-06-01`) with the instructions as `system`, the field and its text in one user message,
/// and `max_tokens` set to the target; the answer's text blocks are the summary. Only fields the
/// schema lets be summarized ever reach it (protected fields, effect records, user messages and
/// opaque reasoning parts never do). The rest is [`OpenAiSummarizer`](crate::openai)'s contract:
///
/// - an answer over the target, or cut at `max_tokens` (`stop_reason: max_tokens`), is asked
///   for once more with a tighter instruction, then is [`SummarizerError::OverLong`];
/// - 429, 5xx (529 `overloaded_error` included) and refused connections are retried up to
///   [`max_retries`](Self::max_retries) times, waiting what `Retry-After` says, else an
///   exponential backoff from 250 ms; a wait longer than [`max_backoff`](Self::max_backoff)
///   ends the call at once;
/// - other 4xx are [`SummarizerError::Http`] (status, error type and message), a request past
///   the [`timeout`](Self::timeout) is [`SummarizerError::Timeout`], a 200 without text (or a
///   `refusal`) is [`SummarizerError::Malformed`], an empty answer [`SummarizerError::Empty`].
///
/// TLS is rustls on `ring` with the OS trust store, for this client only (no process-wide
/// provider is installed); the work runs on a small runtime shared process-wide, so any
/// executor can await it. [`identity`](Summarizer::identity) never includes the key.
#[derive(Clone)]
pub struct AnthropicSummarizer {
    settings: Arc<Settings>,
    wire: Arc<MessagesWire>,
    http: LazyClient,
}

impl std::fmt::Debug for AnthropicSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.settings.debug(f, "AnthropicSummarizer")
    }
}

impl AnthropicSummarizer {
    /// A summarizer on `model`, with the key from `ANTHROPIC_API_KEY` and the server from
    /// `ANTHROPIC_BASE_URL` (else `https://api.anthropic.com`); a 60 s timeout per request, 3
    /// retries, waits of at most 30 s, [`DEFAULT_INSTRUCTIONS`], and counting with
    /// [`ClaudeEstimate::default()`].
    pub fn new(model: impl Into<String>) -> Self {
        let settings = Settings::from_env(
            model.into(),
            "ANTHROPIC_BASE_URL",
            ANTHROPIC_BASE_URL,
            "ANTHROPIC_API_KEY",
            Arc::new(ClaudeEstimate::default()),
        );
        AnthropicSummarizer {
            settings: Arc::new(settings),
            wire: Arc::new(MessagesWire),
            http: LazyClient::default(),
        }
    }
}

// `base_url` (without the version: `https://api.anthropic.com`), `api_key` (sent as
// `x-api-key`), `timeout`, `max_retries`, `max_backoff`, `instructions`, `token_counter`.
summarizer_builder!(AnthropicSummarizer, "/v1/messages");

impl Summarizer for AnthropicSummarizer {
    async fn summarize(&self, request: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        summarize_on(&self.wire, &self.settings, &self.http, request).await
    }

    fn identity(&self) -> Option<String> {
        Some(
            self.settings
                .identity("compaction::anthropic::AnthropicSummarizer/1"),
        )
    }
}

/// One summary request on the Messages API.
struct MessagesWire;

impl SummaryWire for MessagesWire {
    type Reply = AnthropicResponse;
    const REPLY: &'static str = "a Messages API reply";

    fn request(
        &self,
        settings: &Settings,
        prompt: String,
        target: usize,
    ) -> (String, Vec<(&'static str, String)>, Vec<u8>) {
        let body = serde_json::json!({
            "model": settings.model,
            "max_tokens": u32::try_from(target).unwrap_or(u32::MAX),
            "system": settings.instructions,
            "messages": [{"role": "user", "content": prompt}],
        });
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
        if let Some(key) = &settings.api_key {
            headers.push(("x-api-key", key.clone()));
        }
        (
            format!("{}/v1/messages", settings.base_url),
            headers,
            body.to_string().into_bytes(),
        )
    }

    fn summary(&self, response: AnthropicResponse) -> Result<(String, bool), String> {
        let stop = response.stop_reason.as_deref();
        if stop == Some("refusal") {
            return Err("the model refused".to_owned());
        }
        let texts: Vec<&str> = response
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if texts.is_empty() {
            return Err("the answer has no text block".to_owned());
        }
        Ok((texts.concat(), stop == Some("max_tokens")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_names_model_server_and_prompt_never_the_key() {
        let a = AnthropicSummarizer::new("claude-x")
            .base_url("http://127.0.0.1:1/")
            .api_key("sk-ant-secret");
        let id = a.identity().expect("an identity");
        assert!(id.contains("model=claude-x") && id.contains("base_url=http://127.0.0.1:1 "));
        assert!(!id.contains("sk-ant-secret") && !format!("{a:?}").contains("sk-ant-secret"));
        assert_ne!(a.clone().instructions("Be terse.").identity(), a.identity());
    }
}
