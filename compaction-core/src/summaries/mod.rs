//! Summaries: the [`Summarizer`] an author configures (and the offline [`Extractive`]), each
//! summary held to its contract (`contract.rs`: not empty, not over its target), and the
//! summary cache (`cache.rs`) that makes an unchanged field cost nothing the next time.
//!
//! Only values whose type is [`Summarizable`](crate::Summarizable) and whose field allows it ever
//! reach a summarizer; the engine checks every request against the schema first.

pub(crate) mod cache;
pub(crate) mod contract;

pub use cache::summary_cache_problem;

use crate::utf8::{ceil_char_boundary, floor_char_boundary};
use std::future::Future;

/// What the engine asks a summarizer for.
#[derive(Debug, Clone, Copy)]
pub struct SummaryRequest<'a> {
    /// The field's concrete path (`ci_log`, `subtasks[2].notes`).
    pub field: &'a str,
    /// The text to summarize: the raw string for text fields, JSON for other values.
    pub text: &'a str,
    /// The most tokens the summary may have. Longer output is an error, never cut.
    pub target_tokens: usize,
}

/// A summarizer failure. Every one of these ends compaction with
/// [`CompactionError::Summarizer`](crate::CompactionError::Summarizer); the engine never cuts an
/// over-long summary or accepts an empty one.
#[derive(Debug, thiserror::Error)]
pub enum SummarizerError {
    /// The summarizer itself failed (model error, timeout, network).
    #[error(
        "summarizer failed on `{field}`: {message} (to evict the field instead, build the \
         compactor with `.evict_on_summarizer_error(true)`)"
    )]
    Failed {
        /// The field being summarized.
        field: String,
        /// What went wrong.
        message: String,
    },
    /// The summarizer returned nothing.
    #[error(
        "summarizer returned an empty summary for `{field}` (to evict the field instead, build \
         the compactor with `.evict_on_summarizer_error(true)`)"
    )]
    Empty {
        /// The field being summarized.
        field: String,
    },
    /// The summary is longer than the target it was given.
    #[error(
        "summary of `{field}` has {tokens} tokens, over its target of {target}; the engine never \
         cuts a summary (to evict the field instead, build the compactor with \
         `.evict_on_summarizer_error(true)`)"
    )]
    OverLong {
        /// The field being summarized.
        field: String,
        /// Tokens of the returned summary.
        tokens: usize,
        /// The target it was given.
        target: usize,
    },
    /// The model server answered with an error status (after any retries it allows: 429 and
    /// 5xx are retried, other 4xx are not). Carries the status and the start of the body.
    #[error(
        "summarizer request for `{field}` failed with HTTP {status}: {body} (to evict the field \
         instead, build the compactor with `.evict_on_summarizer_error(true)`)"
    )]
    Http {
        /// The field being summarized.
        field: String,
        /// The HTTP status of the last answer.
        status: u16,
        /// The start of the response body (a short excerpt, never the whole body).
        body: String,
    },
    /// The model server did not answer within the configured timeout (on every attempt).
    #[error(
        "summarizer request for `{field}` timed out after {after:?} (to evict the field \
         instead, build the compactor with `.evict_on_summarizer_error(true)`)"
    )]
    Timeout {
        /// The field being summarized.
        field: String,
        /// The timeout of one attempt.
        after: std::time::Duration,
    },
    /// The model server answered 200 with something that is not a usable chat completion
    /// (not JSON, no choice, no text content, a refusal).
    #[error(
        "summarizer answer for `{field}` is malformed: {body} (to evict the field instead, \
         build the compactor with `.evict_on_summarizer_error(true)`)"
    )]
    Malformed {
        /// The field being summarized.
        field: String,
        /// What was wrong, with the start of the body.
        body: String,
    },
    /// The summarizer would send its API key over plain `http://` to a host that is not
    /// loopback and was not opted in by name; nothing was sent, no connection was made.
    #[error(
        "refusing to send the API key for `{field}` over plain http to `{host}`: write the base \
         URL as `https://{host}...`, or, if the network to that host is trusted, build the \
         summarizer with `.allow_insecure_http_to(\"{host}\")`"
    )]
    InsecureTransport {
        /// The field being summarized.
        field: String,
        /// The host of the base URL, as written there.
        host: String,
    },
}

impl SummarizerError {
    /// A failure with a message, for summarizer implementations.
    pub fn failed(field: &str, message: impl Into<String>) -> Self {
        SummarizerError::Failed {
            field: field.to_owned(),
            message: message.into(),
        }
    }
}

