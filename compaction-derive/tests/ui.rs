//! The compile-time contract of `#[derive(Compactable)]` and `#[derive(Summarizable)]`: every
//! case under `ui/fail/` must fail to compile with exactly the reviewed `.stderr` next to it,
//! and every case under `ui/pass/` must compile and its assertions hold.
//!
//! The `.stderr` files are pinned to the workspace toolchain (stable 1.95). Regenerate them
//! with `TRYBUILD=overwrite cargo test -p compaction-derive --test ui`, then review every diff.
//!
//! Laid out for build time. trybuild builds the fail cases as a crate of their own, with this
//! package's dev-dependencies (few: see `Cargo.toml`). With fail cases only, it checks them all
//! in one `cargo check`; a single pass case among them would make it `cargo build` every
//! dependency and then build and run each case with a cargo invocation of its own. So the pass
//! cases are modules of this test crate instead, built by the ordinary test build.

// A user who renamed the dependency (`pass/crate_override.rs`): at the crate root, so
// `::agent_compaction` resolves through the extern prelude, as it does after a Cargo rename.
extern crate compaction as agent_compaction;

#[path = "ui/pass/mod.rs"]
mod pass;

#[test]
fn compile_fail() {
    trybuild::TestCases::new().compile_fail("tests/ui/fail/**/*.rs");
}
