//! `HfTokenizer`: a [`TokenCounter`] from a Hugging Face `tokenizer.json` (Llama, Qwen,
//! Mistral and most open models ship one), through the `tokenizers` crate.

use crate::tokens::TokenCounter;
use std::path::Path;

/// The `tokenizers` crate this counter uses, re-exported so a tokenizer you build in code is of
/// the same version as ours.
pub use tokenizers;

/// Why a `tokenizer.json` could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("cannot load the tokenizer from {origin}: {source}")]
pub struct HfTokenizerError {
    origin: String,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl HfTokenizerError {
    /// Where the tokenizer was read from (a path, or `bytes`).
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

/// Exact token counts with a model's own tokenizer, loaded from its `tokenizer.json`.
///
/// It counts the tokens of the text alone: no special tokens (BOS/EOS) are added, and the
/// per-message overhead of a chat template is the chat formula's job
/// ([`chat_tokens`](crate::transcript::chat_tokens)). Truncation and padding configured in the
/// file are switched off, since either would make the count wrong. If the tokenizer fails on a
/// text (it does not for the usual models), the count is the text's byte length, an
/// over-estimate for byte-level and word-piece tokenizers, so the budget is still kept.
///
/// ```no_run
/// use compaction::{Compactor, HfTokenizer};
///
/// let qwen = HfTokenizer::from_file("models/qwen2.5-7b/tokenizer.json")?.named("qwen2.5");
/// let compactor = Compactor::builder().budget(32_000).token_counter(qwen).build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct HfTokenizer {
    tokenizer: tokenizers::Tokenizer,
    name: String,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizer")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl HfTokenizer {
    /// Loads a `tokenizer.json` file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, HfTokenizerError> {
        let path = path.as_ref();
        let tokenizer =
            tokenizers::Tokenizer::from_file(path).map_err(|source| HfTokenizerError {
                origin: path.display().to_string(),
                source,
            })?;
        Self::from_tokenizer(tokenizer)
    }

    /// Loads a `tokenizer.json` from its bytes.
    pub fn from_bytes(json: impl AsRef<[u8]>) -> Result<Self, HfTokenizerError> {
        let tokenizer =
            tokenizers::Tokenizer::from_bytes(json).map_err(|source| HfTokenizerError {
                origin: "bytes".to_owned(),
                source,
            })?;
        Self::from_tokenizer(tokenizer)
    }

    /// Wraps a tokenizer built or loaded with the [`tokenizers`] crate (truncation and padding
    /// are switched off).
    pub fn from_tokenizer(mut tokenizer: tokenizers::Tokenizer) -> Result<Self, HfTokenizerError> {
        tokenizer
            .with_truncation(None)
            .map_err(|source| HfTokenizerError {
                origin: "the tokenizer's truncation settings".to_owned(),
                source,
            })?;
        tokenizer.with_padding(None);
        Ok(HfTokenizer {
            tokenizer,
            name: "hf-tokenizer".to_owned(),
        })
    }

    /// Sets the name reports show (default `hf-tokenizer`), e.g. the model's name.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The wrapped tokenizer.
    pub fn tokenizer(&self) -> &tokenizers::Tokenizer {
        &self.tokenizer
    }
}

impl TokenCounter for HfTokenizer {
    fn count(&self, text: &str) -> usize {
        match self.tokenizer.encode(text, false) {
            Ok(encoding) => encoding.len(),
            // Never under-count: a token is at least one byte for the usual vocabularies.
            Err(_) => text.len(),
        }
    }

    fn name(&self) -> &str {
        &self.name
    }
}