/// Turns text into a shorter surrogate. Implement it with `async fn` for a model call:
///
/// ```
/// use compaction::{Summarizer, SummaryRequest, SummarizerError};
///
/// struct FirstLine;
/// impl Summarizer for FirstLine {
///     async fn summarize(&self, req: SummaryRequest<'_>) -> Result<String, SummarizerError> {
///         Ok(req.text.lines().next().unwrap_or_default().chars().take(80).collect())
///     }
/// }
/// ```
pub trait Summarizer: Send + Sync {
    /// Summarizes `request.text` in at most `request.target_tokens` tokens.
    fn summarize(
        &self,
        request: SummaryRequest<'_>,
    ) -> impl Future<Output = Result<String, SummarizerError>> + Send;

    /// What makes this summarizer's output what it is (model, instructions, version), for the
    /// summary cache: a field whose source, target and summarizer identity are unchanged is
    /// not summarized again. `None` (the default) never caches, which is right for summarizers
    /// whose output may change between calls for the same input.
    fn identity(&self) -> Option<String> {
        None
    }
}

/// Adapts a synchronous closure into a [`Summarizer`].
///
/// ```
/// use compaction::{FnSummarizer, SummaryRequest};
/// let s = FnSummarizer::new(|req: SummaryRequest<'_>| Ok(format!("{} bytes", req.text.len())));
/// # let _ = s;
/// ```
pub struct FnSummarizer<F>(F);

impl<F> FnSummarizer<F>
where
    F: Fn(SummaryRequest<'_>) -> Result<String, SummarizerError> + Send + Sync,
{
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        FnSummarizer(f)
    }
}

impl<F> Summarizer for FnSummarizer<F>
where
    F: Fn(SummaryRequest<'_>) -> Result<String, SummarizerError> + Send + Sync,
{
    async fn summarize(&self, request: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        (self.0)(request)
    }
}

/// A deterministic, offline summarizer: keeps the head and the tail of the text and marks the
/// cut with `[... N bytes elided ...]`. It never invents text, so it cannot paraphrase; it only
/// drops the middle. The default for examples and benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extractive;

impl Extractive {
    /// The extract of `text` for a summary of at most `target_tokens` tokens.
    ///
    /// It keeps at most one byte per token of the target (minus room for the cut marker):
    /// every BPE token covers at least one byte, so the extract fits whatever the encoding.
    pub fn extract(text: &str, target_tokens: usize) -> String {
        // A byte is never less than zero tokens and BPE tokens cover at least one byte, so
        // keeping at most `target_tokens - marker` bytes can never exceed the target.
        const MARKER_ALLOWANCE: usize = 16;
        // The cut mark when the target is too small for the full marker: 3 bytes, 1 token.
        const SHORT_MARK: &str = "\u{2026}";
        let out = if text.len() <= target_tokens {
            text.to_owned()
        } else if target_tokens <= MARKER_ALLOWANCE {
            // Too small a target for head, marker and tail: the head alone, marked as cut.
            let head = floor_char_boundary(text, target_tokens.saturating_sub(SHORT_MARK.len()));
            format!("{}{SHORT_MARK}", &text[..head])
        } else {
            let keep = target_tokens - MARKER_ALLOWANCE;
            let head = floor_char_boundary(text, keep / 2);
            let tail_start = ceil_char_boundary(text, text.len() - (keep - keep / 2));
            format!(
                "{}[... {} bytes elided ...]{}",
                &text[..head],
                tail_start - head,
                &text[tail_start..]
            )
        };
        // Never an empty (or blank) extract: the engine refuses those as a summarizer failure.
        if out.trim().is_empty() {
            return SHORT_MARK.to_owned();
        }
        out
    }
}

impl Summarizer for Extractive {
    async fn summarize(&self, request: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        Ok(Extractive::extract(request.text, request.target_tokens))
    }

    fn identity(&self) -> Option<String> {
        // Deterministic: the same text and target always give the same extract.
        Some("compaction::Extractive/1".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{TokenCounter, Tokenizer};

    #[test]
    fn extract_fits_its_target_and_keeps_ends() {
        let text = "BEGIN ".to_string() + &"middle text ".repeat(500) + " END";
        for target in [20, 50, 300] {
            let out = Extractive::extract(&text, target);
            assert!(
                Tokenizer::O200kBase.count(&out) <= target,
                "target {target}: {out}"
            );
            assert!(out.contains("elided"));
        }
        let out = Extractive::extract(&text, 300);
        assert!(out.starts_with("BEGIN"));
        assert!(out.ends_with("END"));
        assert_eq!(Extractive::extract("short", 100), "short");
    }

    #[test]
    fn extract_respects_char_boundaries() {
        let text = "é".repeat(1000);
        let out = Extractive::extract(&text, 41);
        assert!(out.contains("elided"));
    }
}
