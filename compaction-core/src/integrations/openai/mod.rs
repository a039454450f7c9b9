//! The OpenAI protocol, for any compatible server (OpenAI, Azure OpenAI, vLLM, llama.cpp,
//! Ollama, OpenRouter): [`OpenAiSummarizer`] (feature `openai`). Reached as
//! `compaction::openai`.

#[cfg(feature = "openai")]
mod summarizer;

#[cfg(feature = "openai")]
pub use summarizer::{OpenAiSummarizer, DEFAULT_INSTRUCTIONS};
