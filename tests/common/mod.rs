//! What the integration tests share: the guide's `MigrationState` (docs/compacting.md; from
//! the shared fixtures crate, which benches and fuzz use too), a temporary directory, the
//! path of an example's binary, and the random kill delays of the process tests.
// Each test binary uses a part of what is shared.
#![allow(dead_code, unused_imports)]

use compaction::{Compactor, Extractive, Store};
pub use compaction_fixtures::migration::{spilling_state, MigrationState, Subtask, ToolCall};
use std::path::PathBuf;

/// The budget at which `spilling_state()` spills protected state and effect records to the
/// store and summarizes `ci_log` (its source goes to the store too).
pub const SPILLING_BUDGET: usize = 450;

/// A compactor on `store` at [`SPILLING_BUDGET`], with the extractive summarizer.
pub fn spilling_compactor<T: Store + Clone + 'static>(store: &T) -> Compactor {
    Compactor::builder()
        .budget(SPILLING_BUDGET)
        .summarizer(Extractive)
        .store(store.clone())
        .build()
        .unwrap()
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "compaction-test-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// A database file inside the directory.
    pub fn db(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `target/<profile>/examples/<name>`, beside the running test's `deps/` directory: an example
/// a test runs as a process, built first with `cargo build --example <name> --features
/// <features>` (`.ci/run` does).
pub fn example_binary(name: &str, features: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let binary = profile_dir.join("examples").join(name);
    assert!(
        binary.is_file(),
        "{} is missing: build it first with `cargo build --example {name} --features {features}`",
        binary.display()
    );
    binary
}

/// The name libtest gives test `name` of the module at `module_path` (pass `module_path!()`):
/// how a test re-runs one test of its own binary as a child process with `--exact`. The suites
/// are modules of a few test binaries, so a test's name starts with its module's path below
/// the crate (`sqlite_store::child_store_entry`).
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, below_the_crate)) => format!("{below_the_crate}::{name}"),
        None => name.to_owned(),
    }
}

/// xorshift64*: the kill delays and victims of the process tests, from a seed they print for a
/// rerun (no dependency).
pub struct KillRng(pub u64);

impl KillRng {
    /// A seed from the clock (odd, so never the generator's fixed point 0).
    pub fn from_clock() -> KillRng {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        KillRng(nanos | 1)
    }

    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The next number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
