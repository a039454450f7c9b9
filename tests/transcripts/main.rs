//! Transcripts and the `Session`: requests, the pointer tool, read-backs, recovery and resume.
//!
//! One test binary for these suites (each file below is one of them, a module here): a
//! binary per file made the cold `cargo test` spend most of its build linking ~50 test
//! binaries and compiling the library's generics once in each. Shared helpers are
//! declared once, here.

#[path = "../common/mod.rs"]
mod common;
#[path = "../pointer_fixture/mod.rs"]
mod pointer_fixture;
#[path = "../session_driver/mod.rs"]
mod session_driver;
#[path = "../session_faults/mod.rs"]
mod session_faults;

mod ledger_errors;
mod opening;
mod pointer_tool;
mod pointer_tool_checkpoints;
mod readback_classes;
mod request_room;
mod request_tools;
mod run_tools;
mod session;
mod session_loop;
mod session_points;
mod session_records;
mod session_recovery;
mod session_recovery_twins;
mod session_resume;
mod state_update_lists;
mod state_update_records;
mod transcript_engine;
mod transcript_prop;
mod transcript_requests;
mod verbatim_first;
mod window_forgery;
