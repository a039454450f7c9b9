//! The compile-time contract of `#[derive(Compactable)]` and `#[derive(Summarizable)]`: every
//! case under `ui/fail/` must fail to compile with exactly the reviewed `.stderr` next to it,
//! and every case under `ui/pass/` must compile and its assertions hold.
//!
//! The `.stderr` files are pinned to the workspace toolchain (stable 1.95). Regenerate them
//! with `TRYBUILD=overwrite cargo test -p compaction-derive-ui --test ui`, then review every diff.
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
    the_trybuild_project_gets_the_workspace_build_settings();
    trybuild::TestCases::new().compile_fail("tests/ui/fail/**/*.rs");
}

/// Copies the workspace's `.cargo/config.toml` beside trybuild's project, into
/// `<target>/tests/trybuild/.cargo/`.
///
/// Why: cargo reads that file from the directories above where it runs, and trybuild runs its
/// cargo in `<target>/tests/trybuild/compaction-derive`. With the target directory inside the
/// repository the workspace's file is found on the way up; with `CARGO_TARGET_DIR` elsewhere
/// (`/tmp/...`, a shared cache) it is not, and the fail cases' build would compile bpe-openai's
/// build script unoptimized, whose run to make its token tables then takes minutes instead of
/// seconds. The copy makes the build the same wherever the target directory is (both files hold
/// the same settings when both are found).
fn the_trybuild_project_gets_the_workspace_build_settings() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version=1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata: {output:?}");
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let dir = |key: &str| {
        std::path::PathBuf::from(
            metadata[key]
                .as_str()
                .expect("cargo metadata names the dir"),
        )
    };
    let settings = dir("workspace_root").join(".cargo/config.toml");
    let beside = dir("target_directory").join("tests/trybuild/.cargo");
    std::fs::create_dir_all(&beside).expect("the trybuild directory can be made");
    std::fs::copy(&settings, beside.join("config.toml")).expect("the build settings are copied");
}
