//! The derive, the state types and their wire forms: what a user's types and the public API promise.
//!
//! One test binary for these suites (each file below is one of them, a module here): a
//! binary per file made the cold `cargo test` spend most of its build linking ~50 test
//! binaries and compiling the library's generics once in each. Shared helpers are
//! declared once, here.

// A user who renamed the dependency (`derive_pass::renamed`): at the crate root, so
// `::agent_compaction` resolves through the extern prelude, as it does after a Cargo rename.
extern crate compaction as agent_compaction;

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/mod.rs"]
mod support;

mod canonical_roundtrip;
mod chat_format;
mod derive_pass;
mod derive_roundtrip;
mod effect_log_serde;
mod error_values;
mod error_wording;
mod handwritten;
mod instance_bounds;
mod message_model;
mod nested_order;
mod public_api;
mod renderer;
mod roundtrip;
mod schema;
