//! The operator CLI against SQLite databases: what each command prints, its exit codes, hostile
//! text escaped, damage reported.
//!
//! One test binary for these suites (each file below is one of them, a module here): a binary
//! per file made a cold `cargo test` spend its build linking them. `gc_concurrent` (a plain
//! `main` that is also its own writer process) and `postgres` (the `postgres` feature) stay
//! binaries of their own.

#[path = "../common/mod.rs"]
mod common;

mod conversation;
mod escapes;
mod handles;
mod inspect;
mod ledger;
mod operator_truth;
mod sessions;
mod tamper;
mod verify;
