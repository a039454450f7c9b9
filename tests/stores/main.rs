//! SQLite stores, ledgers and checkpoints: schemas, seals, tampering, crashes and races between processes.
//!
//! One test binary for these suites (each file below is one of them, a module here): a
//! binary per file made the cold `cargo test` spend most of its build linking ~50 test
//! binaries and compiling the library's generics once in each. Shared helpers are
//! declared once, here.

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/mod.rs"]
mod support;
#[macro_use]
#[path = "../seals/mod.rs"]
mod seals;
#[path = "../fleet/mod.rs"]
mod fleet;

mod checkpoint_schema;
mod fleet_kills;
mod keyed_seals;
mod sqlite_crash;
mod sqlite_ledger;
mod sqlite_ledger_scopes;
mod sqlite_open_race;
mod sqlite_resume;
mod sqlite_store;
mod tamper;
