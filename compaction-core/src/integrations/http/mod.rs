//! The summarizers' HTTPS transport, shared by every model client behind a feature (`openai`,
//! `anthropic`): one POST of JSON over HTTP/1.1, TLS by rustls on the `ring` provider, bounded
//! retries honouring `Retry-After`, and a runtime of its own so any executor can await it.
//!
//! Why not the provider crates' own clients: async-openai (and most others) run on reqwest,
//! whose rustls without aws-lc is its `rustls-no-provider` feature; cargo unifies that feature
//! into the user's own reqwest, and their client then panics at `Client::new()` unless they
//! install a crypto provider by hand. hyper-rustls without default features names no provider,
//! so nothing here changes the user's dependency graph, and the provider is handed to our own
//! TLS configuration, never installed process-wide.

pub(crate) mod client;
pub(crate) mod guard;
pub(crate) mod retry;
pub(crate) mod summary;
pub(crate) mod wait;
