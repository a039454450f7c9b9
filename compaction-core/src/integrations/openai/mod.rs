//! The OpenAI chat protocol through `async-openai`, for any compatible server (OpenAI, Azure
//! OpenAI, vLLM, llama.cpp, Ollama, OpenRouter). Reached as `compaction::openai`.
//!
//! - feature `openai-types` (types only, no HTTP client): conversions between our messages and
//!   async-openai's chat request messages, `Compacted::openai_messages()`, and the pointer tool
//!   as its tool type; a session's turn in its types (`Session::push_response` takes a chat
//!   completion or its message, `SessionRequest::openai_messages()`);
//! - feature `openai-responses` (implies `openai-types`; types only): conversions between our
//!   messages and async-openai's Responses input and output items (`reasoning` with its
//!   `encrypted_content` replayed unchanged), the item rules, and
//!   `Compacted::responses_input()`;
//! - feature `openai` (implies `openai-types`): [`OpenAiSummarizer`], summaries from a chat
//!   completions server (async-openai's request and response types, sent through the crate's
//!   own HTTPS transport: rustls on `ring`, nothing unified into your own async-openai client),
//!   and [`OpenAiClient`], the agent's own model calls (chat completions; Responses too with
//!   `openai-responses`) on the same transport, with retries.

mod messages;
#[cfg(feature = "openai-responses")]
mod responses;
#[cfg(feature = "openai-responses")]
mod responses_rules;
mod session;
#[cfg(feature = "openai")]
mod summarizer;

pub use messages::{
    from_openai_message, from_openai_messages, from_openai_response_message,
    resolve_pointer_chat_tool, to_openai_message, to_openai_messages, tool_call_from_openai,
    tool_call_to_openai, OpenAiMessageError,
};
#[cfg(feature = "openai-responses")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai-responses")))]
pub use responses::{
    from_responses_input, from_responses_output, resolve_pointer_response_tool, to_responses_input,
};
#[cfg(feature = "openai-responses")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai-responses")))]
pub use responses_rules::{check_responses_input, ResponsesError, ResponsesRuleError};
// Streamed chat completions are assembled beside the wires (`model_calls/`), re-exported here.
pub use crate::model_calls::openai_stream::{ChatStreamAssembler, ChatStreamError};
#[cfg(feature = "openai-responses")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai-responses")))]
pub use crate::model_calls::responses_stream::{ResponsesStreamAssembler, ResponsesStreamError};
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use summarizer::{OpenAiSummarizer, DEFAULT_INSTRUCTIONS};
// The agent's own model calls, beside the wires (`model_calls/`), re-exported here.
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use crate::model_calls::openai_client::{OpenAiClient, OpenAiClientError};

/// The `async-openai` crate these conversions speak, re-exported so your request types are the
/// same as ours (its chat types are in `async_openai::types::chat`, its Responses types in
/// `async_openai::types::responses`).
pub use async_openai;
