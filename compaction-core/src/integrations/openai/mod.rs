//! The OpenAI protocol (any compatible server): [`OpenAiSummarizer`] (feature `openai`).
//! Reached as `compaction::openai`.

#[cfg(feature = "openai")]
mod summarizer;

#[cfg(feature = "openai")]
pub use summarizer::{OpenAiSummarizer, DEFAULT_INSTRUCTIONS};
