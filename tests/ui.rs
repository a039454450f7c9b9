//! The compile-time contract of `#[derive(Compactable)]` and `#[derive(Summarizable)]`: every
//! case under `ui/fail/` must fail to compile with exactly the reviewed `.stderr` next to it,
//! and every case under `ui/pass/` must compile and run.
//!
//! The `.stderr` files are pinned to the workspace toolchain (stable 1.95). Regenerate them
//! with `TRYBUILD=overwrite cargo test --test ui`, then review every diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/**/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
