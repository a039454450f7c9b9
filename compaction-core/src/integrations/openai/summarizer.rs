//! [`OpenAiSummarizer`]: a [`Summarizer`] on any OpenAI-compatible chat completions server, with
//! async-openai's request and response types on the shared HTTPS transport, bounded retries and
//! typed failures (never an error as a summary).

mod wire;

use self::wire::ChatWire;
use crate::integrations::http::summary::{run, summarizer_builder, Job, LazyClient, Settings};
use crate::summaries::{Summarizer, SummarizerError, SummaryRequest};
use crate::tokens::Tokenizer;
use std::sync::Arc;

pub use crate::integrations::http::summary::DEFAULT_INSTRUCTIONS;

/// The server when neither [`OpenAiSummarizer::base_url`] nor `OPENAI_BASE_URL` names one.
const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Summaries from a chat model on any OpenAI-compatible server (OpenAI, Azure OpenAI, vLLM,
/// llama.cpp, Ollama, OpenRouter, ...), for
/// [`CompactorBuilder::summarizer`](crate::CompactorBuilder::summarizer).
///
/// ```no_run
/// use compaction::openai::OpenAiSummarizer;
/// use compaction::{Compactor, Tokenizer};
/// use std::time::Duration;
///
/// // Key and server default to OPENAI_API_KEY and OPENAI_BASE_URL.
/// let summarizer = OpenAiSummarizer::new("gpt-4o-mini")
///     .base_url("http://localhost:8080/v1") // e.g. a local llama.cpp or vLLM server
///     .timeout(Duration::from_secs(30))
///     .max_retries(2);
/// let compactor = Compactor::builder()
///     .budget(8_000)
///     .token_counter(Tokenizer::O200kBase)
///     .summarizer(summarizer)
///     .build()?;
/// # Ok::<(), compaction::CompactionError>(())
/// ```
///
/// Only fields the schema lets be summarized ever reach it: protected fields, effect records and
/// user messages never do. Each call asks for at most the target (`max_completion_tokens`, and
/// the target stated in the prompt) and checks the answer with its
/// [`token_counter`](Self::token_counter):
///
/// - an answer over the target, or cut by the server at its limit (`finish_reason: length`), is
///   asked for once more with a tighter instruction, then is
///   [`SummarizerError::OverLong`];
/// - 429 and 5xx answers and refused connections are retried up to
///   [`max_retries`](Self::max_retries) times, waiting what `Retry-After` (or `retry-after-ms`)
///   says, else an exponential backoff from 250 ms; a wait longer than
///   [`max_backoff`](Self::max_backoff) is not waited: the call fails at once;
/// - other 4xx are [`SummarizerError::Http`] (status and the start of the body), a request past
///   the [`timeout`](Self::timeout) is [`SummarizerError::Timeout`], a 200 that is not a usable
///   chat completion is [`SummarizerError::Malformed`], an empty answer is
///   [`SummarizerError::Empty`].
///
/// A call therefore sends at most `2 × (1 + max_retries)` requests. The HTTP work runs on a
/// small tokio runtime the summarizer shares process-wide, so it works under any executor
/// (tokio, [`block_on`](crate::block_on), `compact_blocking`). HTTP/1.1 on hyper, TLS by rustls
/// with the `ring` provider and the operating system's trust store, configured for this client
/// only: the process-wide rustls provider is neither read nor installed, and your own
/// async-openai or reqwest client is not affected by this feature. `HTTPS_PROXY` is not read.
///
/// [`identity`](Summarizer::identity) is the model, the base URL and a hash of the
/// instructions (never the key), so cached summaries are reused only for the same model and
/// prompt.
#[derive(Clone)]
pub struct OpenAiSummarizer {
    settings: Arc<Settings>,
    wire: Arc<ChatWire>,
    http: LazyClient,
}

impl std::fmt::Debug for OpenAiSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.settings.debug(f, "OpenAiSummarizer")
    }
}

impl OpenAiSummarizer {
    /// A summarizer on `model`, with the key from `OPENAI_API_KEY` and the server from
    /// `OPENAI_BASE_URL` (else `https://api.openai.com/v1`), the organization and project from
    /// `OPENAI_ORG_ID` and `OPENAI_PROJECT_ID` when set; a 60 s timeout per request, 3
    /// retries, waits of at most 30 s, [`DEFAULT_INSTRUCTIONS`], and counting with
    /// [`Tokenizer::O200kBase`].
    pub fn new(model: impl Into<String>) -> Self {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let base_url = env("OPENAI_BASE_URL").unwrap_or_else(|| OPENAI_BASE_URL.to_owned());
        let settings = Settings::new(
            model.into(),
            base_url.trim_end_matches('/').to_owned(),
            env("OPENAI_API_KEY"),
            Arc::new(Tokenizer::O200kBase),
        );
        OpenAiSummarizer {
            settings: Arc::new(settings),
            wire: Arc::new(ChatWire {
                organization: env("OPENAI_ORG_ID"),
                project: env("OPENAI_PROJECT_ID"),
            }),
            http: LazyClient::default(),
        }
    }
}

// `base_url` (up to and including the API version: `http://host:8080/v1`), `api_key` (sent as
// `Authorization: Bearer ..`), `timeout`, `max_retries`, `max_backoff`, `instructions`,
// `token_counter`.
summarizer_builder!(OpenAiSummarizer, "/chat/completions");

impl Summarizer for OpenAiSummarizer {
    async fn summarize(&self, request: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        run(Job {
            wire: Arc::clone(&self.wire),
            settings: Arc::clone(&self.settings),
            http: Arc::clone(&self.http),
            field: request.field.to_owned(),
            text: request.text.to_owned(),
            target: request.target_tokens,
        })
        .await
    }

    fn identity(&self) -> Option<String> {
        Some(
            self.settings
                .identity("compaction::openai::OpenAiSummarizer/1"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_names_model_server_and_prompt_never_the_key() {
        let a = OpenAiSummarizer::new("m1")
            .base_url("http://127.0.0.1:1/v1/")
            .api_key("sk-secret-123");
        let id = a.identity().expect("an identity");
        assert!(id.contains("model=m1") && id.contains("base_url=http://127.0.0.1:1/v1 "));
        assert!(!id.contains("sk-secret-123"));
        assert!(!format!("{a:?}").contains("sk-secret-123"));
        let other_prompt = a.clone().instructions("Be terse.");
        assert_ne!(other_prompt.identity(), a.identity());
        let other_model = OpenAiSummarizer::new("m2").base_url("http://127.0.0.1:1/v1");
        assert_ne!(other_model.identity(), a.identity());
        // The key does not change what the output is.
        assert_eq!(a.clone().api_key("sk-other").identity(), a.identity());
    }
}
