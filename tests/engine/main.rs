//! The compaction engine: planning, summaries, spills, failures and the numbers the guide states.
//!
//! One test binary for these suites (each file below is one of them, a module here): a
//! binary per file made the cold `cargo test` spend most of its build linking ~50 test
//! binaries and compiling the library's generics once in each. Shared helpers are
//! declared once, here.

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/mod.rs"]
mod support;

mod failure_catalog;
mod faults;
mod guide_numbers;
mod guide_numbers_operating;
mod guide_numbers_sessions;
mod plan_minimal;
mod prop_compact;
mod prop_compact_regressions;
mod prop_repeated;
mod rehydrate_complete;
mod small_windows;
mod summary_cache;
mod summary_source_bound;
mod tokio_spawn;
mod tracing_secrets;
