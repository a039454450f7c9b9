//! The backends' conformance suites (memory, SQLite, and PostgreSQL with the `postgres` feature) and the ledger binding.
//!
//! One test binary for these suites (each file below is one of them, a module here): a
//! binary per file made the cold `cargo test` spend most of its build linking ~50 test
//! binaries and compiling the library's generics once in each. Shared helpers are
//! declared once, here.

#[path = "../common/mod.rs"]
mod common;
#[path = "../conformance/mod.rs"]
mod conformance;
#[cfg(feature = "postgres")]
#[path = "../pg/mod.rs"]
mod pg;

mod conformance_checkpoint;
mod conformance_fence;
mod conformance_gc;
mod conformance_ledger;
mod conformance_store;
mod ledger_binding;
#[cfg(feature = "postgres")]
mod pg_fence;
