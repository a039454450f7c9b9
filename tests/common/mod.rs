//! The state types the integration tests share: the issue's `MigrationState` and friends.
#![allow(dead_code)]

use compaction::Effect;
use compaction::{Compactable, EffectLog, Summarizable};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Subtask {
    #[protected]
    pub title: String,
    #[protected]
    pub blocked_on: Option<String>,
    #[redundant]
    pub notes: Vec<String>,
}

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct MigrationState {
    #[protected(pin)]
    pub constraints: Vec<String>,
    #[protected]
    pub plan_step: u32,
    #[protected]
    pub config_path: String,
    #[derivable(pointer = "file://{config_path}")]
    pub config_contents: String,
    #[derivable(pointer = "https://ci.example/runs/{plan_step}", summarize)]
    pub ci_log: String,
    #[redundant]
    pub tool_output: Vec<String>,
    #[effect(idempotent = false)]
    pub migrations: EffectLog,
    #[nested]
    pub subtask: Subtask,
}

#[derive(Summarizable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct ToolCall {
    pub tool: String,
    pub output: String,
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

/// A `MigrationState` whose compaction at a few hundred tokens spills protected state and
/// settled effect records to the store and summarizes `ci_log`: 30 migrations, the last one
/// in flight (`Unknown`).
pub fn spilling_state() -> MigrationState {
    let mut s = MigrationState {
        constraints: vec!["never touch /etc/prod".into(), "numpy<2.0".into()],
        plan_step: 6,
        config_path: "/srv/app/config.toml".into(),
        config_contents: "[db]\nurl = \"postgres://db/app\"\n".into(),
        ci_log: "step ok\n".repeat(400),
        tool_output: (0..200).map(|i| format!("ls output {i}: a b c")).collect(),
        subtask: Subtask {
            title: "rotate keys ".repeat(80),
            blocked_on: Some("human approval".into()),
            notes: vec!["looked at vault".into()],
        },
        ..Default::default()
    };
    for i in 0..30 {
        let key = format!("mig-{i:04}");
        s.migrations
            .record(Effect::new("apply_migration", "db://app/users", &key))
            .unwrap();
        s.migrations.begin(&key).unwrap();
        if i < 29 {
            s.migrations.commit(&key).unwrap();
        }
    }
    s
}
