//! Bridges to outside crates, each behind its cargo feature: the core's traits and types on one
//! side, the crate's on the other. The core never names anything here.

#[cfg(feature = "anthropic-types")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic-types")))]
pub mod anthropic;
// The one function server bytes become error text through (the clients, the summarizers and
// the stream assemblers all use it).
#[cfg(any(feature = "anthropic-types", feature = "openai-types"))]
pub(crate) mod error_text;
#[cfg(feature = "hf-tokenizers")]
#[cfg_attr(docsrs, doc(cfg(feature = "hf-tokenizers")))]
pub mod hf_tokenizers;
#[cfg(feature = "_https")]
pub(crate) mod http;
#[cfg(feature = "openai-types")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai-types")))]
pub mod openai;
