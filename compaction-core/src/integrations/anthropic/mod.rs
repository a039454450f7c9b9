//! Anthropic's Messages API (feature `anthropic-types`): our own serde types for its messages,
//! requests and responses, conversions both ways with our [`Message`]s, and a checker of the
//! conversation rules, and `ClaudeEstimate` (Claude's token count from `o200k_base` with a
//! margin: no HTTP stack), and [`StreamAssembler`] (a streamed reply's events assembled into
//! the non-streamed [`AnthropicResponse`]). Feature `anthropic` adds `AnthropicSummarizer`
//! (summaries from Claude) and `AnthropicClient` (the agent's own calls, with retries, whole or
//! streamed). A session's
//! request converts with `SessionRequest::anthropic_request` (its cache breakpoint at the
//! stable-prefix boundary), and `Session::push_response` takes an [`AnthropicResponse`].
//! Reached as `compaction::anthropic`.
//!
//! Why our own types: the maintained crates were evaluated (December 2026). `claudius` 0.33
//! ships its types only with its client (reqwest, tokio "full", rustyline, serde_yaml) and turns
//! on serde_json's `preserve_order` for the whole build; its `ThinkingBlock` keeps two fields and
//! defaults a missing signature to "", and `tool_use.input` is a `serde_json::Value` (a huge
//! integer becomes a float). `misanthropic` 1.0.0-alpha.25 is an alpha on reqwest 0.12 with a
//! dozen other dependencies and models thinking as `{thought, signature}`. Neither replays a
//! block byte-for-byte, which is what the provider checks; the API surface compaction needs is
//! six block kinds, so the types here are written from the API reference and tested against
//! recorded request and response JSON (`fixtures/anthropic/`).
//!
//! [`Message`]: crate::Message

mod caching;
mod convert;
mod estimate;
mod rules;
mod session;
#[cfg(feature = "anthropic")]
mod summarizer;
mod thinking;
mod tool;
pub(crate) mod wire;

pub use caching::AnthropicCaching;
pub use convert::{
    from_anthropic, from_anthropic_response, to_anthropic, AnthropicConversation, AnthropicError,
};
pub use estimate::ClaudeEstimate;
pub use rules::{check_anthropic, AnthropicRuleError};
#[cfg(feature = "anthropic")]
pub use summarizer::{AnthropicSummarizer, DEFAULT_INSTRUCTIONS};
pub use tool::resolve_pointer_anthropic_tool;
// Streamed replies are assembled, and calls made, beside the wires (`model_calls/`).
#[cfg(feature = "anthropic")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic")))]
pub use crate::model_calls::anthropic_client::{AnthropicClient, AnthropicClientError};
pub use crate::model_calls::anthropic_stream::{AnthropicStreamError, StreamAssembler};
pub use thinking::MIN_THINKING_BUDGET;
pub use wire::{
    AnthropicMessage, AnthropicRequest, AnthropicResponse, AnthropicRole, AnthropicUsage,
    CacheControl, ContentBlock, SystemBlock, ToolResultContent,
};
