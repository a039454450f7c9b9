//! What the integration tests share: the README's `MigrationState` (from the shared fixtures
//! crate, which benches and fuzz use too) and a temporary directory.
// Each test binary uses a part of what is shared.
#![allow(dead_code, unused_imports)]

pub use compaction_fixtures::migration::{spilling_state, MigrationState, Subtask, ToolCall};
use std::path::PathBuf;

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
