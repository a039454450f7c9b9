//! Adapters to the clients agents use, each behind its own cargo feature. The core never
//! names them; they build on its traits ([`Summarizer`](crate::Summarizer), `Message`).

#[cfg(feature = "openai-types")]
pub mod openai;
