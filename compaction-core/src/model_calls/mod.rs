//! Model calls: each wire's streamed reply assembled into exactly what `push_response` takes
//! (Anthropic's server-sent events, OpenAI's chat completion chunks and Responses events), and
//! the Anthropic
//! Messages and OpenAI clients with bounded retries on the crate's own HTTPS transport.
//!
//! A room of its own, beside `integrations/` (whose wire types it builds): the public names are
//! re-exported from `compaction::anthropic` and `compaction::openai`.

#[cfg(feature = "anthropic")]
pub(crate) mod anthropic_client;
#[cfg(feature = "anthropic-types")]
pub(crate) mod anthropic_stream;
#[cfg(any(feature = "anthropic", feature = "openai"))]
pub(crate) mod client;
#[cfg(feature = "openai")]
pub(crate) mod openai_client;
#[cfg(feature = "openai-types")]
pub(crate) mod openai_stream;
#[cfg(feature = "openai-responses")]
pub(crate) mod responses_stream;
#[cfg(any(feature = "anthropic-types", feature = "openai-types"))]
pub(crate) mod sse;
